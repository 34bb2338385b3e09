package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/internal/testing/waittest"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// TestReleaseWakesWaiters: a release publishes on every node, so a waiter
// whose retry delay is a minute obtains the lock as soon as it is
// released, woken by the message; a release without scripts too, which
// publishes after its delete. The waiter's subscription's confirmations
// are hidden (waittest.MessagesOnly) and the release comes once every node
// counts the subscriber, so a wake-up before the minute can only be the
// release's messages.
func TestReleaseWakesWaiters(t *testing.T) {
	servers := redistest.Start(t, 3)
	d := driverNamed("goredis-resp3")
	for _, h := range []struct {
		name string
		mark func([]driver.Conn, ...int) []driver.Conn
	}{
		{"with scripts", func(c []driver.Conn, _ ...int) []driver.Conn { return c }},
		{"without scripts", matrix.Marked},
	} {
		t.Run(h.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang detector
			defer cancel()
			key := conformance.Key(t)
			holder := newLocker(t, h.mark(connect(t, servers, d)))
			lk, err := holder.Obtain(ctx, key, time.Minute)
			if err != nil {
				t.Fatalf("holder: Obtain = %v, want a lock", err)
			}

			s, err := redlock.NewStrategy(connect(t, servers, d))
			if err != nil {
				t.Fatalf("NewStrategy: %v", err)
			}
			waiter := lock.New(waittest.MessagesOnly(s))
			var rec waittest.Recorder
			got := make(chan error, 1)
			go func() {
				lk, err := waiter.Obtain(ctx, key, time.Minute, lock.WithRetry(lock.Linear(time.Minute)), rec.Option())
				if err == nil {
					err = lk.Release(context.Background())
				}
				got <- err
			}()
			channel, _ := cas.WakeChannel(key)
			for _, srv := range servers {
				waittest.Subscribers(t, ctx, srv, channel, 1)
			}
			if err := lk.Release(ctx); err != nil {
				t.Fatalf("holder: Release = %v, want nil", err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter: Obtain with a one-minute retry = %v, want the lock once released (woken by the release)", err)
			}
			// Each node's release publishes: a message from the first node can
			// wake the waiter before a quorum has released, and the next one
			// wakes it again. So at least one message, and never the timer.
			if rec.Count("woken:message") < 1 || rec.Count("woken:timer") != 0 {
				t.Errorf("waiter's wake-ups = %v, want messages and no timer", &rec)
			}
		})
	}
}

// TestNotifyContention: four Lockers, each with its own clients of three
// servers, take turns on one key, waiting by notification; no two ever
// hold it at once, and every acquisition succeeds. Redlock promises no
// fairness, so only exclusion and progress are checked.
func TestNotifyContention(t *testing.T) {
	const (
		lockers = 4
		each    = 25
	)
	servers := redistest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang detector
	defer cancel()
	key := conformance.Key(t)
	var (
		det conformance.Detector
		rec waittest.Recorder
		wg  sync.WaitGroup
	)
	for i := range lockers {
		l := newLocker(t, connect(t, servers, redistest.Drivers()[i%2]))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				lk, err := l.Obtain(ctx, key, 10*time.Second, lock.WithRetry(lock.Exponential(time.Millisecond, 50*time.Millisecond)), rec.Option())
				if err != nil {
					t.Errorf("Obtain = %v, want a lock", err)
					return
				}
				det.Hold(time.Millisecond)
				if err := lk.Release(ctx); err != nil {
					t.Errorf("Release = %v, want nil", err)
				}
			}
		}()
	}
	wg.Wait()
	if n := det.Overlaps(); n != 0 {
		t.Errorf("overlaps = %d, want 0", n)
	}
	if got, want := det.Entries(), int64(lockers*each); got != want {
		t.Errorf("acquisitions = %d, want %d", got, want)
	}
	t.Logf("wake-ups: %v", &rec)
}
