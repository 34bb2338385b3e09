package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
)

const nodes = 5

// connect opens one client per server, with the driver drivers[i%len].
func connect(t testing.TB, servers []*redistest.Server, drivers ...redistest.Driver) []driver.Conn {
	conns := make([]driver.Conn, len(servers))
	for i, s := range servers {
		conns[i] = drivers[i%len(drivers)].Conn(t, s.Addr)
	}
	return conns
}

func newLocker(t testing.TB, conns []driver.Conn, opts ...redlock.Option) *lock.Locker {
	t.Helper()
	l, err := redlock.New(conns, opts...)
	if err != nil {
		t.Fatalf("redlock.New: %v", err)
	}
	return l
}

func driverNamed(name string) redistest.Driver {
	for _, d := range redistest.Drivers() {
		if d.Name == name {
			return d
		}
	}
	panic(name)
}

// TestConformance runs the suite on independent masters only, never on a
// Redis Cluster (where single and setnx-getset also run): Redlock's nodes
// must each hold every key, and a Cluster's masters each own a share of the
// slots (the others answer MOVED), so no quorum could be had.
func TestConformance(t *testing.T) {
	servers := redistest.Start(t, nodes)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	matrix.Run(t, suiteCombos(matrix.Redlock(addrs)), 1)
}

// suiteCombos returns those of Redlock's combinations that its suite runs,
// one at a time: side by side, four MutualExclusions took past the suite's
// 2-minute bound on two busy cores. README's command runs the mixed
// combination only, whose nodes use every driver, at the quick size;
// LOCKSMITH_FULL=1 runs it at full size, and each driver on its own too,
// at a quarter size, so that the package stays well within go test's
// 10 minutes on a busy machine.
func suiteCombos(combos []matrix.Combo) []matrix.Combo {
	if !redistest.Full() {
		return onlyMixed(combos)
	}
	for i, c := range combos {
		if !mixed(c) {
			combos[i].Harness.Acquisitions = 500
		}
	}
	return combos
}

// mixed reports whether c is the combination whose nodes use every driver
// ("mixed", or "mixed" under a prefix).
func mixed(c matrix.Combo) bool { return c.Name == "mixed" || strings.HasSuffix(c.Name, "/mixed") }

// onlyMixed returns the mixed combinations of combos.
func onlyMixed(combos []matrix.Combo) []matrix.Combo {
	return slices.DeleteFunc(combos, func(c matrix.Combo) bool { return !mixed(c) })
}

func TestBadConfiguration(t *testing.T) {
	servers := redistest.Start(t, 3)
	d := driverNamed("goredis-resp3")
	conns := connect(t, servers, d)
	for _, c := range []struct {
		name  string
		nodes []driver.Conn
		opts  []redlock.Option
		arg   string
	}{
		{"an empty node list", nil, nil, "nodes"},
		{"a nil client", []driver.Conn{conns[0], nil, conns[2]}, nil, "nodes[1]"},
		{"the same node twice", []driver.Conn{conns[0], conns[1], conns[0]}, nil, "nodes[2]"},
		{"two clients of one address", []driver.Conn{conns[0], conns[1], d.Conn(t, servers[1].Addr)}, nil, "nodes[2]"},
		{"a quorum below a majority", conns, []redlock.Option{redlock.WithQuorum(1)}, "quorum"},
		{"a quorum above N", conns, []redlock.Option{redlock.WithQuorum(4)}, "quorum"},
		{"a negative drift factor", conns, []redlock.Option{redlock.WithDriftFactor(-0.1)}, "drift factor"},
		{"a drift factor of 1", conns, []redlock.Option{redlock.WithDriftFactor(1)}, "drift factor"},
		{"a negative node timeout", conns, []redlock.Option{redlock.WithNodeTimeout(-time.Second)}, "node timeout"},
		{"a nil option", conns, []redlock.Option{nil}, "option"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := redlock.New(c.nodes, c.opts...)
			var ae *strategy.ArgumentError
			if l != nil || !errors.As(err, &ae) || ae.Name != c.arg {
				t.Errorf("New(%s) = %v, %v; want nil and an ArgumentError naming %q", c.name, l, err, c.arg)
			}
		})
	}
	t.Run("a node timeout not below the TTL", func(t *testing.T) {
		l := newLocker(t, conns, redlock.WithNodeTimeout(time.Second))
		key := conformance.Key(t)
		_, err := l.Obtain(context.Background(), key, time.Second)
		var ae *strategy.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "node timeout" {
			t.Errorf("Obtain with TTL = node timeout = %v, want an ArgumentError naming \"node timeout\"", err)
		}
	})
	t.Run("quorum arithmetic", func(t *testing.T) {
		for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3} {
			s, err := redlock.NewStrategy(connect(t, redistest.Start(t, n), d))
			if err != nil {
				t.Fatal(err)
			}
			if s.Quorum() != want {
				t.Errorf("quorum of %d nodes = %d, want %d", n, s.Quorum(), want)
			}
		}
	})
}

