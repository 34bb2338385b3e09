package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// waits records the Wait events and the clean-ups of Obtain calls.
type waits struct {
	mu       sync.Mutex
	events   []string // "enqueued <rank>", "woken <reason>", "missed"
	cleanups int
}

// option returns the hooks that record, and call then (when not nil) with
// each Wait event, on the waiter's goroutine.
func (w *waits) option(then func(lock.Event)) lock.Option {
	return lock.WithHooks(&lock.Hooks{
		Wait: func(_ context.Context, e lock.Event) {
			s := e.Op
			switch e.Op {
			case "enqueued":
				s = fmt.Sprintf("enqueued %d", e.Rank)
			case "woken":
				s = "woken " + e.Reason
			}
			w.mu.Lock()
			w.events = append(w.events, s)
			w.mu.Unlock()
			if then != nil {
				then(e)
			}
		},
		Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			if e.Op == "cleanup" {
				w.mu.Lock()
				w.cleanups++
				w.mu.Unlock()
			}
			return next(ctx)
		},
	})
}

func (w *waits) get() ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events), w.cleanups
}

// releasedWhenQueued returns a Wait callback that drops key, as its holder
// would release it, when the waiter is enqueued, and then sends wake to the
// waiter's listener, unless it is 0 (the message was lost).
func releasedWhenQueued(f *notifyFake, key string, wake strategy.Wake) func(lock.Event) {
	return func(e lock.Event) {
		if e.Op != "enqueued" {
			return
		}
		f.drop(key)
		if wake != 0 {
			f.wakes <- wake
		}
	}
}

// TestWaitLoop: how a waiter of a strategy that notifies sleeps and wakes.
// The retry delays are an hour where the test needs the waiter to be woken
// before its timer: it would otherwise run into the test's timeout.
func TestWaitLoop(t *testing.T) {
	for _, c := range []struct {
		name      string
		rank      int
		holderTTL time.Duration
		delay     time.Duration
		wake      strategy.Wake
		want      []string
	}{
		{"a message wakes the waiter before its timer", 1, time.Hour, time.Hour, strategy.WakeMessage,
			[]string{"enqueued 1", "woken message"}},
		{"a subscription's confirmation wakes the waiter, since a release before it went unheard", 2, time.Hour, time.Hour, strategy.WakeSubscribed,
			[]string{"enqueued 2", "woken subscribed"}},
		{"a lost message: the timer wakes the waiter, and the wake-up is reported missed", 2, time.Hour, time.Millisecond, 0,
			[]string{"enqueued 2", "woken timer", "missed"}},
		{"the head's timer ends with the holder's TTL, + 1ms, when that comes before the delay; an expiry is no lost message", 1, time.Millisecond, time.Hour, 0,
			[]string{"enqueued 1", "woken timer"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			f := newNotifyFake(c.rank, c.holderTTL)
			f.hold("k", "other")
			var w waits
			lk, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.Linear(c.delay)), w.option(releasedWhenQueued(f, "k", c.wake)))
			if err != nil {
				t.Fatalf("Obtain = %v, want a lock", err)
			}
			_ = lk.Release(ctx)
			if got, _ := w.get(); !slices.Equal(got, c.want) {
				t.Errorf("Wait events = %q, want %q", got, c.want)
			}
		})
	}

	t.Run("enqueued is reported once, with the first rank; woken at every wake-up", func(t *testing.T) {
		f := newNotifyFake(3, time.Hour)
		f.hold("k", "other")
		attempts := 0
		f.onAcquire = func(context.Context) {
			if attempts++; attempts == 3 {
				f.drop("k")
			}
		}
		var w waits
		if _, err := lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.Linear(time.Millisecond)), w.option(nil)); err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		want := []string{"enqueued 3", "woken timer", "woken timer", "missed"}
		if got, _ := w.get(); !slices.Equal(got, want) {
			t.Errorf("Wait events = %q, want %q", got, want)
		}
	})

	t.Run("a waiter that cannot be woken keeps its place, tries again on its timer, and leaves when it gives up", func(t *testing.T) {
		f := newNotifyFake(2, time.Hour)
		f.deaf = true
		f.hold("k", "other")
		var w waits
		_, err := lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 3)), w.option(nil))
		if !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("Obtain = %v, want ErrNotObtained", err)
		}
		ids, _ := f.waiters()
		if len(ids) != 3 || ids[0] == "" || ids[1] != ids[0] {
			t.Errorf("waiters = %q, want the same id on the attempts before the last", ids)
		}
		listens, closes, leaves := f.counts()
		if listens != 1 || closes != 0 || len(leaves) == 0 {
			t.Errorf("Listen, Close, Leave calls = %d, %d, %d; want 1, 0 (no listener), at least 1", listens, closes, len(leaves))
		}
		want := []string{"enqueued 2", "woken timer", "woken timer"}
		if got, _ := w.get(); !slices.Equal(got, want) {
			t.Errorf("Wait events = %q, want %q", got, want)
		}
	})

	t.Run("a strategy that can neither wake nor queue the waiter: it polls, and reports nothing", func(t *testing.T) {
		f := newNotifyFake(0, time.Hour)
		f.deaf = true
		f.hold("k", "other")
		f.onAcquire = func(context.Context) {
			if ids, _ := f.waiters(); len(ids) == 3 {
				f.drop("k")
			}
		}
		var w waits
		if _, err := lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.Linear(time.Millisecond)), w.option(nil)); err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		if got, _ := w.get(); len(got) != 0 {
			t.Errorf("Wait events = %q, want none", got)
		}
		if _, _, leaves := f.counts(); len(leaves) != 0 {
			t.Errorf("Leave calls = %d, want 0: it was never queued", len(leaves))
		}
	})

	t.Run("a strategy that notifies no one: the waiter polls, and reports nothing", func(t *testing.T) {
		f := newFake()
		f.hold("k", "other")
		f.onAcquire = func(context.Context) { f.drop("k") }
		var w waits
		if _, err := lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.Linear(time.Millisecond)), w.option(nil)); err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		if got, _ := w.get(); len(got) != 0 {
			t.Errorf("Wait events = %q, want none", got)
		}
	})
}

