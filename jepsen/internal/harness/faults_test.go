package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// requireFirewall skips t unless this process can make a Net and firewall
// it, and fails it instead when LOCKSMITH_REQUIRE_JEPSEN=1.
func requireFirewall(t *testing.T) {
	t.Helper()
	requireNet(t)
	require(t, FirewallSupported())
}

// healAll heals n when t ends, and fails t if it cannot.
func healAll(t *testing.T, n *Net) {
	t.Helper()
	t.Cleanup(func() {
		if err := n.HealAll(); err != nil {
			t.Error(err)
		}
	})
}

// probePort is the UDP port of the probes' listeners.
const probePort = "7077"

// listenUDP returns a UDP socket on node's address, made in its namespace,
// closed when t ends.
func listenUDP(t *testing.T, node *Node) net.PacketConn {
	t.Helper()
	type made struct {
		c   net.PacketConn
		err error
	}
	done := make(chan made, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := enter(filepath.Join(nsRun, node.ns)); err != nil {
			done <- made{nil, err}
			return
		}
		c, err := net.ListenPacket("udp", net.JoinHostPort(node.IP, probePort))
		done <- made{c, err}
	}()
	m := <-done
	if m.err != nil {
		t.Fatal(m.err)
	}
	t.Cleanup(func() { m.c.Close() })
	return m.c
}

// listeners returns a probe listener in each node of nodes.
func listeners(t *testing.T, nodes ...*Node) map[*Node]net.PacketConn {
	t.Helper()
	ls := map[*Node]net.PacketConn{}
	for _, node := range nodes {
		ls[node] = listenUDP(t, node)
	}
	return ls
}

// probes numbers the probes' datagrams, so that each is told from the
// ones before.
var probes atomic.Int64

// reaches reports whether a datagram from `from` arrives at to's listener
// ln: it sends up to three, 100 ms apart, and waits for any of them.
func reaches(t *testing.T, from, to *Node, ln net.PacketConn) bool {
	t.Helper()
	c, err := from.DialContext(context.Background(), "udp", net.JoinHostPort(to.IP, probePort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nonce := fmt.Sprintf("probe %d %s>%s", probes.Add(1), from.Name, to.Name)
	buf := make([]byte, 256)
	for range 3 {
		_, _ = c.Write([]byte(nonce)) // a drop on the way out can fail the write (EPERM)
		deadline := time.Now().Add(100 * time.Millisecond)
		for time.Now().Before(deadline) {
			_ = ln.SetReadDeadline(deadline)
			k, _, err := ln.ReadFrom(buf)
			if err != nil {
				break
			}
			if string(buf[:k]) == nonce {
				return true
			}
		}
	}
	return false
}

// arrivals sends n datagrams from `from` to to's listener ln, a few at a
// time, and returns how many arrived.
func arrivals(t *testing.T, from, to *Node, ln net.PacketConn, n int) int {
	t.Helper()
	c, err := from.DialContext(context.Background(), "udp", net.JoinHostPort(to.IP, probePort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prefix := fmt.Sprintf("count %d ", probes.Add(1))
	got := make(chan int, 1)
	go func() {
		seen := map[string]bool{}
		buf := make([]byte, 256)
		for {
			// The sender takes about n/10 ms; a quiet 300 ms after it
			// means the rest were dropped.
			_ = ln.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			k, _, err := ln.ReadFrom(buf)
			if err != nil {
				got <- len(seen)
				return
			}
			if s := string(buf[:k]); strings.HasPrefix(s, prefix) {
				seen[s] = true
			}
		}
	}()
	for i := range n {
		_, _ = c.Write([]byte(prefix + fmt.Sprint(i)))
		if i%10 == 9 {
			time.Sleep(time.Millisecond) // the reader keeps up: no drop for a full buffer
		}
	}
	return <-got
}

func TestFirewallRefusesBadInput(t *testing.T) {
	// Nets of nodes that no namespace backs: the checks come before
	// iptables.
	n := &Net{prefix: "jx"}
	a := &Node{Name: "a", IP: "10.77.0.1", ns: "jx-1", net: n}
	b := &Node{Name: "b", IP: "10.77.0.2", ns: "jx-2", net: n}
	n.nodes = []*Node{{Name: "switch", ns: "jx-sw", net: n}, a, b}
	other := &Net{prefix: "jy"}
	o := &Node{Name: "o", IP: "10.77.0.1", ns: "jy-1", net: other}
	other.nodes = []*Node{{Name: "switch", ns: "jy-sw", net: other}, o}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"Block from a nil node", n.Block(nil, a)},
		{"Block to a nil node", n.Block(a, nil)},
		{"Block of a node to itself", n.Block(a, a)},
		{"Block to a node of another Net", n.Block(a, o)},
		{"Block from the switch", n.Block(n.nodes[0], a)},
		{"Block on a closed Net", (&Net{prefix: "jx"}).Block(a, b)},
		{"Partition with a nil node", n.Partition([]*Node{a}, []*Node{nil})},
		{"Partition with a node of another Net", n.Partition([]*Node{a}, []*Node{o})},
		{"Partition with a node in two groups", n.Partition([]*Node{a, b}, []*Node{b})},
		{"Loss of a nil node", (*Node)(nil).Loss(0.5)},
		{"Loss below 0", a.Loss(-0.1)},
		{"Loss above 1", a.Loss(1.1)},
		{"Loss of NaN", a.Loss(math.NaN())},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Errorf("got nil, want an error")
			} else if !strings.HasPrefix(c.err.Error(), "jepsen: ") {
				t.Errorf("got %q, want an error that begins with jepsen: ", c.err)
			}
		})
	}
}