// holds reports how many of the servers hold key.
func holds(t *testing.T, servers []*redistest.Server, key string) int {
	t.Helper()
	n := 0
	for _, s := range servers {
		if got, err := s.Command(context.Background(), "EXISTS", key); err == nil && got == "1" {
			n++
		}
	}
	return n
}

// eventuallyNone waits (up to a generous bound) until no reachable server
// holds key: a node that answered after the outcome was decided is released
// in the background, within the node timeout.
func eventuallyNone(t *testing.T, servers []*redistest.Server, key string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); holds(t, servers, key) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d reachable nodes still hold %q, want 0", holds(t, servers, key), key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMinorityDown(t *testing.T) {
	servers := redistest.Start(t, nodes)
	l := newLocker(t, connect(t, servers, redistest.Drivers()...))
	servers[1].Kill()
	servers[3].Kill()
	ctx := context.Background()
	lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second)
	if err != nil {
		t.Fatalf("Obtain with 2 of 5 nodes down = %v, want a lock", err)
	}
	if err := lk.Refresh(ctx, 20*time.Second); err != nil {
		t.Errorf("Refresh with 2 of 5 nodes down = %v, want nil", err)
	}
	if ttl, err := lk.TTL(ctx); err != nil || ttl <= 10*time.Second {
		t.Errorf("TTL with 2 of 5 nodes down = %v, %v; want more than 10s after the refresh", ttl, err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Errorf("Release with 2 of 5 nodes down = %v, want nil", err)
	}
	if n := holds(t, servers, lk.Key()); n != 0 {
		t.Errorf("nodes holding the key after Release = %d, want 0", n)
	}
}

func TestMajorityDown(t *testing.T) {
	servers := redistest.Start(t, nodes)
	l := newLocker(t, connect(t, servers, redistest.Drivers()...))
	for _, i := range []int{0, 2, 4} {
		servers[i].Kill()
	}
	key := conformance.Key(t)
	start := time.Now()
	_, err := l.Obtain(context.Background(), key, 10*time.Second, lock.WithRetry(lock.Linear(10*time.Millisecond)))
	elapsed := time.Since(start)
	t.Logf("time to fail with 3 of 5 nodes down: %v", elapsed)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("Obtain with 3 of 5 nodes down = %v, want a *QuorumError", err)
	}
	if errors.Is(err, strategy.ErrNotObtained) {
		t.Errorf("errors.Is(err, ErrNotObtained) = true, want false: no quorum is possible, so it must not wait and retry")
	}
	for _, i := range []int{0, 2, 4} {
		if n := qe.Nodes[i]; n.Outcome != redlock.Refused || n.Node != servers[i].Addr {
			t.Errorf("node %d = %s %v, want %s refused", i, n.Node, n.Outcome, servers[i].Addr)
		}
	}
	var ne *redlock.NodeError
	if !errors.As(err, &ne) || ne.Outcome != redlock.Refused {
		t.Errorf("errors.As(err, *NodeError) = %v, want a refused node", ne)
	}
	if elapsed > 5*time.Second {
		t.Errorf("time to fail = %v, want well under the 10s TTL (a generous bound)", elapsed)
	}
	t.Logf("error: %v", err)
	eventuallyNone(t, []*redistest.Server{servers[1], servers[3]}, key)
}

