package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/strategy/single"
)

// newDelayer starts a Delayer in node, on a free port, forwarding to
// upstream, and closes it when t ends.
func newDelayer(t *testing.T, node *Node, upstream string, seed uint64) *Delayer {
	t.Helper()
	d, err := NewDelayer(node, 0, upstream, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

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

// pings returns the round trips of n PINGs, one after another, sorted,
// after one more that the connection's handshake may slow.
func pings(t *testing.T, ping func() error, n int) []time.Duration {
	t.Helper()
	if err := ping(); err != nil {
		t.Fatalf("PING = %v, want PONG", err)
	}
	rtts := make([]time.Duration, n)
	for i := range rtts {
		start := time.Now()
		if err := ping(); err != nil {
			t.Fatalf("PING = %v, want PONG", err)
		}
		rtts[i] = time.Since(start)
	}
	slices.Sort(rtts)
	return rtts
}

// goPing returns a PING of a go-redis client of addr from node, closed
// when t ends.
func goPing(t *testing.T, node *Node, addr string) func() error {
	c := client(node, addr)
	t.Cleanup(func() { c.Close() })
	return func() error { return c.Ping(context.Background()).Err() }
}

// rawPing sends PING on c, and reads its reply from r, c's reader.
func rawPing(c net.Conn, r *bufio.Reader) error {
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("reply %q, want +PONG", line)
	}
	return nil
}

// upstreamClients returns how many TCP clients the server has from addresses
// on the bridge: those of a Delayer in its node, and of direct clients.
func upstreamClients(t *testing.T, s *Server) int {
	t.Helper()
	a := s.Admin()
	defer a.Close()
	list, err := a.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, " addr=10.77.0.")
}

