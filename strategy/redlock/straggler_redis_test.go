package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// leftOn polls, up to 10s, until no server holds key, and returns where it
// is still held.
func leftOn(servers []*redistest.Server, key string) []string {
	end := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, s := range servers {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			n, err := s.Command(ctx, "EXISTS", key)
			cancel()
			if err != nil || n != "0" {
				left = append(left, fmt.Sprintf("%s (EXISTS = %q, %v)", s.Addr, n, err))
			}
		}
		if len(left) == 0 || time.Now().After(end) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReleaseAfterStragglers: a Release that returned nil leaves no key
// behind, even on the nodes whose acquire was still on its way when the
// quorum was reached: it deletes there after that acquire returned, in the
// background once its context is done.
func TestReleaseAfterStragglers(t *testing.T) {
	servers := redistest.Start(t, 5)
	for _, d := range []string{"goredis-resp3", "redigo"} {
		var open func(t testing.TB, addr string) driver.Conn
		for _, dr := range redistest.Drivers() {
			if dr.Name == d {
				open = dr.Conn
			}
		}
		conns := func(t *testing.T) []driver.Conn {
			c := make([]driver.Conn, len(servers))
			for i, s := range servers {
				c[i] = open(t, s.Addr)
			}
			return c
		}
		t.Run(d+"/paused nodes", func(t *testing.T) {
			l, err := redlock.New(conns(t))
			if err != nil {
				t.Fatal(err)
			}
			key := conformance.Key(t)
			paused := servers[3:]
			for _, s := range paused {
				s.Pause()
				defer s.Resume()
			}
			lk, err := l.Obtain(context.Background(), key, 30*time.Second)
			if err != nil {
				t.Fatalf("Obtain with 3 of 5 nodes up = %v, want a lock", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			if err := lk.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil (a quorum released)", err)
			}
			t.Logf("Release with a 200ms context returned after %v", time.Since(start).Round(time.Millisecond))
			time.Sleep(300 * time.Millisecond)
			for _, s := range paused {
				s.Resume()
			}
			if left := leftOn(servers, key); len(left) > 0 {
				t.Errorf("10s after the nodes resumed, the released key is still on %s; want it on none", strings.Join(left, ", "))
			}
		})
		t.Run(d+"/cold start", func(t *testing.T) {
			for i := range 5 { // fresh clients: the acquires dial, and some straggle
				l, err := redlock.New(conns(t))
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("%s:%d", conformance.Key(t), i)
				lk, err := l.Obtain(context.Background(), key, 30*time.Second)
				if err != nil {
					t.Fatalf("Obtain = %v, want a lock", err)
				}
				if err := lk.Release(context.Background()); err != nil {
					t.Fatalf("Release = %v, want nil", err)
				}
				if left := leftOn(servers, key); len(left) > 0 {
					t.Errorf("10s after Release returned nil, the key is still on %s; want it on none", strings.Join(left, ", "))
				}
			}
		})
	}
}

// TestReleaseReturnsAtQuorum: Release returns once a quorum confirmed it,
// without waiting for a paused node, which its node report gives as
// pending; the delete on that node lands once it resumes, so no key is
// left behind.
func TestReleaseReturnsAtQuorum(t *testing.T) {
	servers := redistest.Start(t, 3)
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			l := lockerOver(t, d, servers)
			key := conformance.Key(t)
			var mu sync.Mutex
			released := map[string]string{} // node: outcome, in the release
			hooks := &lock.Hooks{Node: func(ctx context.Context, e lock.Event) {
				if op, _ := ctx.Value(opKey{}).(string); op == "release" {
					mu.Lock()
					released[e.Node] = e.Outcome
					mu.Unlock()
				}
			}, Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
				return next(context.WithValue(ctx, opKey{}, e.Op))
			}}
			lk, err := l.Obtain(context.Background(), key, 30*time.Second, lock.WithHooks(hooks))
			if err != nil {
				t.Fatalf("Obtain = %v, want a lock", err)
			}
			// Obtain returned at quorum: the last grant may still be on its way.
			if held := heldOn(servers, key); held != len(servers) {
				t.Fatalf("10s after Obtain, the key is on %d nodes, want %d", held, len(servers))
			}
			paused := servers[2]
			paused.Pause()
			if err := lk.Release(context.Background()); err != nil {
				t.Fatalf("Release with 2 of 3 nodes up = %v, want nil (a quorum released)", err)
			}
			mu.Lock()
			got := released[paused.Addr]
			mu.Unlock()
			paused.Resume()
			if got != "pending" {
				t.Errorf("the paused node's outcome in Release = %q, want pending (not waited for)", got)
			}
			if left := leftOn(servers, key); len(left) > 0 {
				t.Errorf("10s after the node resumed, the released key is still on %s; want it on none", strings.Join(left, ", "))
			}
		})
	}
}

// opKey carries the operation that a Node hook reports within.
type opKey struct{}

// heldOn polls, up to 10s, until every server holds key, and returns how
// many do.
func heldOn(servers []*redistest.Server, key string) int {
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := 0
		for _, s := range servers {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if v, err := s.Command(ctx, "EXISTS", key); err == nil && v == "1" {
				n++
			}
			cancel()
		}
		if n == len(servers) || time.Now().After(end) {
			return n
		}
	}
}

