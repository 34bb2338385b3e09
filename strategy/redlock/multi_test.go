package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/internal/testing/waittest"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// threeKeys returns three keys of the test's own, out of order.
func threeKeys(t *testing.T) []string {
	k := conformance.Key(t)
	return []string{k + ":c", k + ":a", k + ":b"}
}

// command runs a command on srv, failing the test on an error.
func command(t *testing.T, srv *redistest.Server, args ...string) string {
	t.Helper()
	got, err := srv.Command(context.Background(), args...)
	if err != nil {
		t.Fatalf("%s on %s: %v", strings.Join(args, " "), srv.Addr, err)
	}
	return got
}

// plant sets key to value for a minute on servers, as another owner.
func plant(t *testing.T, servers []*redistest.Server, key, value string) {
	t.Helper()
	for _, s := range servers {
		command(t, s, "SET", key, value, "PX", "60000")
	}
}

// remaining polls, up to 10s, until none of keys exists on any of servers
// that answers, and returns those still there, as "key on addr".
func remaining(servers []*redistest.Server, keys []string) []string {
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left []string
		for _, s := range servers {
			for _, k := range keys {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				if n, err := s.Command(ctx, "EXISTS", k); err == nil && n == "1" {
					left = append(left, k+" on "+s.Addr)
				}
				cancel()
			}
		}
		if len(left) == 0 || time.Now().After(end) {
			return left
		}
	}
}

// heldEverywhere polls, up to 10s, until every server holds value in
// every key, and returns where one did not, as "GET key on addr = value".
func heldEverywhere(t *testing.T, servers []*redistest.Server, keys []string, value string) []string {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var wrong []string
		for _, s := range servers {
			for _, k := range keys {
				if v := command(t, s, "GET", k); redistest.Unstamped(v) != value {
					wrong = append(wrong, fmt.Sprintf("GET %q on %s = %q", k, s.Addr, v))
				}
			}
		}
		if len(wrong) == 0 || time.Now().After(end) {
			return wrong
		}
	}
}