func TestPausedNode(t *testing.T) {
	servers := redistest.Start(t, nodes)
	const nodeTimeout = 100 * time.Millisecond
	l := newLocker(t, connect(t, servers, redistest.Drivers()...), redlock.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second) // warm the connections
	if err != nil {
		t.Fatal(err)
	}
	_ = lk.Release(ctx)
	servers[2].Pause()
	defer servers[2].Resume()
	var worst time.Duration
	for range 5 {
		start := time.Now()
		lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second)
		elapsed := time.Since(start)
		worst = max(worst, elapsed)
		if err != nil {
			t.Fatalf("Obtain with one node paused = %v, want a lock", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release with one node paused = %v, want nil", err)
		}
	}
	t.Logf("worst obtain latency with one of 5 nodes paused: %v (node timeout %v)", worst, nodeTimeout)
	if worst > 20*nodeTimeout {
		t.Errorf("obtain latency with a paused node = %v, want bounded by the %v node timeout (generous bound %v)", worst, nodeTimeout, 20*nodeTimeout)
	}

	// Now the paused node decides the outcome: with 2 nodes down, the
	// attempt needs it, and must give up on it after the node timeout.
	servers[0].Kill()
	servers[4].Kill()
	start := time.Now()
	_, err = l.Obtain(ctx, conformance.Key(t), 10*time.Second)
	elapsed := time.Since(start)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.Nodes[2].Outcome != redlock.Timeout {
		t.Fatalf("Obtain needing the paused node = %v, want a *QuorumError with node 2 timed out", err)
	}
	if !errors.Is(err, lock.ErrNoAnswer) || errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("Obtain needing the paused node = %v, want ErrNoAnswer, not ErrNotObtained: the node it needed did not answer", err)
	}
	t.Logf("obtain latency when the paused node is needed: %v (node timeout %v)", elapsed, nodeTimeout)
	if elapsed > 20*nodeTimeout {
		t.Errorf("obtain latency needing the paused node = %v, want bounded by the %v node timeout (generous bound %v), not the 10s TTL", elapsed, nodeTimeout, 20*nodeTimeout)
	}
}

// deaf is a node whose driver, once deaf is set, ignores its context and
// never answers, until gone is closed.
type deaf struct {
	driver.Conn
	deaf *atomic.Bool
	gone <-chan struct{}
}

// wait returns whether the node is deaf, once gone is closed.
func (d deaf) wait() bool {
	if !d.deaf.Load() {
		return false
	}
	<-d.gone
	return true
}

var errGone = errors.New("gone")

func (d deaf) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if d.wait() {
		return false, errGone
	}
	return d.Conn.SetNX(ctx, key, value, ttl)
}

func (d deaf) Get(ctx context.Context, key string) (string, bool, error) {
	if d.wait() {
		return "", false, errGone
	}
	return d.Conn.Get(ctx, key)
}

func (d deaf) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	if d.wait() {
		return "", false, errGone
	}
	return d.Conn.GetSet(ctx, key, value)
}

func (d deaf) Del(ctx context.Context, key string) (bool, error) {
	if d.wait() {
		return false, errGone
	}
	return d.Conn.Del(ctx, key)
}

func (d deaf) PTTL(ctx context.Context, key string) (time.Duration, bool, error) {
	if d.wait() {
		return 0, false, errGone
	}
	return d.Conn.PTTL(ctx, key)
}

func (d deaf) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	if d.wait() {
		return nil, errGone
	}
	return d.Conn.EvalSha(ctx, sha1, keys, args...)
}

func (d deaf) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	if d.wait() {
		return nil, errGone
	}
	return d.Conn.Eval(ctx, src, keys, args...)
}

