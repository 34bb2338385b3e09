package harness

import (
	"context"
	"net"
	"testing"
)

// dial returns a raw connection to addr from node, closed when t ends.
func dial(t *testing.T, node *Node, addr string) net.Conn {
	t.Helper()
	c, err := node.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestListen: a listener that a node makes is on the node's address, in
// its namespace alone, and takes connections from another node.
func TestListen(t *testing.T) {
	requireNet(t)
	n := newNet(t, "server", "client")
	srv, cli := n.Node("server"), n.Node("client")
	l, err := srv.Listen(context.Background(), "tcp", net.JoinHostPort(srv.IP, "0"))
	if err != nil {
		t.Fatalf("Listen on %s = %v, want a listener: the node's address is in its namespace", srv.IP, err)
	}
	defer l.Close()
	accepted := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- err.Error()
			return
		}
		accepted <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
	}()
	dial(t, cli, l.Addr().String())
	if got, want := <-accepted, cli.IP; got != want {
		t.Errorf("Accept: got a connection from %s, want one from %s", got, want)
	}
}