// eventually reports whether cond holds within 5 s, polling it.
func eventually(cond func() bool) bool {
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
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

// TestDelayer: a Delayer in a server's node, between clients of another
// node and a real redis-server.
func TestDelayer(t *testing.T) {
	requireNet(t)
	n := newNet(t, "server", "client")
	srv, cli := n.Node("server"), n.Node("client")
	s := startServer(t, srv, shortDir(t))
	d := newDelayer(t, srv, s.Addr, 1)

	t.Run("its address is on the server's node", func(t *testing.T) {
		host, _, err := net.SplitHostPort(d.Addr())
		if err != nil || host != srv.IP {
			t.Errorf("Addr() = %q, want %s:port", d.Addr(), srv.IP)
		}
	})
	t.Run("PING goes through it, with no delay", func(t *testing.T) {
		direct, proxied := goPing(t, cli, s.Addr), goPing(t, cli, d.Addr())
		var dRTTs, pRTTs []time.Duration
		for range 501 { // in turns, so that the machine's load weighs on both alike
			dRTTs = append(dRTTs, pings(t, direct, 1)...)
			pRTTs = append(pRTTs, pings(t, proxied, 1)...)
		}
		slices.Sort(dRTTs)
		slices.Sort(pRTTs)
		t.Logf("PING round trip p50: direct %v, through the Delayer %v", dRTTs[250], pRTTs[250])
	})
	t.Run("Set(50ms, 0) holds each chunk 50 ms each way: a round trip takes 100 ms or more", func(t *testing.T) {
		d.Set(50*time.Millisecond, 0)
		defer d.Set(0, 0)
		rtts := pings(t, goPing(t, cli, d.Addr()), 5)
		if rtts[0] < 100*time.Millisecond {
			t.Errorf("shortest PING round trip: got %v, want at least 100ms", rtts[0])
		}
	})
	t.Run("Set(50ms, 10ms): a round trip takes about 100 ms", func(t *testing.T) {
		d.Set(50*time.Millisecond, 10*time.Millisecond)
		defer d.Set(0, 0)
		rtts := pings(t, goPing(t, cli, d.Addr()), 21)
		t.Logf("PING round trip with 50±10 ms each way: min %v, p50 %v, max %v", rtts[0], rtts[10], rtts[20])
		if rtts[10] < 80*time.Millisecond {
			t.Errorf("PING round trip p50: got %v, want at least 80ms", rtts[10])
		}
	})
	t.Run("the delay is normal around the mean, with the jitter as its deviation", func(t *testing.T) {
		d.Set(50*time.Millisecond, 10*time.Millisecond)
		defer d.Set(0, 0)
		const draws = 10000
		var sum, sq float64
		for range draws {
			x := float64(d.delay())
			sum += x
			sq += x * x
		}
		mean := sum / draws
		dev := math.Sqrt(sq/draws - mean*mean)
		if got := time.Duration(mean); got < 49*time.Millisecond || got > 51*time.Millisecond {
			t.Errorf("mean of %d delays: got %v, want 50ms ± 1ms", draws, got)
		}
		if got := time.Duration(dev); got < 9*time.Millisecond || got > 11*time.Millisecond {
			t.Errorf("deviation of %d delays: got %v, want 10ms ± 1ms", draws, got)
		}
	})
	t.Run("the delay is never negative", func(t *testing.T) {
		d.Set(0, 10*time.Millisecond)
		defer d.Set(0, 0)
		zero := 0
		for range 1000 {
			x := d.delay()
			if x < 0 {
				t.Fatalf("a delay of Set(0, 10ms): got %v, want 0 or more", x)
			}
			if x == 0 {
				zero++
			}
		}
		if zero < 400 || zero > 600 {
			t.Errorf("delays of Set(0, 10ms) at 0: got %d of 1000, want about half", zero)
		}
	})
	t.Run("the same seed draws the same delays", func(t *testing.T) {
		a, b := newDelayer(t, srv, s.Addr, 42), newDelayer(t, srv, s.Addr, 42)
		other := newDelayer(t, srv, s.Addr, 43)
		same, differ := true, false
		for _, x := range []*Delayer{a, b, other} {
			x.Set(50*time.Millisecond, 10*time.Millisecond)
		}
		for range 100 {
			da, db, do := a.delay(), b.delay(), other.delay()
			same = same && da == db
			differ = differ || da != do
		}
		if !same {
			t.Errorf("delays of two Delayers of seed 42: got different, want the same")
		}
		if !differ {
			t.Errorf("delays of seeds 42 and 43: got the same, want different")
		}
	})
	t.Run("Set(0, 0) ends the delay", func(t *testing.T) {
		d.Set(50*time.Millisecond, 10*time.Millisecond)
		d.Set(0, 0)
		for range 100 {
			if got := d.delay(); got != 0 {
				t.Fatalf("a delay after Set(0, 0): got %v, want 0", got)
			}
		}
		rtts := pings(t, goPing(t, cli, d.Addr()), 21)
		t.Logf("PING round trip p50 after Set(0, 0): %v", rtts[10])
	})
	t.Run("what arrived before Set keeps the delay it had", func(t *testing.T) {
		c := dial(t, cli, d.Addr())
		r := bufio.NewReader(c)
		if err := rawPing(c, r); err != nil { // the connection is up, upstream too
			t.Fatal(err)
		}
		d.Set(300*time.Millisecond, 0)
		start := time.Now()
		if _, err := io.WriteString(c, "PING\r\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the PING has arrived
		d.Set(0, 0)
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got < 300*time.Millisecond {
			t.Errorf("round trip of a PING sent under 300 ms, answered under none: got %v, want at least 300ms", got)
		}
	})
	t.Run("chunks keep their order under jitter", func(t *testing.T) {
		d.Set(10*time.Millisecond, 10*time.Millisecond)
		defer d.Set(0, 0)
		c := dial(t, cli, d.Addr())
		const sent = 50
		for i := range sent {
			// Each command a chunk of its own: far enough apart to be read
			// apart, close enough for their delays to cross.
			if _, err := fmt.Fprintf(c, "ECHO %d\r\n", i); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		r := bufio.NewReader(c)
		for i := range sent {
			header, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
			val, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
			if got, want := header+val, fmt.Sprintf("$%d\r\n%d\r\n", len(fmt.Sprint(i)), i); got != want {
				t.Fatalf("reply %d: got %q, want %q", i, got, want)
			}
		}
	})
	t.Run("a client's close closes its upstream connection", func(t *testing.T) {
		before := upstreamClients(t, s)
		c := dial(t, cli, d.Addr())
		if err := rawPing(c, bufio.NewReader(c)); err != nil {
			t.Fatal(err)
		}
		if got, want := upstreamClients(t, s), before+1; got != want {
			t.Fatalf("server's clients with a client of the Delayer: got %d, want %d", got, want)
		}
		c.Close()
		if !eventually(func() bool { return upstreamClients(t, s) == before }) {
			t.Errorf("server's clients 5 s after the client closed: got %d, want %d", upstreamClients(t, s), before)
		}
	})
	t.Run("killing the server closes the client's connection", func(t *testing.T) {
		d.Set(20*time.Millisecond, 0)
		defer d.Set(0, 0)
		c := dial(t, cli, d.Addr())
		r := bufio.NewReader(c)
		if err := rawPing(c, r); err != nil {
			t.Fatal(err)
		}
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
		}()
		c.SetReadDeadline(time.Now().Add(5 * time.Second)) // a hang fails, not blocks
		_, err := r.ReadByte()
		if !errors.Is(err, io.EOF) {
			t.Errorf("read once the server is killed: got %v, want EOF", err)
		}
		t.Run("and a client that connects while it is down is closed", func(t *testing.T) {
			c := dial(t, cli, d.Addr())
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := c.Read(make([]byte, 1))
			if !errors.Is(err, io.EOF) {
				t.Errorf("read of a connection while the server is down: got %v, want EOF", err)
			}
		})
	})
	t.Run("Close with delayed data pending returns, closes the client's connection and leaves no goroutine", func(t *testing.T) {
		before := runtime.NumGoroutine()
		x, err := NewDelayer(srv, 0, s.Addr, 7)
		if err != nil {
			t.Fatal(err)
		}
		c := dial(t, cli, x.Addr())
		r := bufio.NewReader(c)
		if err := rawPing(c, r); err != nil {
			t.Fatal(err)
		}
		// A PING that reaches the server after 100 ms, and whose reply is
		// held for an hour; and a PING held for an hour.
		x.Set(100*time.Millisecond, 0)
		if _, err := io.WriteString(c, "PING\r\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		x.Set(time.Hour, 0)
		if _, err := io.WriteString(c, "PING\r\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- x.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("Close = %v, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Close with an hour's delay pending: not returned after 5 s, want it to return")
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("read of a client's connection once Close returned: got %v, want EOF", err)
		}
		c.Close()
		if !eventually(func() bool { return runtime.NumGoroutine() <= before }) {
			t.Errorf("goroutines 5 s after Close: got %d, want %d or fewer, as before NewDelayer", runtime.NumGoroutine(), before)
		}
	})
}

// TestDelayerLocks: a lock of single, obtained and released through a
// Delayer of 20 ± 5 ms each way, over each driver.
func TestDelayerLocks(t *testing.T) {
	requireNet(t)
	n := newNet(t, "server", "client")
	srv, cli := n.Node("server"), n.Node("client")
	d := newDelayer(t, srv, startServer(t, srv, shortDir(t)).Addr, 1)
	d.Set(20*time.Millisecond, 5*time.Millisecond)
	for _, drv := range drivers {
		t.Run(drv, func(t *testing.T) {
			l, err := single.New(conn(t, drv, cli, d.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			lk, err := l.Obtain(ctx, "jepsen:delay:"+drv, time.Second)
			if err != nil {
				t.Fatalf("Obtain through the Delayer = %v, want a lock", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release through the Delayer = %v, want nil", err)
			}
		})
	}
}