// TestObtainAfterRelease: an Obtain of a key right after its Release, in a
// loop, never finds the release's own stragglers, even with a node down, where
// they would leave no quorum: it waits for them.
func TestObtainAfterRelease(t *testing.T) {
	servers := redistest.Start(t, 5)
	servers[4].Kill()
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			l := lockerOver(t, d, servers)
			key := conformance.Key(t)
			ctx := context.Background()
			for i := range 200 {
				lk, err := l.Obtain(ctx, key, 30*time.Second)
				if err != nil {
					t.Fatalf("Obtain %d with 4 of 5 nodes up = %v, want a lock", i, err)
				}
				if err := lk.Release(ctx); err != nil {
					t.Fatalf("Release %d = %v, want nil", i, err)
				}
			}
		})
	}
}

// lockerOver returns a Redlock Locker over servers, through d's clients.
func lockerOver(t *testing.T, d redistest.Driver, servers []*redistest.Server) *lock.Locker {
	t.Helper()
	conns := make([]driver.Conn, len(servers))
	for i, s := range servers {
		conns[i] = d.Conn(t, s.Addr)
	}
	l, err := redlock.New(conns)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRelockWithStalledNode: with one of 3 nodes stalled (SIGSTOP), an
// Obtain of a key right after its Release does not wait for that
// Release's delete on the stalled node: it returns, at the quorum of the
// other two, while that delete is still on its way. The node timeout is
// far longer than the work of the test (the drivers' own read timeouts
// bound a stalled command too: go-redis's 3s), so a delete on its way
// when Obtain returned shows that Obtain did not wait for it; an Obtain
// that waited for it would find it returned, whatever the timing.
func TestRelockWithStalledNode(t *testing.T) {
	servers := redistest.Start(t, 3)
	stalled := servers[2]
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			s, err := redlock.NewStrategy(connect(t, servers, d), redlock.WithNodeTimeout(20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			l := lock.New(s)
			key := conformance.Key(t)
			relock := func(what string) *lock.Lock {
				t.Helper()
				lk, err := l.Obtain(ctx, key, time.Minute)
				if err != nil {
					t.Fatalf("Obtain %s = %v, want a lock", what, err)
				}
				return lk
			}
			release := func(lk *lock.Lock, what string) {
				t.Helper()
				if err := lk.Release(ctx); err != nil {
					t.Fatalf("Release %s = %v, want nil (a quorum released)", what, err)
				}
			}
			release(relock("with every node up"), "with every node up")
			stalled.Pause()
			defer stalled.Resume()
			release(relock("with one node stalled"), "with one node stalled")
			lk := relock("again with one node stalled")
			pending := s.Releasing(key)
			release(lk, "again with one node stalled")
			stalled.Resume()
			if !pending {
				t.Errorf("when the second Obtain with a stalled node returned, the Release before it was still on its way = false, want true: the Obtain waited for the stalled node's delete")
			}
			if err := l.Close(); err != nil { // waits for the clean-ups
				t.Fatalf("Close = %v, want nil", err)
			}
			for _, srv := range servers {
				if n, err := srv.Command(context.Background(), "EXISTS", key); n != "0" {
					t.Errorf("once the node resumed and the clean-ups ended, EXISTS %s on %s = %q, %v; want 0", key, srv.Addr, n, err)
				}
			}
		})
	}
}

// TestRelockWithStalledNodeLeavesNoKeys: Obtain and Release of one key,
// three times while a node is stalled, long enough that every command to
// it times out, leave no key behind on any node once the node resumed and
// the clean-ups in the background ended: each release's late delete
// removes only its own token, and each acquire's late write is deleted by
// its lock's release.
func TestRelockWithStalledNodeLeavesNoKeys(t *testing.T) {
	servers := redistest.Start(t, 3)
	stalled := servers[2]
	const nodeTimeout = 100 * time.Millisecond
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			l := newLocker(t, connect(t, servers, d), redlock.WithNodeTimeout(nodeTimeout))
			key := conformance.Key(t)
			cycle := func(what string) {
				t.Helper()
				lk, err := l.Obtain(ctx, key, 10*time.Second)
				if err != nil {
					t.Fatalf("Obtain %s = %v, want a lock", what, err)
				}
				if err := lk.Release(ctx); err != nil {
					t.Fatalf("Release %s = %v, want nil (a quorum released)", what, err)
				}
			}
			cycle("with every node up")
			stalled.Pause()
			defer stalled.Resume()
			for i := range 3 {
				cycle(fmt.Sprintf("%d with one node stalled", i))
			}
			time.Sleep(3 * nodeTimeout) // not a bound: the commands to the node time out, most likely, and their clean-ups begin
			stalled.Resume()
			if err := l.Close(); err != nil { // waits for the clean-ups
				t.Fatalf("Close = %v, want nil", err)
			}
			for _, srv := range servers {
				if n, err := srv.Command(context.Background(), "EXISTS", key); n != "0" {
					t.Errorf("once the node resumed and the clean-ups ended, EXISTS %s on %s = %q, %v; want 0", key, srv.Addr, n, err)
				}
			}
		})
	}
}
