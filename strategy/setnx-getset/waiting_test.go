package setnxgetset_test

import (
	"context"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/internal/testing/waittest"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
)

// waitingLocker returns a Locker of srv whose waiters hear messages, but
// not their subscription's confirmation (waittest.MessagesOnly): a test
// that publishes once srv counts the subscriber knows why a waiter woke.
func waitingLocker(t *testing.T, srv *redistest.Server) *lock.Locker {
	t.Helper()
	s, err := setnxgetset.NewStrategy(goredis.New(redistest.GoRedis(t, srv.Addr, 3)))
	if err != nil {
		t.Fatalf("NewStrategy: %v", err)
	}
	return lock.New(waittest.MessagesOnly(s))
}

// obtainLater runs Obtain in the background, releasing what it obtains,
// and returns its error.
func obtainLater(ctx context.Context, l *lock.Locker, key string, opts ...lock.Option) <-chan error {
	got := make(chan error, 1)
	go func() {
		lk, err := l.Obtain(ctx, key, time.Minute, opts...)
		if err == nil {
			err = lk.Release(context.Background())
		}
		got <- err
	}()
	return got
}

// TestWaiting: our releases publish, so a waiter is woken by them; a
// legacy client's DEL publishes nothing, and a waiter finds it by its
// timer, its retry delay.
func TestWaiting(t *testing.T) {
	srv := redistest.Start(t, 1)[0]

	for _, h := range []struct {
		name string
		mark func(driver.Conn) driver.Conn
	}{
		{"our release wakes a waiter at once", func(c driver.Conn) driver.Conn { return c }},
		{"our release without scripts, which publishes after its delete, wakes a waiter at once", driver.WithoutScripts},
	} {
		t.Run(h.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang detector
			defer cancel()
			key := conformance.Key(t)
			lk, err := newLocker(t, h.mark(goredis.New(redistest.GoRedis(t, srv.Addr, 3)))).Obtain(ctx, key, time.Minute)
			if err != nil {
				t.Fatalf("holder: Obtain = %v, want a lock", err)
			}
			var rec waittest.Recorder
			got := obtainLater(ctx, waitingLocker(t, srv), key, lock.WithRetry(lock.Linear(time.Minute)), rec.Option())
			channel, _ := cas.WakeChannel(key)
			waittest.Subscribers(t, ctx, srv, channel, 1)
			if err := lk.Release(ctx); err != nil {
				t.Fatalf("holder: Release = %v, want nil", err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter: Obtain with a one-minute retry = %v, want the lock once released", err)
			}
			if rec.Count("woken:message") != 1 || rec.Count("woken:timer") != 0 {
				t.Errorf("waiter's wake-ups = %v, want one message and no timer", &rec)
			}
		})
	}

	t.Run("a legacy client's DEL is found by the timer", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang detector
		defer cancel()
		key := conformance.Key(t)
		legacy := legacyClient{rdb: redistest.GoRedis(t, srv.Addr, 3), timeout: time.Minute}
		stamp, err := legacy.lock(ctx, key)
		if err != nil {
			t.Fatalf("legacy: lock = %v, want nil", err)
		}
		var rec waittest.Recorder
		got := obtainLater(ctx, waitingLocker(t, srv), key, lock.WithRetry(lock.Linear(100*time.Millisecond)), rec.Option())
		channel, _ := cas.WakeChannel(key)
		waittest.Subscribers(t, ctx, srv, channel, 1)
		if err := legacy.unlock(ctx, key, stamp); err != nil {
			t.Fatalf("legacy: unlock = %v, want nil", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: Obtain = %v, want the lock once the legacy client deleted it", err)
		}
		if rec.Count("woken:message") != 0 || rec.Last() != "timer" {
			t.Errorf("waiter's wake-ups = %v, last %q; want no message, and the timer last", &rec, rec.Last())
		}
	})
}