func TestBlock(t *testing.T) {
	requireFirewall(t)
	n := newNet(t, "server", "client")
	srvNode, cli := n.Node("server"), n.Node("client")
	srv := startServer(t, srvNode, shortDir(t))
	admin := srv.Admin()
	t.Cleanup(func() { admin.Close() })
	ctx := context.Background()
	// set connects a client to the server, blocks from to to, sends SET key
	// over the connection made before, and returns what the server then
	// holds at key, read on its socket, and the SET's error.
	set := func(t *testing.T, from, to *Node, key string) (string, error) {
		t.Helper()
		healAll(t, n)
		c := client(cli, srv.Addr)
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING before the block = %v, want PONG", err)
		}
		if err := n.Block(from, to); err != nil {
			t.Fatal(err)
		}
		err := c.Set(ctx, key, "landed", 0).Err()
		got, err2 := admin.Get(ctx, key).Result()
		if err2 != nil && !errors.Is(err2, redis.Nil) {
			t.Fatal(err2)
		}
		return got, err
	}
	t.Run("Block(server, client): the client's SET lands, its reply does not come", func(t *testing.T) {
		got, err := set(t, srvNode, cli, "block:replies")
		if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("SET = %v, want a timeout", err)
		}
		if got != "landed" {
			t.Errorf("the server's key: got %q, want %q", got, "landed")
		}
	})
	t.Run("Block(client, server): the client's SET does not land", func(t *testing.T) {
		got, err := set(t, cli, srvNode, "block:requests")
		if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("SET = %v, want a timeout", err)
		}
		if got != "" {
			t.Errorf("the server's key: got %q, want none", got)
		}
	})
	ls := listeners(t, srvNode, cli)
	for _, c := range []struct{ from, to *Node }{{srvNode, cli}, {cli, srvNode}} {
		t.Run(fmt.Sprintf("Block(%s, %s) drops %[1]s's datagrams to %[2]s, and not %[2]s's to %[1]s", c.from.Name, c.to.Name), func(t *testing.T) {
			healAll(t, n)
			if err := n.Block(c.from, c.to); err != nil {
				t.Fatal(err)
			}
			if reaches(t, c.from, c.to, ls[c.to]) {
				t.Errorf("%s to %s: got there, want dropped", c.from.Name, c.to.Name)
			}
			if !reaches(t, c.to, c.from, ls[c.from]) {
				t.Errorf("%s to %s: dropped, want there", c.to.Name, c.from.Name)
			}
		})
	}
}

