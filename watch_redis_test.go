package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// onServers is a strategy on real servers of its own, as internal/testing/matrix
// configures it, with the servers to pause so that no refresh can succeed.
type onServers struct {
	h     conformance.Harness
	pause []*redistest.Server
}

// eachStrategy runs f for single, setnx-getset and redlock (on 3 nodes, of
// which it pauses 2), over go-redis.
func eachStrategy(t *testing.T, f func(t *testing.T, s onServers)) {
	for _, c := range []struct {
		name      string
		n, paused int
		combo     func(addrs []string) matrix.Combo
	}{
		{"single", 1, 1, func(a []string) matrix.Combo { return matrix.Single(a[0])[0] }},
		{"setnx-getset", 1, 1, func(a []string) matrix.Combo { return matrix.SetnxGetset(a[0])[0] }},
		{"redlock", 3, 2, func(a []string) matrix.Combo { return matrix.Redlock(a)[0] }},
	} {
		t.Run(c.name, func(t *testing.T) {
			servers := redistest.Start(t, c.n)
			addrs := make([]string, len(servers))
			for i, s := range servers {
				addrs[i] = s.Addr
			}
			f(t, onServers{h: c.combo(addrs).Harness, pause: servers[:c.paused]})
		})
	}
}

// confirmed notes when the last successful refresh was sent, and counts
// them.
type confirmed struct {
	mu   sync.Mutex
	n    int
	last time.Time
}

func (c *confirmed) option() lock.Option {
	return lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
		sent := time.Now()
		err := next(ctx)
		if e.Op == "refresh" && err == nil {
			c.mu.Lock()
			c.n, c.last = c.n+1, sent
			c.mu.Unlock()
		}
		return err
	}})
}

func (c *confirmed) get() (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.last
}

// TestPausedServer: a holder whose refreshes are blocked by paused servers
// (SIGSTOP) learns that it lost the lock at its validity deadline, counted
// from when its last successful refresh was sent, which the server's expiry
// cannot precede; it does not wait for the blocked refreshes.
func TestPausedServer(t *testing.T) {
	const ttl = 2 * time.Second
	eachStrategy(t, func(t *testing.T, s onServers) {
		ctx := context.Background()
		var c confirmed
		lk, err := s.h.NewLocker(t).Obtain(ctx, conformance.Key(t), ttl, lock.WithRefreshFraction(0.1), c.option())
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatal(err)
		}
		for n, _ := c.get(); n < 2; n, _ = c.get() {
			if lk.Err() != nil {
				t.Fatalf("lost before the pause: %v", lk.Err())
			}
			time.Sleep(10 * time.Millisecond)
		}
		paused := time.Now()
		for _, srv := range s.pause {
			srv.Pause()
			defer srv.Resume()
		}
		select {
		case <-lk.Done():
		case <-time.After(ttl + 2*time.Second):
			t.Fatalf("Done not closed %v after the servers were paused, with a TTL of %v", ttl+2*time.Second, ttl)
		}
		learned := time.Now()
		_, last := c.get()
		end := last.Add(ttl) // the server's expiry is no earlier
		when := fmt.Sprintf("%v before", end.Sub(learned).Round(100*time.Microsecond))
		if learned.After(end) {
			when = fmt.Sprintf("%v after", learned.Sub(end).Round(100*time.Microsecond))
		}
		t.Logf("paused: loss learned %v after the pause, %s the TTL counted from the send of the last successful refresh (drift allowance: single and redlock TTL×1%%+2ms, setnx-getset its clock skew, 0 here)",
			learned.Sub(paused).Round(100*time.Microsecond), when)
		if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) {
			t.Errorf("Err() = %v, want ErrLapsed", err)
		}
		if slack := ttl / 4; learned.After(end.Add(slack)) {
			t.Errorf("loss learned %v after the TTL ended, want at its end (within %v)", learned.Sub(end), slack)
		}
	})
}

// TestNoGoroutineLeaks: Do, and auto-refresh on a handle, leave no goroutine
// behind, whether the lock is released, lost, or its context cancelled.
func TestNoGoroutineLeaks(t *testing.T) {
	eachStrategy(t, func(t *testing.T, s onServers) {
		ctx := context.Background()
		l := s.h.NewLocker(t)
		conns := s.h.Conns(t)
		key := conformance.Key(t)
		if err := lock.Do(ctx, l, key, time.Minute, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("warming up: %v", err) // opens the connections the pools keep
		}
		defer goleak.VerifyNone(t, append([]goleak.Option{goleak.IgnoreCurrent()}, lingering...)...)
		hold := lock.WithRefreshFraction(0.1)

		if err := lock.Do(ctx, l, key, time.Second, func(context.Context) error {
			time.Sleep(300 * time.Millisecond) // a few refreshes
			return nil
		}, hold); err != nil {
			t.Errorf("Do = %v, want nil", err)
		}
		err := lock.Do(ctx, l, key, time.Second, func(fctx context.Context) error {
			for _, c := range conns {
				if _, err := c.Del(ctx, key); err != nil {
					return err
				}
			}
			<-fctx.Done()
			return nil
		}, hold)
		if !errors.Is(err, lock.ErrLost) {
			t.Errorf("Do losing its lock = %v, want ErrLost", err)
		}
		parent, cancel := context.WithCancel(ctx)
		err = lock.Do(parent, l, key, time.Second, func(fctx context.Context) error {
			cancel()
			<-fctx.Done()
			return fctx.Err()
		}, hold)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do with its context cancelled = %v, want context.Canceled", err)
		}
		lk, err := l.Obtain(ctx, key, time.Second, hold)
		if err != nil {
			t.Fatalf("Obtain after Do = %v, want a lock: Do released it", err)
		}
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release = %v, want nil", err)
		}
	})
}