// TestDeafNodes: nodes whose drivers never return, though their deadline
// passed, cost no more than the node timeout, or the first contact's
// timeout, and the error of a call that needed them says that Redis did
// not answer, never that the lock is held.
func TestDeafNodes(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	gone := make(chan struct{})
	t.Cleanup(func() { close(gone) }) // after the Lockers' clean-ups
	// newDeaf returns a Locker over servers, nodes 1 and 2 deaf once *on
	// is set.
	newDeaf := func(on *atomic.Bool) *lock.Locker {
		conns := connect(t, servers, redistest.Drivers()...)
		for i := 1; i < 3; i++ {
			conns[i] = deaf{Conn: conns[i], deaf: on, gone: gone}
		}
		return newLocker(t, conns, redlock.WithNodeTimeout(50*time.Millisecond))
	}

	t.Run("after the first contact", func(t *testing.T) {
		var on atomic.Bool
		l := newDeaf(&on)
		lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second)
		if err != nil {
			t.Fatalf("Obtain before the nodes went deaf = %v, want a lock", err)
		}
		on.Store(true)
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrNoAnswer) || !strings.Contains(fmt.Sprint(err), "Redis did not answer") {
			t.Errorf("Release with 2 of 3 nodes deaf = %v, want ErrNoAnswer, saying that Redis did not answer", err)
		}
		if _, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second); !errors.Is(err, lock.ErrNoAnswer) || errors.Is(err, lock.ErrNotObtained) ||
			!strings.Contains(fmt.Sprint(err), "Redis did not answer") {
			t.Errorf("Obtain with 2 of 3 nodes deaf = %v, want ErrNoAnswer, not ErrNotObtained, saying that Redis did not answer", err)
		}
	})

	t.Run("at the first contact", func(t *testing.T) {
		if !redistest.Full() {
			t.Skip("waits out the first contact's timeout, 5s and a half more: LOCKSMITH_FULL=1 runs it")
		}
		var on atomic.Bool
		on.Store(true)
		if _, err := newDeaf(&on).Obtain(ctx, conformance.Key(t), 10*time.Second); !errors.Is(err, lock.ErrNoAnswer) || errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain with 2 of 3 nodes deaf = %v, want ErrNoAnswer, not ErrNotObtained", err)
		}
	})
}

// TestRestartHazard reproduces the hazard of the specification: A holds a
// lock on nodes 0-2 while 3 and 4 are down; node 2 crashes and comes back
// empty at once, 3 and 4 come back, and B gathers a quorum on 2-4 while A's
// lock is still valid. With the delayed restart, it does not happen.
func TestRestartHazard(t *testing.T) {
	ctx := context.Background()
	scenario := func(t *testing.T, ttl time.Duration, opts ...redlock.Option) (a *lock.Lock, b *lock.Locker, servers []*redistest.Server, key string) {
		servers = redistest.Start(t, nodes)
		for _, s := range servers { // long-running nodes, for the guard
			if _, err := s.Command(ctx, "SET", redlock.GuardKey, "0"); err != nil {
				t.Fatal(err)
			}
		}
		d := redistest.Drivers()
		servers[3].Kill()
		servers[4].Kill()
		key = conformance.Key(t)
		a, err := newLocker(t, connect(t, servers, d...), opts...).Obtain(ctx, key, ttl)
		if err != nil {
			t.Fatalf("A's Obtain on 3 of 5 nodes = %v, want a lock", err)
		}
		for _, i := range []int{2, 3, 4} {
			if err := servers[i].Restart(); err != nil {
				t.Fatal(err)
			}
		}
		return a, newLocker(t, connect(t, servers, d...), opts...), servers, key
	}

	t.Run("an immediate restart lets a second client in", func(t *testing.T) {
		a, b, _, key := scenario(t, 30*time.Second)
		lk, err := b.Obtain(ctx, key, 30*time.Second)
		if err != nil {
			t.Fatalf("B's Obtain after node 2 restarted empty = %v, want the hazard: a lock", err)
		}
		defer lk.Release(ctx)
		if !time.Now().Before(a.ValidUntil()) {
			t.Fatalf("A's lock expired before B obtained it: the hazard was not reproduced")
		}
		t.Logf("hazard reproduced: A and B both hold %q, A for another %v", key, time.Until(a.ValidUntil()).Round(time.Second))
	})

	t.Run("the restart guard keeps a restarted node out", func(t *testing.T) {
		const maxTTL = 30 * time.Second
		a, b, _, key := scenario(t, maxTTL, redlock.WithRestartGuard(maxTTL))
		_, err := b.Obtain(ctx, key, maxTTL)
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("B's Obtain = %v, want a *QuorumError", err)
		}
		restarting := 0
		for i, n := range qe.Nodes {
			switch {
			case n.Outcome == redlock.OK:
				t.Errorf("node %d granted B the lock, want none to", i)
			case n.Outcome == redlock.Restarting:
				restarting++
			case i >= 2 && n.Outcome != redlock.Pending:
				t.Errorf("restarted node %d = %v, want restarting (or pending: not waited for)", i, n.Outcome)
			}
		}
		if restarting == 0 {
			t.Errorf("nodes answering restarting = 0, want at least 1")
		}
		t.Logf("B was refused: %v", err)
		// A kept nodes 0 and 1 only: its next Refresh fails, so A learns it
		// has lost the lock.
		if err := a.Refresh(ctx, maxTTL); err == nil {
			t.Errorf("A's Refresh with 2 of 5 nodes = nil, want an error")
		}
	})

	t.Run("a restart delayed past the TTL lets nobody in early", func(t *testing.T) {
		const ttl = 500 * time.Millisecond
		servers := redistest.Start(t, nodes)
		d := redistest.Drivers()
		servers[3].Kill()
		servers[4].Kill()
		key := conformance.Key(t)
		a, err := newLocker(t, connect(t, servers, d...)).Obtain(ctx, key, ttl)
		if err != nil {
			t.Fatal(err)
		}
		servers[2].Kill()
		time.Sleep(ttl + 100*time.Millisecond) // the delayed restart: longer than the TTL
		for _, i := range []int{2, 3, 4} {
			if err := servers[i].Restart(); err != nil {
				t.Fatal(err)
			}
		}
		lk, err := newLocker(t, connect(t, servers, d...)).Obtain(ctx, key, ttl)
		if err != nil {
			t.Fatalf("B's Obtain after the delayed restart = %v, want a lock (A's has expired)", err)
		}
		defer lk.Release(ctx)
		if time.Now().Before(a.ValidUntil()) {
			t.Errorf("B obtained the lock %v before A's validity ended", time.Until(a.ValidUntil()))
		}
	})
}