func TestPartition(t *testing.T) {
	requireFirewall(t)
	n := newNet(t, "a", "b", "c", "d", "e")
	a, b, c, d, e := n.Node("a"), n.Node("b"), n.Node("c"), n.Node("d"), n.Node("e")
	ls := listeners(t, a, b, c, d, e)
	healAll(t, n)
	if err := n.Partition([]*Node{a, b}, []*Node{c, d}); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, pairs [][2]*Node, want bool) {
		t.Helper()
		for _, p := range pairs {
			for _, dir := range [][2]*Node{p, {p[1], p[0]}} {
				if got := reaches(t, dir[0], dir[1], ls[dir[1]]); got != want {
					t.Errorf("%s to %s: got there %v, want %v", dir[0].Name, dir[1].Name, got, want)
				}
			}
		}
	}
	t.Run("nodes of one group reach each other", func(t *testing.T) {
		check(t, [][2]*Node{{a, b}, {c, d}}, true)
	})
	t.Run("nodes of different groups do not, either way", func(t *testing.T) {
		check(t, [][2]*Node{{a, c}, {a, d}, {b, c}, {b, d}}, false)
	})
	t.Run("a node in no group reaches every node, and every node reaches it", func(t *testing.T) {
		check(t, [][2]*Node{{e, a}, {e, b}, {e, c}, {e, d}}, true)
	})
}

func TestLoss(t *testing.T) {
	requireFirewall(t)
	n := newNet(t, "lossy", "peer")
	lossy, peer := n.Node("lossy"), n.Node("peer")
	ls := listeners(t, lossy, peer)
	healAll(t, n)
	const p, count = 0.2, 1000
	if err := lossy.Loss(p); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what     string
		from, to *Node
	}{
		{"sent by the lossy node", lossy, peer},
		{"received by the lossy node", peer, lossy},
	} {
		t.Run(fmt.Sprintf("Loss(%v) drops about %v of the datagrams %s", p, p, c.what), func(t *testing.T) {
			got := arrivals(t, c.from, c.to, ls[c.to], count)
			lost := 1 - float64(got)/count
			t.Logf("%d of %d datagrams %s arrived: %.1f %% lost, want about %.0f %%", got, count, c.what, 100*lost, 100*p)
			// A loose range: the figure, not its precision, is what the
			// test is for (a binomial's deviation here is about 1.3 %).
			if lost < p/4 || lost > 2*p {
				t.Errorf("lost: got %.3f, want %v to %v", lost, p/4, 2*p)
			}
		})
	}
}

func TestHealAll(t *testing.T) {
	requireFirewall(t)
	n := newNet(t, "a", "b", "c")
	a, b, c := n.Node("a"), n.Node("b"), n.Node("c")
	ls := listeners(t, a, b, c)
	// A rule of a's own, outside the Net's chain: HealAll leaves it.
	const own = "-A INPUT -s 10.77.0.99/32 -j DROP"
	if _, err := a.iptables(strings.Fields(own)...); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{n.Partition([]*Node{a}, []*Node{b}), n.Block(c, a), c.Loss(1), b.Cut()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if reaches(t, c, b, ls[b]) {
		t.Fatalf("c to b before HealAll: got there, want the faults to drop it")
	}
	if err := n.HealAll(); err != nil {
		t.Fatal(err)
	}
	t.Run("every node reaches every other", func(t *testing.T) {
		for _, from := range []*Node{a, b, c} {
			for _, to := range []*Node{a, b, c} {
				if from != to && !reaches(t, from, to, ls[to]) {
					t.Errorf("%s to %s: dropped, want there", from.Name, to.Name)
				}
			}
		}
	})
	t.Run("no rule is left in the Net's chain of any node", func(t *testing.T) {
		for _, node := range []*Node{a, b, c} {
			rules, err := node.iptables("-S", chain)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.TrimSpace(rules), "-N "+chain; got != want {
				t.Errorf("%s's chain: got %q, want %q", node.Name, got, want)
			}
		}
	})
	t.Run("a rule outside the Net's chain stays", func(t *testing.T) {
		rules, err := a.iptables("-S", "INPUT")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rules, own+"\n") {
			t.Errorf("a's INPUT: got %q, want it to hold %q", rules, own)
		}
	})
}