// TestMulti: ObtainMany over Redlock on three nodes, one driver per node.
func TestMulti(t *testing.T) {
	servers := redistest.Start(t, 3)
	ctx := context.Background()
	conns := connect(t, servers, redistest.Drivers()...)
	l := newLocker(t, conns)
	// obtain obtains keys, on every node that the test does not change.
	obtain := func(t *testing.T, l *lock.Locker, keys []string) *lock.Lock {
		t.Helper()
		lk, err := l.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			t.Fatalf("ObtainMany(%q) = %v, want a lock", keys, err)
		}
		t.Cleanup(func() { _ = lk.Release(context.Background()) })
		return lk
	}
	// settled is obtain, once every node holds every key: the call
	// returns at the quorum, and a test that changes a node's keys must
	// not race with that node's acquire.
	settled := func(t *testing.T, keys []string) *lock.Lock {
		t.Helper()
		lk := obtain(t, l, keys)
		if wrong := heldEverywhere(t, servers, keys, lk.Token()); len(wrong) > 0 {
			t.Fatalf("%s; want the lock's token on every node", strings.Join(wrong, "; "))
		}
		return lk
	}
	pttl := func(t *testing.T, s *redistest.Server, key string) time.Duration {
		t.Helper()
		ms, err := strconv.Atoi(command(t, s, "PTTL", key))
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(ms) * time.Millisecond
	}

	t.Run("every key holds one value on every node", func(t *testing.T) {
		keys := threeKeys(t)
		lk := obtain(t, l, keys)
		if got, want := lk.Keys(), slices.Sorted(slices.Values(keys)); !slices.Equal(got, want) {
			t.Errorf("Keys() = %q, want %q", got, want)
		}
		if wrong := heldEverywhere(t, servers, keys, lk.Token()); len(wrong) > 0 {
			t.Errorf("%s; want the lock's token on every node", strings.Join(wrong, "; "))
		}
	})

	t.Run("one key held on a majority: not obtained, naming it, nothing left", func(t *testing.T) {
		keys := threeKeys(t)
		plant(t, servers[:2], keys[2], "another-owner")
		_, err := l.ObtainMany(ctx, keys, time.Minute)
		var ke *lock.KeyError
		var qe *redlock.QuorumError
		if !errors.Is(err, lock.ErrNotObtained) || !errors.As(err, &ke) || ke.Key != keys[2] || !errors.As(err, &qe) {
			t.Fatalf("ObtainMany = %v, want ErrNotObtained in a KeyError naming %q, with a *QuorumError", err, keys[2])
		}
		if got := remaining(servers[2:], keys); len(got) != 0 {
			t.Errorf("keys left on the free node = %q, want none", got)
		}
		for _, s := range servers[:2] {
			if got := remaining([]*redistest.Server{s}, []string{keys[0], keys[1]}); len(got) != 0 {
				t.Errorf("keys left = %q, want none", got)
			}
			if v := command(t, s, "GET", keys[2]); v != "another-owner" {
				t.Errorf("the other owner's value on %s = %q, want it untouched", s.Addr, v)
			}
		}
	})

	t.Run("one key held on a minority: obtained on the quorum, nothing left after release", func(t *testing.T) {
		keys := threeKeys(t)
		plant(t, servers[:1], keys[1], "another-owner")
		lk := obtain(t, l, keys)
		if got := remaining(servers[:1], []string{keys[0], keys[2]}); len(got) != 0 {
			t.Errorf("keys left on the node that refused = %q, want none: it takes every key or none", got)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if got := remaining(servers[1:], keys); len(got) != 0 {
			t.Errorf("keys left after Release = %q, want none", got)
		}
		if v := command(t, servers[0], "GET", keys[1]); v != "another-owner" {
			t.Errorf("the other owner's value = %q, want it untouched", v)
		}
	})

	t.Run("refresh extends every key on every node", func(t *testing.T) {
		keys := threeKeys(t)
		lk := settled(t, keys)
		if err := lk.Refresh(ctx, 2*time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		for _, s := range servers {
			for _, k := range keys {
				if d := pttl(t, s, k); d <= time.Minute {
					t.Errorf("PTTL %q on %s = %v, want more than a minute", k, s.Addr, d)
				}
			}
		}
	})

	t.Run("refresh with one key gone on a majority: lost, naming it, nothing extended where it is gone", func(t *testing.T) {
		keys := threeKeys(t)
		lk := settled(t, keys)
		for _, s := range servers[:2] {
			command(t, s, "DEL", keys[0])
		}
		err := lk.Refresh(ctx, 2*time.Minute)
		if !hasKeyError(err, keys[0], lock.ErrExpired) || hasKeyError(err, keys[1], nil) || hasKeyError(err, keys[2], nil) {
			t.Errorf("Refresh = %v, want ErrExpired in a KeyError naming %q alone", err, keys[0])
		}
		for _, s := range servers[:2] {
			for _, k := range keys[1:] {
				if d := pttl(t, s, k); d > time.Minute {
					t.Errorf("PTTL %q on %s = %v after the failed Refresh, want at most the minute: a node extends every key or none", k, s.Addr, d)
				}
			}
		}
	})

	t.Run("refresh with one key taken on a minority: extended on the quorum", func(t *testing.T) {
		keys := threeKeys(t)
		lk := settled(t, keys)
		command(t, servers[2], "SET", keys[1], "another-owner", "PX", "60000")
		if err := lk.Refresh(ctx, 2*time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		for _, k := range keys {
			if d := pttl(t, servers[2], k); d > time.Minute {
				t.Errorf("PTTL %q on the node that refused = %v, want at most the minute: it extends every key or none", k, d)
			}
		}
	})

	t.Run("TTL is the least of the keys", func(t *testing.T) {
		keys := threeKeys(t)
		lk := settled(t, keys)
		for _, s := range servers {
			command(t, s, "PEXPIRE", keys[1], "30000")
		}
		if d, err := lk.TTL(ctx); err != nil || d <= 0 || d > 30*time.Second {
			t.Errorf("TTL = %v, %v; want at most the 30s of %q", d, err, keys[1])
		}
	})

	t.Run("release reports a key gone on a majority, and deletes the others", func(t *testing.T) {
		keys := threeKeys(t)
		lk := settled(t, keys)
		for _, s := range servers {
			command(t, s, "DEL", keys[2])
		}
		if err := lk.Release(ctx); !hasKeyError(err, keys[2], lock.ErrExpired) || hasKeyError(err, keys[0], nil) {
			t.Errorf("Release = %v, want ErrExpired in a KeyError naming %q alone", err, keys[2])
		}
		if got := remaining(servers, keys); len(got) != 0 {
			t.Errorf("keys left after Release = %q, want none", got)
		}
	})

	t.Run("a key's release wakes its waiters", func(t *testing.T) {
		// A waiter for one of the keys, whose retry delay is a minute,
		// obtains it once the lock of several keys is released: woken by
		// the release's message (see TestReleaseWakesWaiters).
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a hang detector
		defer cancel()
		keys := threeKeys(t)
		lk := obtain(t, l, keys)
		s, err := redlock.NewStrategy(connect(t, servers, driverNamed("goredis-resp3")))
		if err != nil {
			t.Fatal(err)
		}
		var rec waittest.Recorder
		got := make(chan error, 1)
		go func() {
			lk, err := lock.New(waittest.MessagesOnly(s)).Obtain(wctx, keys[1], time.Minute,
				lock.WithRetry(lock.Linear(time.Minute)), rec.Option())
			if err == nil {
				err = lk.Release(context.Background())
			}
			got <- err
		}()
		channel, _ := cas.WakeChannel(keys[1])
		for _, srv := range servers {
			waittest.Subscribers(t, wctx, srv, channel, 1)
		}
		if err := lk.Release(wctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: Obtain with a one-minute retry = %v, want the key once released", err)
		}
		if rec.Count("woken:message") < 1 || rec.Count("woken:timer") != 0 {
			t.Errorf("waiter's wake-ups = %v, want messages and no timer", &rec)
		}
	})

	t.Run("fencing: refused before anything is written", func(t *testing.T) {
		keys := threeKeys(t)
		_, err := l.ObtainMany(ctx, keys, time.Minute, lock.WithFencing())
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "fencing" {
			t.Errorf("ObtainMany with fencing = %v, want an *ArgumentError named fencing", err)
		}
		if got := remaining(servers, keys); len(got) != 0 {
			t.Errorf("keys left = %q, want none", got)
		}
	})

	for _, c := range []struct {
		name  string
		nodes []int
	}{
		{"without scripts: refused", nil},
		{"without scripts on one node: refused", []int{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys := threeKeys(t)
			_, err := newLocker(t, matrix.Marked(conns, c.nodes...)).ObtainMany(ctx, keys, time.Minute)
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "keys" || !strings.Contains(ae.Reason, "WithoutScripts") {
				t.Errorf("ObtainMany = %v, want an *ArgumentError named keys that names WithoutScripts", err)
			}
			if got := remaining(servers, keys); len(got) != 0 {
				t.Errorf("keys left = %q, want none", got)
			}
		})
	}
}

// TestMultiNodeFailures: a lock of several keys with a node down or
// paused is obtained on the others, and leaves nothing behind; one that
// needs a paused node is not obtained, and leaves nothing once the node
// resumes.
func TestMultiNodeFailures(t *testing.T) {
	ctx := context.Background()
	const nodeTimeout = 100 * time.Millisecond

	t.Run("a node down: obtained on 2 of 3, released on both", func(t *testing.T) {
		servers := redistest.Start(t, 3)
		l := newLocker(t, connect(t, servers, redistest.Drivers()...))
		servers[1].Kill()
		keys := threeKeys(t)
		lk, err := l.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			t.Fatalf("ObtainMany with 1 of 3 nodes down = %v, want a lock", err)
		}
		if err := lk.Refresh(ctx, 2*time.Minute); err != nil {
			t.Errorf("Refresh with 1 of 3 nodes down = %v, want nil", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release with 1 of 3 nodes down = %v, want nil", err)
		}
		if got := remaining(servers, keys); len(got) != 0 {
			t.Errorf("keys left after Release = %q, want none", got)
		}
	})

	t.Run("a node paused: obtained on the others, nothing left once it resumes", func(t *testing.T) {
		servers := redistest.Start(t, 3)
		l := newLocker(t, connect(t, servers, redistest.Drivers()...), redlock.WithNodeTimeout(nodeTimeout))
		servers[2].Pause()
		defer servers[2].Resume()
		keys := threeKeys(t)
		lk, err := l.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			t.Fatalf("ObtainMany with 1 of 3 nodes paused = %v, want a lock", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release with 1 of 3 nodes paused = %v, want nil", err)
		}
		servers[2].Resume()
		if got := remaining(servers, keys); len(got) != 0 {
			t.Errorf("keys left once the node resumed = %q, want none: the release goes on in the background", got)
		}
	})

	t.Run("a paused node needed for the quorum: not obtained within the deadline, nothing left once it resumes", func(t *testing.T) {
		servers := redistest.Start(t, 3)
		l := newLocker(t, connect(t, servers, redistest.Drivers()...), redlock.WithNodeTimeout(nodeTimeout))
		if _, err := l.ObtainMany(ctx, threeKeys(t), time.Minute); err != nil { // every node's first contact
			t.Fatal(err)
		}
		servers[0].Kill()
		servers[2].Pause()
		defer servers[2].Resume()
		keys := threeKeys(t)
		const deadline = 2 * time.Second
		cctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		_, err := l.ObtainMany(cctx, keys, time.Minute, lock.WithRetry(lock.Linear(10*time.Millisecond)))
		elapsed := time.Since(start)
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) && !errors.Is(err, cctx.Err()) {
			t.Errorf("ObtainMany needing the paused node = %v, want a *QuorumError or the context's error", err)
		}
		if elapsed > deadline+5*time.Second {
			t.Errorf("ObtainMany returned after %v, want within its %v deadline (a generous bound)", elapsed, deadline)
		}
		servers[2].Resume()
		if got := remaining(servers[1:], keys); len(got) != 0 {
			t.Errorf("keys left once the node resumed = %q, want none: the clean-up goes on in the background", got)
		}
	})
}

// TestMultiRestartGuard: under WithRestartGuard, a lock of several keys is
// obtained on nodes up for the quarantine, and refused, writing no key, by
// nodes that restarted empty.
func TestMultiRestartGuard(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	l := newLocker(t, connect(t, servers, redistest.Drivers()...), redlock.WithRestartGuard(time.Minute))

	t.Run("restarted nodes: refused, no key written", func(t *testing.T) {
		keys := threeKeys(t)
		_, err := l.ObtainMany(ctx, keys, time.Minute)
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("ObtainMany on nodes without a record = %v, want a *QuorumError", err)
		}
		for i, n := range qe.Nodes {
			if n.Outcome != redlock.Restarting && n.Outcome != redlock.Pending {
				t.Errorf("node %d = %v, want restarting (or pending: not waited for)", i, n.Outcome)
			}
		}
		if got := remaining(servers, keys); len(got) != 0 {
			t.Errorf("keys left = %q, want none", got)
		}
	})

	t.Run("nodes up for the quarantine: obtained", func(t *testing.T) {
		for _, s := range servers {
			command(t, s, "SET", redlock.GuardKey, "0")
		}
		keys := threeKeys(t)
		lk, err := l.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			t.Fatalf("ObtainMany = %v, want a lock", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release = %v, want nil", err)
		}
		if got := remaining(servers, keys); len(got) != 0 {
			t.Errorf("keys left after Release = %q, want none", got)
		}
	})
}

