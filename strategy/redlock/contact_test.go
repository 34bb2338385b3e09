package redlock_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/redigo"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// TestColdStartBurst: many lockers created at once, each dialling every
// node on its first Obtain, find the lock held; each try-once Obtain
// returns ErrNotObtained, not a QuorumError of timed-out dials. The losers'
// TTL of 1s gives them a node timeout of 500ms, the default's floor, half
// that TTL.
func TestColdStartBurst(t *testing.T) {
	servers := redistest.Start(t, nodes)
	const lockers = 32
	for _, c := range []struct {
		name    string
		drivers []redistest.Driver
	}{
		{"goredis", []redistest.Driver{driverNamed("goredis-resp3")}},
		{"redigo", []redistest.Driver{driverNamed("redigo")}},
		{"mixed", redistest.Drivers()},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			key := conformance.Key(t)
			holder, err := newLocker(t, connect(t, servers, c.drivers...)).Obtain(ctx, key, 30*time.Second)
			if err != nil {
				t.Fatalf("the holder's Obtain = %v, want a lock", err)
			}
			defer holder.Release(ctx)
			ls := make([]*lock.Locker, lockers)
			for i := range ls {
				ls[i] = newLocker(t, connect(t, servers, c.drivers...))
			}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				slowest time.Duration
				start   = make(chan struct{})
			)
			for _, l := range ls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					begin := time.Now()
					lk, err := l.Obtain(ctx, key, time.Second)
					elapsed := time.Since(begin)
					mu.Lock()
					slowest = max(slowest, elapsed)
					mu.Unlock()
					if lk != nil {
						t.Errorf("a loser obtained the lock held by another owner")
						_ = lk.Release(ctx)
					}
					if !errors.Is(err, strategy.ErrNotObtained) {
						t.Errorf("Obtain by a loser = %v, want ErrNotObtained", err)
					}
				}()
			}
			close(start)
			wg.Wait()
			t.Logf("%d cold lockers × %d nodes: the slowest try-once Obtain took %v", lockers, nodes, slowest)
		})
	}
}