// TestWaitRequests: an attempt names the caller as a waiter only when
// another attempt may follow it, and gives the queue its patience.
func TestWaitRequests(t *testing.T) {
	held := func(t *testing.T, opts ...lock.Option) *notifyFake {
		t.Helper()
		f := newNotifyFake(1, time.Hour)
		f.hold("k", "other")
		if _, err := lock.New(f).Obtain(context.Background(), "k", time.Minute, opts...); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("Obtain = %v, want ErrNotObtained", err)
		}
		return f
	}

	t.Run("NoRetry: no waiter, no listener", func(t *testing.T) {
		f := held(t)
		if ids, _ := f.waiters(); !slices.Equal(ids, []string{""}) {
			t.Errorf("waiters = %q, want one attempt with none", ids)
		}
		if listens, _, _ := f.counts(); listens != 0 {
			t.Errorf("Listen calls = %d, want 0", listens)
		}
	})

	t.Run("LimitAttempts: the same waiter on every attempt but the last", func(t *testing.T) {
		f := held(t, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 3)))
		ids, _ := f.waiters()
		if len(ids) != 3 || ids[0] == "" || ids[1] != ids[0] || ids[2] != "" {
			t.Errorf("waiters = %q, want one id twice, then none", ids)
		}
		g := held(t, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 2)))
		if other, _ := g.waiters(); len(other) != 2 || other[0] == ids[0] {
			t.Errorf("another Obtain's waiters = %q, want an id of its own", other)
		}
	})

	t.Run("WithPolling: no waiter, no listener, no events", func(t *testing.T) {
		var w waits
		f := held(t, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 3)), lock.WithPolling(), w.option(nil))
		if ids, _ := f.waiters(); !slices.Equal(ids, []string{"", "", ""}) {
			t.Errorf("waiters = %q, want three attempts with none", ids)
		}
		if listens, _, _ := f.counts(); listens != 0 {
			t.Errorf("Listen calls = %d, want 0", listens)
		}
		if got, _ := w.get(); len(got) != 0 {
			t.Errorf("Wait events = %q, want none", got)
		}
	})

	t.Run("poll is the retry delay, and no patience is set without a deadline", func(t *testing.T) {
		f := held(t, lock.WithRetry(lock.LimitAttempts(lock.Linear(10*time.Millisecond), 2)))
		if polls := f.polls(); !slices.Equal(polls, []time.Duration{10 * time.Millisecond, 0}) {
			t.Errorf("poll = %v, want [10ms 0s]", polls)
		}
		if _, ps := f.waiters(); !slices.Equal(ps, []time.Duration{0, 0}) {
			t.Errorf("patience = %v, want [0s 0s]", ps)
		}
	})

	t.Run("patience never outlasts the deadline", func(t *testing.T) {
		f := newNotifyFake(1, time.Hour)
		f.hold("k", "other")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Minute), 2)),
			lock.WithHooks(&lock.Hooks{Wait: func(context.Context, lock.Event) { cancel() }})) // the first sleep ends at once
		if _, ps := f.waiters(); len(ps) != 1 || ps[0] <= 0 || ps[0] > time.Second {
			t.Errorf("patience = %v, want one in (0, 1s]: the deadline's distance", ps)
		}
	})
}