// slowConn delays every script by delay, honouring the context.
type slowConn struct {
	driver.Conn
	delay time.Duration
}

func (c slowConn) wait(ctx context.Context) error {
	select {
	case <-time.After(c.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c slowConn) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Conn.EvalSha(ctx, sha1, keys, args...)
}

func (c slowConn) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Conn.Eval(ctx, src, keys, args...)
}

func TestValidity(t *testing.T) {
	servers := redistest.Start(t, nodes)
	ctx := context.Background()

	t.Run("a slow acquisition leaves a shorter validity", func(t *testing.T) {
		const ttl, delay = 2 * time.Second, 300 * time.Millisecond
		conns := connect(t, servers, redistest.Drivers()...)
		for i, c := range conns {
			conns[i] = slowConn{c, delay}
		}
		lk, err := newLocker(t, conns, redlock.WithNodeTimeout(time.Second)).Obtain(ctx, conformance.Key(t), ttl)
		if err != nil {
			t.Fatalf("Obtain with %v slow nodes = %v, want a lock", delay, err)
		}
		defer lk.Release(ctx)
		drift := ttl/100 + 2*time.Millisecond // the default factor is 0.01
		if left := time.Until(lk.ValidUntil()); left > ttl-delay-drift {
			t.Errorf("validity left = %v, want at most TTL − delay − drift = %v", left, ttl-delay-drift)
		}
	})

	t.Run("an acquisition slower than the TTL is not obtained, and is released", func(t *testing.T) {
		const ttl = time.Second
		var calls atomic.Int64
		start := time.Now()
		clock := func() time.Time { // the second reading is a TTL later
			if calls.Add(1) == 1 {
				return start
			}
			return start.Add(ttl)
		}
		key := conformance.Key(t)
		l := newLocker(t, connect(t, servers, redistest.Drivers()...), redlock.WithClock(clock))
		_, err := l.Obtain(ctx, key, ttl)
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) || qe.Elapsed < ttl || !errors.Is(err, strategy.ErrNotObtained) {
			t.Fatalf("Obtain slower than its TTL = %v, want a *QuorumError with Elapsed ≥ %v matching ErrNotObtained", err, ttl)
		}
		eventuallyNone(t, servers, key)
	})
}