func TestDuplicateNodes(t *testing.T) {
	ctx := context.Background()
	// refused obtains with fresh keys until the nodes' first contacts have
	// all ended, and returns the error; a node reached only after a quorum
	// may miss the first call, but never votes before it is checked.
	refused := func(t *testing.T, l *lock.Locker, servers []*redistest.Server) error {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			key := conformance.Key(t)
			lk, err := l.Obtain(ctx, key, 10*time.Second)
			if err != nil {
				if n := holds(t, servers, key); n != 0 {
					t.Errorf("servers holding the key after the refusal = %d, want 0", n)
				}
				return err
			}
			_ = lk.Release(ctx)
		}
		t.Fatalf("Obtain over duplicate nodes kept succeeding for 10s, want it refused")
		return nil
	}
	wantDuplicate := func(t *testing.T, err error, arg string, names ...string) {
		t.Helper()
		var ae *strategy.ArgumentError
		if !errors.As(err, &ae) || ae.Name != arg || !errors.As(err, new(*lock.ArgumentError)) {
			t.Fatalf("Obtain over duplicate nodes = %v, want an *ArgumentError naming %q", err, arg)
		}
		for _, name := range names {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error = %q, want it to name %q", err, name)
			}
		}
	}

	t.Run("127.0.0.1:P and localhost:P over go-redis", func(t *testing.T) {
		servers := redistest.Start(t, 2)
		d := driverNamed("goredis-resp3")
		localhost := net.JoinHostPort("localhost", strconv.Itoa(servers[0].Port))
		l := newLocker(t, []driver.Conn{d.Conn(t, servers[0].Addr), d.Conn(t, servers[1].Addr), d.Conn(t, localhost)})
		err := refused(t, l, servers)
		wantDuplicate(t, err, "nodes[2]", servers[0].Addr, localhost)
		if _, again := l.Obtain(ctx, conformance.Key(t), 10*time.Second); !errors.As(again, new(*lock.ArgumentError)) {
			t.Errorf("the next Obtain = %v, want the same refusal", again)
		}
	})

	t.Run("127.0.0.1:P and localhost:P without scripts, which read the run id with INFO, over every driver", func(t *testing.T) {
		servers := redistest.Start(t, 2)
		localhost := net.JoinHostPort("localhost", strconv.Itoa(servers[0].Port))
		for _, d := range redistest.Drivers() {
			t.Run(d.Name, func(t *testing.T) {
				l := newLocker(t, matrix.Marked([]driver.Conn{d.Conn(t, servers[0].Addr), d.Conn(t, servers[1].Addr), d.Conn(t, localhost)}))
				wantDuplicate(t, refused(t, l, servers), "nodes[2]", servers[0].Addr, localhost)
			})
		}
	})

	t.Run("two redigo pools of one server", func(t *testing.T) {
		servers := redistest.Start(t, 2)
		pool := func(s *redistest.Server) driver.Conn { return redigo.New(redistest.Redigo(t, s.Addr)) }
		l := newLocker(t, []driver.Conn{pool(servers[0]), pool(servers[1]), pool(servers[0])})
		wantDuplicate(t, refused(t, l, servers), "nodes[2]", "node 0", "node 2")
	})

	t.Run("a restarted node is not a duplicate", func(t *testing.T) {
		servers := redistest.Start(t, 3)
		l := newLocker(t, connect(t, servers, driverNamed("redigo")))
		servers[2].Kill() // no first contact with node 2 yet
		lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second)
		if err != nil {
			t.Fatalf("Obtain with node 2 down = %v, want a lock", err)
		}
		_ = lk.Release(ctx)
		for _, s := range servers { // node 0 and 1 restart with new run ids; node 2 comes up
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		// Until the pools drop their dead connections an Obtain may fail,
		// but never as a duplicate.
		for deadline := time.Now().Add(10 * time.Second); ; {
			key := conformance.Key(t)
			lk, err := l.Obtain(ctx, key, 10*time.Second)
			if errors.As(err, new(*lock.ArgumentError)) {
				t.Fatalf("Obtain after the restarts = %v, want no duplicate reported", err)
			}
			n := 0
			if err == nil {
				n = holds(t, servers, key)
				_ = lk.Release(ctx)
			}
			if n == len(servers) {
				break // node 2 was reached, and voted
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the restarts, no Obtain within 10s held all %d nodes (last: %v)", len(servers), err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("a node paused at first contact costs a bounded time", func(t *testing.T) {
		servers := redistest.Start(t, nodes)
		l := newLocker(t, connect(t, servers, redistest.Drivers()...))
		servers[2].Pause()
		resumed := false
		defer func() {
			if !resumed {
				servers[2].Resume()
			}
		}()
		const ttl = 2 * time.Second // its node timeout, the grace given to node 2, is the 500ms floor
		start := time.Now()
		lk, err := l.Obtain(ctx, conformance.Key(t), ttl)
		elapsed := time.Since(start)
		const contactTimeout = 5 * time.Second // the bound of a first contact, by docs/design/redlock.md
		t.Logf("Obtain with node 2 paused at first contact: %v (grace 500ms, contact timeout %v)", elapsed, contactTimeout)
		if err != nil {
			t.Fatalf("Obtain with node 2 paused at first contact = %v, want a lock", err)
		}
		_ = lk.Release(ctx)
		if elapsed > contactTimeout*3/4 {
			t.Errorf("Obtain with node 2 paused at first contact took %v, want well before the %v contact timeout", elapsed, contactTimeout)
		}

		// With a majority paused, the caller's deadline ends the wait. (The
		// clients are made first: rueidis.NewClient dials, bounded by its
		// dial timeout rather than by a lock call's context; the other
		// drivers' first contact is the Obtain.)
		fresh := newLocker(t, connect(t, servers, redistest.Drivers()...))
		servers[3].Pause()
		servers[4].Pause()
		defer servers[3].Resume()
		defer servers[4].Resume()
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start = time.Now()
		_, err = fresh.Obtain(dctx, conformance.Key(t), ttl)
		elapsed = time.Since(start)
		t.Logf("Obtain (200ms deadline) with 3 of 5 nodes paused at first contact: %v, %v", elapsed, err)
		if !errors.Is(err, lock.ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, strategy.ErrNotObtained) {
			t.Errorf("Obtain with 3 of 5 nodes paused = %v, want ErrNoAnswer and DeadlineExceeded, not ErrNotObtained: no node found the lock held", err)
		}
		if elapsed > time.Second {
			t.Errorf("Obtain with a 200ms deadline took %v, want well before 1s", elapsed)
		}

		// Once node 2 answers, its first contact ends and it votes.
		servers[2].Resume()
		resumed = true
		for deadline := time.Now().Add(10 * time.Second); ; {
			key := conformance.Key(t)
			lk, err := l.Obtain(ctx, key, 10*time.Second)
			if err == nil {
				held, _ := servers[2].Command(ctx, "EXISTS", key)
				_ = lk.Release(ctx)
				if held == "1" {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 2 did not vote within 10s of its resume (last Obtain: %v)", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestNodeTimeout(t *testing.T) {
	servers := redistest.Start(t, 1)
	s, err := redlock.NewStrategy(connect(t, servers, driverNamed("redigo")))
	if err != nil {
		t.Fatal(err)
	}
	const year = 365 * 24 * time.Hour
	for _, c := range []struct{ ttl, want time.Duration }{
		{150 * time.Millisecond, 75 * time.Millisecond}, // half the TTL
		{time.Second, 500 * time.Millisecond},           // the floor
		{5 * time.Second, 500 * time.Millisecond},
		{16 * time.Second, 800 * time.Millisecond}, // TTL × 0.05
		{30 * time.Second, time.Second},            // the ceiling
		{100 * year, time.Second},
	} {
		if got, err := s.NodeTimeout(c.ttl); got != c.want || err != nil {
			t.Errorf("default node timeout for a TTL of %v = %v, %v; want %v", c.ttl, got, err, c.want)
		}
	}
}

// TestNodeTimeoutCeiling: a 100-year TTL does not make a paused node cost
// a year (its TTL × 0.05 is 5 years): the node timeout stops at
// its 1s ceiling, and the caller's deadline bounds the call before that.
func TestNodeTimeoutCeiling(t *testing.T) {
	servers := redistest.Start(t, nodes)
	l := newLocker(t, connect(t, servers, redistest.Drivers()...))
	ctx := context.Background()
	lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second) // the first contact
	if err != nil {
		t.Fatal(err)
	}
	_ = lk.Release(ctx)
	for _, s := range servers[2:] { // the paused nodes decide the outcome
		s.Pause()
		defer s.Resume()
	}
	const ttl = 100 * 365 * 24 * time.Hour
	for _, c := range []struct {
		name     string
		deadline time.Duration
		within   time.Duration
	}{
		{"a 10s deadline", 10 * time.Second, 5 * time.Second},
		{"a 200ms deadline", 200 * time.Millisecond, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			dctx, cancel := context.WithTimeout(ctx, c.deadline)
			defer cancel()
			start := time.Now()
			lk, err := l.Obtain(dctx, conformance.Key(t), ttl)
			elapsed := time.Since(start)
			t.Logf("Obtain with a 100-year TTL, 3 of 5 nodes paused, %v: %v: %v", c.name, elapsed, err)
			if lk != nil {
				t.Fatalf("Obtain with 3 of 5 nodes paused gave a lock")
			}
			if elapsed > c.within {
				t.Errorf("Obtain with a 100-year TTL took %v, want well under %v (node timeout ceiling 1s)", elapsed, c.within)
			}
		})
	}
}

// TestTTLWithoutValidity: a TTL that the drift allowance (TTL × 0.01 + 2ms)
// would use up is refused before anything is written, naming the limit.
func TestTTLWithoutValidity(t *testing.T) {
	servers := redistest.Start(t, 3)
	l := newLocker(t, connect(t, servers, redistest.Drivers()...))
	ctx := context.Background()
	wantTTLError := func(t *testing.T, err error) {
		t.Helper()
		var ae *strategy.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "ttl" || !strings.Contains(ae.Reason, "more than 2.02ms") {
			t.Errorf("err = %v, want an *ArgumentError naming \"ttl\" and its limit, 2.02ms", err)
		}
	}
	t.Run("Obtain", func(t *testing.T) {
		key := conformance.Key(t)
		_, err := l.Obtain(ctx, key, 2*time.Millisecond)
		wantTTLError(t, err)
		if n := holds(t, servers, key); n != 0 {
			t.Errorf("servers holding the key = %d, want 0", n)
		}
	})
	t.Run("Refresh", func(t *testing.T) {
		lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		wantTTLError(t, lk.Refresh(ctx, 2*time.Millisecond))
		if ttl, err := lk.TTL(ctx); err != nil || ttl < 5*time.Second {
			t.Errorf("TTL after the refused Refresh = %v, %v; want the 10s TTL untouched", ttl, err)
		}
	})
}

// TestEmbeddedNodes: the embedded server reports no run id; its first
// contact still succeeds, and the nodes are told apart by address only.
func TestEmbeddedNodes(t *testing.T) {
	conns := make([]driver.Conn, 3)
	for i := range conns {
		conns[i] = driverNamed("redigo").Conn(t, locktest.NewServer(t).Addr())
	}
	ctx := context.Background()
	lk, err := newLocker(t, conns).Obtain(ctx, conformance.Key(t), 10*time.Second)
	if err != nil {
		t.Fatalf("Obtain over 3 embedded servers = %v, want a lock", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Errorf("Release = %v, want nil", err)
	}
}

// TestPanicInFirstContact: a nil ctx handed to the Strategy itself (a
// Locker refuses one first) panics in the first contact with the nodes.
// Recovered, the panic leaves the Strategy working: a Locker over it
// obtains within its deadline. The panic used to leave the Strategy's
// mutex held, and every later call blocked for ever, past its deadline.
func TestPanicInFirstContact(t *testing.T) {
	servers := redistest.Start(t, 3)
	var none context.Context // nil
	for _, c := range []struct {
		name string
		call func(s *redlock.Strategy)
	}{
		{"Inspect", func(s *redlock.Strategy) { _, _ = s.Inspect(none, "k") }},
		{"Break", func(s *redlock.Strategy) { _, _ = s.Break(none, "k", "") }},
		{"Acquire", func(s *redlock.Strategy) {
			_, _ = s.Acquire(none, strategy.Request{Key: "k", TTL: time.Minute, Token: "t"})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := redlock.NewStrategy(connect(t, servers, redistest.Drivers()...)) // no node contacted yet
			if err != nil {
				t.Fatalf("redlock.NewStrategy: %v", err)
			}
			func() {
				defer func() { _ = recover() }()
				c.call(s)
			}()
			const deadline, margin = 10 * time.Second, 5 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			done := make(chan error, 1) // a wedged Strategy never sends
			go func() {
				lk, err := lock.New(s).Obtain(ctx, conformance.Key(t), time.Minute)
				if err == nil {
					err = lk.Release(ctx)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Obtain and Release after a recovered panic in %s = %v, want nil", c.name, err)
				}
			case <-time.After(deadline + margin):
				t.Fatalf("Obtain after a recovered panic in %s: no return %v past its deadline, want a lock: the Strategy is wedged", c.name, margin)
			}
		})
	}
}