// TestWaitGivingUp: a waiter that gives up leaves the queue (one clean-up,
// strategy.CleanUp, whose Leave calls all name it) only if an attempt
// queued it, or may have (it got no answer); its listener, if it had one, is closed exactly once.
func TestWaitGivingUp(t *testing.T) {
	for _, c := range []struct {
		name   string
		retry  lock.RetryPolicy
		setup  func(f *notifyFake, cancel context.CancelFunc) func(lock.Event)
		wantOK bool
		leaves bool // the waiter leaves the queue
		listen bool // the waiter listened
	}{
		{name: "cancelled while queued", retry: lock.Linear(time.Hour), leaves: true, listen: true,
			setup: func(_ *notifyFake, cancel context.CancelFunc) func(lock.Event) {
				return func(e lock.Event) {
					if e.Op == "enqueued" {
						cancel()
					}
				}
			}},
		{name: "attempts exhausted", retry: lock.LimitAttempts(lock.Linear(time.Millisecond), 3), leaves: true, listen: true},
		{name: "an error after it was queued", retry: lock.Linear(time.Millisecond), leaves: true, listen: true,
			setup: func(f *notifyFake, _ context.CancelFunc) func(lock.Event) {
				f.onAcquire = func(context.Context) {
					if ids, _ := f.waiters(); len(ids) == 2 { // the second attempt
						f.acquireErr = errBoom
					}
				}
				return nil
			}},
		{name: "no answer to an attempt that may have queued it", retry: lock.Linear(time.Hour), leaves: true,
			setup: func(f *notifyFake, _ context.CancelFunc) func(lock.Event) {
				f.acquireErr = context.DeadlineExceeded // its reply was lost
				return nil
			}},
		{name: "never queued: NoRetry", retry: lock.NoRetry()},
		{name: "obtained", retry: lock.Linear(time.Millisecond), wantOK: true, listen: true,
			setup: func(f *notifyFake, _ context.CancelFunc) func(lock.Event) { return releasedWhenQueued(f, "k", 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := newNotifyFake(1, time.Hour)
			f.hold("k", "other")
			var then func(lock.Event)
			if c.setup != nil {
				then = c.setup(f, cancel)
			}
			var w waits
			_, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(c.retry), w.option(then))
			if ok := err == nil; ok != c.wantOK {
				t.Fatalf("Obtain = %v, want success %v", err, c.wantOK)
			}
			ids, _ := f.waiters()
			var leaves []string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) { // a cancelled Obtain leaves in the background
				_, _, leaves = f.counts()
				if len(leaves) > 0 || !c.leaves || time.Now().After(deadline) {
					break
				}
			}
			switch {
			case c.leaves && len(leaves) == 0:
				t.Errorf("Leave calls = 0, want the waiter to leave")
			case !c.leaves && len(leaves) > 0:
				t.Errorf("Leave calls = %q, want none", leaves)
			}
			for _, id := range leaves {
				if id != ids[0] {
					t.Errorf("Leave(%q), want Leave(%q), the waiter's id", id, ids[0])
				}
			}
			if _, cleanups := w.get(); c.leaves && f.acquireErr == nil && cleanups != 1 {
				t.Errorf("clean-ups = %d, want 1", cleanups)
			}
			listens, closes, _ := f.counts()
			if want := map[bool]int{true: 1}[c.listen]; listens != want || closes != want {
				t.Errorf("Listen, Close calls = %d, %d; want %d, %d", listens, closes, want, want)
			}
		})
	}
}