// TestFailedAttemptLeavesNoKeys: an attempt that fails because a quorum is
// held elsewhere removes what it set on the reachable nodes.
func TestFailedAttemptLeavesNoKeys(t *testing.T) {
	servers := redistest.Start(t, nodes)
	ctx := context.Background()
	key := conformance.Key(t)
	for _, s := range servers[:3] { // another owner holds nodes 0-2
		if _, err := s.Command(ctx, "SET", key, "another-owner", "PX", "30000"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := newLocker(t, connect(t, servers, redistest.Drivers()...)).Obtain(ctx, key, 10*time.Second)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, strategy.ErrNotObtained) {
		t.Fatalf("Obtain of a lock held on 3 of 5 nodes = %v, want a *QuorumError matching ErrNotObtained", err)
	}
	eventuallyNone(t, servers[3:], key)
	for _, s := range servers[:3] {
		if got, _ := s.Command(ctx, "GET", key); got != "another-owner" {
			t.Errorf("the other owner's value on %s = %q, want it untouched", s.Addr, got)
		}
	}
}

// TestLostRefreshLeavesNoKeys: a refresh that finds the lock taken on a
// quorum of nodes deletes it from the nodes that it extended, where our
// token would count against every contender's quorum until its TTL ended,
// and leaves the other owner's keys alone.
func TestLostRefreshLeavesNoKeys(t *testing.T) {
	servers := redistest.Start(t, nodes)
	ctx := context.Background()
	l := newLocker(t, connect(t, servers, redistest.Drivers()...))
	for _, keys := range []int{1, 2} {
		t.Run(strconv.Itoa(keys)+" keys", func(t *testing.T) {
			names := []string{conformance.Key(t) + "{tag}"}
			if keys > 1 {
				names = append(names, conformance.Key(t)+"{tag}:2")
			}
			obtain := func() (*lock.Lock, error) { return l.Obtain(ctx, names[0], 10*time.Second) }
			if keys > 1 {
				obtain = func() (*lock.Lock, error) { return l.ObtainMany(ctx, names, 10*time.Second) }
			}
			lk, err := obtain()
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range servers[:3] { // another owner holds nodes 0-2
				if _, err := s.Command(ctx, "SET", names[0], "another-owner", "PX", "30000"); err != nil {
					t.Fatal(err)
				}
			}
			if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrTaken) {
				t.Fatalf("Refresh of a lock taken on 3 of 5 nodes = %v, want ErrTaken", err)
			}
			for _, k := range names {
				eventuallyNone(t, servers[3:], k)
			}
			for _, s := range servers[:3] {
				if got, _ := s.Command(ctx, "GET", names[0]); got != "another-owner" {
					t.Errorf("the other owner's value on %s = %q, want it untouched", s.Addr, got)
				}
			}
		})
	}
}

// TestLostRefreshWhileAcquiring: a Refresh that finds the lock lost while
// the lock's acquire is still on its way to a node (its SET is held back,
// then written past the acquire's deadline, as a command that a loaded
// server runs late) deletes it there too, once that acquire returned.
func TestLostRefreshWhileAcquiring(t *testing.T) {
	servers := redistest.Start(t, nodes)
	ctx := context.Background()
	conns := connect(t, servers, redistest.Drivers()...)
	gate := make(chan struct{})
	conns[4] = lateSetNX{conns[4], gate}
	l := newLocker(t, conns)
	key := conformance.Key(t)
	lk, err := l.Obtain(ctx, key, time.Minute)
	if err != nil {
		close(gate)
		t.Fatalf("Obtain with node 4's SET held back = %v, want a lock", err)
	}
	for _, s := range servers[:3] { // another owner holds nodes 0-2
		if _, err := s.Command(ctx, "SET", key, "another-owner", "PX", "60000"); err != nil {
			close(gate)
			t.Fatal(err)
		}
	}
	err = lk.Refresh(ctx, time.Minute)
	close(gate) // node 4 runs the acquire's SET now, after the Refresh returned
	if !errors.Is(err, lock.ErrTaken) {
		t.Fatalf("Refresh of a lock taken on 3 of 5 nodes = %v, want ErrTaken", err)
	}
	eventuallyNone(t, servers[3:], key)
}

