package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// requireNet skips t unless this process can make a Net, and fails it
// instead when LOCKSMITH_REQUIRE_JEPSEN=1; and sweeps dead runs' leftovers.
func requireNet(t *testing.T) {
	t.Helper()
	require(t, Supported())
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
}

// require skips t, saying why, when err is not nil, and fails it instead
// when LOCKSMITH_REQUIRE_JEPSEN=1.
func require(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("LOCKSMITH_REQUIRE_JEPSEN") == "1" {
		t.Fatalf("%v (LOCKSMITH_REQUIRE_JEPSEN=1)", err)
	}
	t.Skip(err)
}

// newNet makes a Net of names and removes it when t ends.
func newNet(t *testing.T, names ...string) *Net {
	t.Helper()
	n, err := NewNet(names...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// startServer starts a Server in node, with its files in dir, and kills
// it when t ends.
func startServer(t *testing.T, node *Node, dir string) *Server {
	t.Helper()
	return started(t, NewServer(node, dir))
}

// started starts s, and kills it when t ends.
func started(t *testing.T, s *Server) *Server {
	t.Helper()
	redistest.RequireBinary(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Kill(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// shortDir returns a new directory for t's files, removed when t ends, with
// a path short enough for Unix sockets (t.TempDir's carries t's name).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "j")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// client returns a go-redis client of addr that dials from node, with
// short timeouts, so that a cut shows as no answer soon.
func client(node *Node, addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, Dialer: node.DialContext, MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
	})
}

// drivers are the drivers that the runs go over.
var drivers = Drivers

// conn returns a locksmith driver of addr over drv, dialing from node, with
// short timeouts, closed when t ends.
func conn(t *testing.T, drv string, node *Node, addr string) driver.Conn {
	t.Helper()
	c, closer, err := NewConn(drv, node.DialContext, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return c
}

func TestNewNetRefusesBadNames(t *testing.T) {
	for _, names := range [][]string{nil, {""}, {"a", "a"}, make([]string, 251)} {
		n, err := NewNet(names...)
		if err == nil {
			n.Close()
			t.Errorf("NewNet(%d names %q) = nil error, want one", len(names), names[:min(len(names), 3)])
		}
	}
}

func TestNet(t *testing.T) {
	requireNet(t)
	n := newNet(t, "server", "client")
	srv, cli := n.Node("server"), n.Node("client")
	addr := startServer(t, srv, shortDir(t)).Addr
	ping := func() error {
		c := client(cli, addr)
		defer c.Close()
		return c.Ping(context.Background()).Err()
	}
	t.Run("a node reaches another over the bridge", func(t *testing.T) {
		if err := ping(); err != nil {
			t.Errorf("PING = %v, want PONG", err)
		}
	})
	t.Run("a node has no route but its bridge", func(t *testing.T) {
		out, err := cli.Command("ip", "-4", "route").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "10.77.0.0/24 ") || strings.Contains(got, "\n") {
			t.Errorf("routes of a node: got %q, want the bridge's 10.77.0.0/24 alone", got)
		}
	})
	t.Run("a dial ends no thread of the process", func(t *testing.T) {
		// A thread that ended would kill the children it started with a
		// parent-death signal, as redistest's servers are: found when such
		// a server died under TestChecksOnARealRun.
		before := threads(t)
		for range 50 {
			if c, err := cli.DialContext(context.Background(), "tcp", addr); err == nil {
				c.Close()
			}
		}
		after := threads(t)
		for tid := range before {
			if !after[tid] {
				t.Errorf("thread %s ended after 50 dials from a node, want every thread there before still there", tid)
			}
		}
	})
	t.Run("a cut node gets nothing, until healed", func(t *testing.T) {
		if err := srv.Cut(); err != nil {
			t.Fatal(err)
		}
		err := ping()
		if err2 := srv.Heal(); err2 != nil {
			t.Fatal(err2)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("PING of a cut node = %v, want a timeout", err)
		}
		if err := ping(); err != nil {
			t.Errorf("PING once healed = %v, want PONG", err)
		}
	})
	t.Run("Sweep removes the namespaces of a run that ended, and no others, and kills what runs there", func(t *testing.T) {
		dead := 1 << 22 // above Linux's largest process ID: no process has it
		gone, kept := fmt.Sprintf("j%d-1", dead), fmt.Sprintf("j%d-x", dead)
		for _, ns := range []string{gone, kept} {
			if err := ip("netns", "add", ns); err != nil {
				t.Fatal(err)
			}
		}
		defer ip("netns", "del", kept)
		left := exec.Command("ip", "netns", "exec", gone, "sleep", "60") // a server the run left
		if err := left.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() { ended <- left.Wait() }()
		if err := Sweep(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			left.Process.Kill()
			t.Errorf("a process in the namespace of a run that ended: running 10 s after Sweep, want killed")
		}
		for ns, want := range map[string]bool{gone: false, kept: true, srv.ns: true} {
			_, err := os.Stat(filepath.Join(nsRun, ns))
			if got := err == nil; got != want {
				t.Errorf("namespace %s after Sweep: there %v, want %v", ns, got, want)
			}
		}
	})
	t.Run("a name holds the run's process ID", func(t *testing.T) {
		for name, want := range map[string]int{"j42-sw": 42, "j42-3": 42, "j42-": 0, "jx-1": 0, "j42-sw1": 0, "k42-1": 0} {
			if pid, ok := runPID(name); pid != want || ok != (want != 0) {
				t.Errorf("runPID(%q) = %d, %v, want %d, %v", name, pid, ok, want, want != 0)
			}
		}
	})
}

// threads returns the IDs of this process's threads.
func threads(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	tids := map[string]bool{}
	for _, e := range entries {
		tids[e.Name()] = true
	}
	return tids
}

// TestPartitionedServer: clients of single on a server in a namespace of
// its own take turns while the server is cut off from them for five TTLs,
// and then healed, over each driver: no two holders within their validity
// at once, no stale write, no fence out of order, and the lock obtained
// again once healed.
func TestPartitionedServer(t *testing.T) {
	requireNet(t)
	for _, drv := range drivers {
		t.Run(drv, func(t *testing.T) {
			n := newNet(t, "server", "clients")
			srv, clients := n.Node("server"), n.Node("clients")
			l, err := single.New(conn(t, drv, clients, startServer(t, srv, shortDir(t)).Addr))
			if err != nil {
				t.Fatal(err)
			}
			const ttl = 300 * time.Millisecond
			healed := make(chan time.Time, 1)
			go func() {
				time.Sleep(500 * time.Millisecond)
				if err := srv.Cut(); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(5 * ttl)
				if err := srv.Heal(); err != nil {
					t.Error(err)
				}
				healed <- time.Now()
			}()
			r := run(t, l, 4, 4*time.Second, ttl, func(int, int) time.Duration { return 2 * time.Millisecond }, lock.WithFencing())
			t.Log(r)
			if r.ValidityOverlaps != 0 || r.FencesIssuedTwice != 0 || r.FencesOutOfOrder != 0 {
				t.Errorf("got %v, want no validity overlap and fences in order", r.Report)
			}
			if r.writes.Collisions != 0 {
				t.Errorf("register %+v, want no collision", r.writes)
			}
			if r.noAnswer == 0 {
				t.Errorf("Obtains without an answer: got 0, want some: the cut did not take")
			}
			if n := r.after(<-healed); n == 0 {
				t.Errorf("holds obtained once healed: got 0, want some")
			}
		})
	}
}