// TestMultiEmbeddedNodes: a lock of several keys over three embedded
// servers, which run without redis-server.
func TestMultiEmbeddedNodes(t *testing.T) {
	ctx := context.Background()
	srvs := make([]*locktest.Server, 3)
	conns := make([]driver.Conn, len(srvs))
	for i := range srvs {
		srvs[i] = locktest.NewServer(t)
		conns[i] = driverNamed("redigo").Conn(t, srvs[i].Addr())
	}
	l := newLocker(t, conns)
	exists := func(keys []string) int {
		n := 0
		for _, s := range srvs {
			for _, k := range keys {
				if got, err := s.GoRedisClient().Exists(ctx, k).Result(); err == nil && got == 1 {
					n++
				}
			}
		}
		return n
	}

	t.Run("obtained on every node, released on every node", func(t *testing.T) {
		keys := threeKeys(t)
		lk, err := l.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			t.Fatalf("ObtainMany = %v, want a lock", err)
		}
		if n := exists(keys); n < 6 {
			t.Errorf("keys held = %d, want 3 on each node of a quorum (2 of 3), at least", n)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release = %v, want nil", err)
		}
		// Release returns at the quorum; the last node's delete goes on
		// in the background, within the node timeout.
		for deadline := time.Now().Add(10 * time.Second); exists(keys) > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("keys held 10s after Release = %d, want 0", exists(keys))
			}
		}
	})

	t.Run("one key held on a majority: not obtained, naming it", func(t *testing.T) {
		keys := threeKeys(t)
		for _, s := range srvs[:2] {
			if err := s.GoRedisClient().Set(ctx, keys[0], "another-owner", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		_, err := l.ObtainMany(ctx, keys, time.Minute)
		if !errors.Is(err, lock.ErrNotObtained) || !hasKeyError(err, keys[0], nil) {
			t.Errorf("ObtainMany = %v, want ErrNotObtained in a KeyError naming %q", err, keys[0])
		}
		// The third node took every key; the attempt's undo, or the
		// Locker's clean-up, deletes them there, in the background once the
		// attempt has returned (CI, Valkey 8.1 step: 5 keys right after it).
		for deadline := time.Now().Add(10 * time.Second); exists(keys) > 2; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				break
			}
		}
		if n := exists(keys); n != 2 {
			t.Errorf("keys held, within 10s of the failed ObtainMany = %d, want only the other owner's 2", n)
		}
	})
}

// hasKeyError reports whether err holds a *lock.KeyError naming key that
// matches want (any, when want is nil).
func hasKeyError(err error, key string, want error) bool {
	return slices.ContainsFunc(lock.KeyErrors(err), func(ke *lock.KeyError) bool {
		return ke.Key == key && (want == nil || errors.Is(ke, want))
	})
}