// lateSetNX holds every SetNX back until gate closes, then runs it whatever
// its context says.
type lateSetNX struct {
	driver.Conn
	gate chan struct{}
}

func (c lateSetNX) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	<-c.gate
	return c.Conn.SetNX(context.WithoutCancel(ctx), key, value, ttl)
}

func TestMaxExtensions(t *testing.T) {
	servers := redistest.Start(t, 3)
	ctx := context.Background()
	l := newLocker(t, connect(t, servers, redistest.Drivers()...)).With(lock.WithMaxRefreshes(2))
	lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	for i := range 2 {
		if err := lk.Refresh(ctx, 10*time.Second); err != nil {
			t.Fatalf("extension %d = %v, want nil", i+1, err)
		}
	}
	if err := lk.Refresh(ctx, 10*time.Second); !errors.Is(err, lock.ErrRefreshLimit) {
		t.Errorf("third extension with a cap of 2 = %v, want ErrRefreshLimit", err)
	}
	more, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second, lock.WithMaxRefreshes(3))
	if err != nil {
		t.Fatal(err)
	}
	defer more.Release(ctx)
	for i := range 3 {
		if err := more.Refresh(ctx, 10*time.Second); err != nil {
			t.Errorf("extension %d with a per-call cap of 3 = %v, want nil", i+1, err)
		}
	}
}

// TestContentionWithFaults: goroutines contend while nodes are killed and
// restarted, one at a time, each restart delayed past the TTL.
func TestContentionWithFaults(t *testing.T) {
	servers := redistest.Start(t, nodes)
	const ttl = 400 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := conformance.Key(t)
	var (
		d        conformance.Detector
		wg       sync.WaitGroup
		failures atomic.Int64
		restarts atomic.Int64
	)
	chaosDone := make(chan struct{})
	go func() { // the chaos: kill a node, wait past the TTL, restart it
		defer close(chaosDone)
		for ctx.Err() == nil {
			s := servers[rand.N(nodes)]
			s.Kill()
			select {
			case <-ctx.Done():
			case <-time.After(ttl + 100*time.Millisecond):
			}
			if err := s.Restart(); err != nil {
				t.Errorf("restart: %v", err)
				return
			}
			restarts.Add(1)
		}
	}()
	// 200 acquisitions see about twenty node restarts; LOCKSMITH_FULL=1
	// runs 1500.
	want := int64(200)
	if redistest.Full() {
		want = 1500
	}
	for range 6 {
		l := newLocker(t, connect(t, servers, redistest.Drivers()...), redlock.WithNodeTimeout(50*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d.Entries() < want && ctx.Err() == nil {
				octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
				lk, err := l.Obtain(octx, key, ttl, lock.WithRetry(lock.Exponential(time.Millisecond, 8*time.Millisecond)))
				ocancel()
				if err != nil {
					// Nodes died mid-attempt (or a client still holds a
					// cached dial error for a node that just came back).
					if failures.Add(1) == 1 {
						t.Logf("first failed obtain: %v", err)
					}
					continue
				}
				if time.Now().Before(lk.ValidUntil()) {
					d.Hold(50 * time.Microsecond)
				}
				_ = lk.Release(ctx)
			}
		}()
	}
	wg.Wait()
	cancel()
	<-chaosDone
	t.Logf("acquisitions=%d overlaps=%d failed-obtains=%d node-restarts=%d", d.Entries(), d.Overlaps(), failures.Load(), restarts.Load())
	if d.Overlaps() != 0 {
		t.Errorf("overlaps = %d, want 0", d.Overlaps())
	}
	if d.Entries() == 0 {
		t.Errorf("acquisitions = 0, want some")
	}
}

func TestQuorumErrorText(t *testing.T) {
	servers := redistest.Start(t, 3)
	servers[0].Kill()
	servers[1].Kill()
	l := newLocker(t, connect(t, servers, redistest.Drivers()...))
	lk, err := l.Obtain(context.Background(), conformance.Key(t), time.Second)
	if lk != nil {
		t.Fatal("obtained with 2 of 3 nodes down")
	}
	for _, want := range []string{"redlock: obtain: no quorum (2 of 3 nodes needed)", "refused", servers[0].Addr} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error = %q, want it to contain %q", err, want)
		}
	}
}

// TestNoAnswer: a call that failed because nodes did not answer in time
// (stopped with SIGSTOP) matches lock.ErrNoAnswer, and says that Redis did
// not answer, whatever the other nodes answered, over every driver; an
// Obtain whose answering nodes were a quorum and found the lock held
// matches ErrNotObtained and not ErrNoAnswer, though a node did not answer.
func TestNoAnswer(t *testing.T) {
	ctx := context.Background()
	const noAnswer = "Redis did not answer"
	// over starts 3 servers and a Locker over them through d, and holds a
	// lock of key there, before the nodes fail.
	over := func(t *testing.T, d redistest.Driver) (servers []*redistest.Server, l *lock.Locker, held *lock.Lock, key string) {
		servers = redistest.Start(t, 3)
		l = newLocker(t, connect(t, servers, d))
		key = conformance.Key(t)
		held, err := l.Obtain(ctx, key+":held", time.Minute)
		if err != nil {
			t.Fatalf("Obtain with every node up = %v, want a lock", err)
		}
		return servers, l, held, key
	}
	// unanswered checks that err, of op, matches ErrNoAnswer, not
	// ErrNotObtained, and says that Redis did not answer.
	unanswered := func(t *testing.T, op string, err error) {
		t.Helper()
		if !errors.Is(err, lock.ErrNoAnswer) || errors.Is(err, lock.ErrNotObtained) || !strings.Contains(fmt.Sprint(err), noAnswer) {
			t.Errorf("%s = %v; want an error matching ErrNoAnswer, not ErrNotObtained, that says %q", op, err, noAnswer)
		}
	}
	// every checks that each call on a lock of key, and on held, got no
	// answer.
	every := func(t *testing.T, l *lock.Locker, held *lock.Lock, key string) {
		t.Helper()
		_, err := l.Obtain(ctx, key, time.Minute)
		unanswered(t, "Obtain", err)
		unanswered(t, "Refresh", held.Refresh(ctx, time.Minute))
		_, err = held.TTL(ctx)
		unanswered(t, "TTL", err)
		unanswered(t, "Release", held.Release(ctx))
	}
	for _, d := range redistest.Drivers() {
		t.Run(d.Name+"/a stalled majority", func(t *testing.T) {
			servers, l, held, key := over(t, d)
			servers[1].Pause()
			servers[2].Pause()
			every(t, l, held, key)
		})
		t.Run(d.Name+"/a refused node and a stalled one", func(t *testing.T) {
			servers, l, held, key := over(t, d)
			servers[0].Kill() // first: its error is not a timeout
			servers[1].Pause()
			every(t, l, held, key)
		})
		t.Run(d.Name+"/held on one node, the others stalled", func(t *testing.T) {
			servers, l, _, key := over(t, d)
			if _, err := servers[0].Command(ctx, "SET", key, "another-owner", "PX", "60000"); err != nil {
				t.Fatal(err)
			}
			servers[1].Pause()
			servers[2].Pause()
			_, err := l.Obtain(ctx, key, time.Minute)
			unanswered(t, "Obtain (1 taken, 2 timeout)", err)
		})
		t.Run(d.Name+"/held on one node, granted on one, one stalled", func(t *testing.T) {
			servers, l, _, key := over(t, d)
			if _, err := servers[0].Command(ctx, "SET", key, "another-owner", "PX", "60000"); err != nil {
				t.Fatal(err)
			}
			servers[2].Pause()
			_, err := l.Obtain(ctx, key, time.Minute)
			var qe *redlock.QuorumError
			if !errors.As(err, &qe) || qe.Nodes[0].Outcome != redlock.Taken || qe.Nodes[1].Outcome != redlock.OK || qe.Nodes[2].Outcome != redlock.Timeout {
				t.Fatalf("Obtain = %v; want a *QuorumError of 1 taken, 1 ok, 1 timeout", err)
			}
			if !errors.Is(err, lock.ErrNotObtained) || errors.Is(err, lock.ErrNoAnswer) {
				t.Errorf("Obtain (1 taken, 1 ok, 1 timeout) = %v; want ErrNotObtained, not ErrNoAnswer: a quorum answered, and one found it held", err)
			}
		})
	}
}
