package lock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// errHook is what the hooks of these tests panic with.
var errHook = errors.New("a hook panicked")

// recovered returns what f panicked with, or nil.
func recovered(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// within polls ok until it holds, and fails t after timeout: for what a
// panic leaves to a goroutine of its own.
func within(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for start := time.Now(); !ok(); time.Sleep(time.Millisecond) {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not after %v", what, timeout)
		}
	}
}

// TestHookPanics: a hook's panic reaches the caller with the hook's own
// value, and what the interrupted Obtain left is undone: the lock it got,
// what its attempt wrote (Grant.Value when the strategy reports one), its
// listener and its place in the queue. The real servers' side is the
// conformance property SurvivesHookPanics.
func TestHookPanics(t *testing.T) {
	ctx := context.Background()
	released := func(f *fakeStrategy) func() bool {
		return func() bool { return len(f.callsTo("release")) > 0 }
	}

	t.Run("an Obtain hook's: the lock is released, and reported ended", func(t *testing.T) {
		f := newFake()
		var tr trail
		v := recovered(func() {
			_, _ = lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithHooks(&lock.Hooks{
				Obtain: func(ctx context.Context, _ lock.Event, next func(context.Context) (*lock.Lock, error)) (*lock.Lock, error) {
					if _, err := next(ctx); err != nil {
						return nil, err
					}
					panic(errHook)
				},
				Ended: func(e lock.Event) { tr.add("ended:%v", e.Err) },
			}))
		})
		if v != errHook {
			t.Fatalf("Obtain panicked with %v, want %v", v, errHook)
		}
		if got, want := tr.String(), "ended:<nil>"; got != want {
			t.Errorf("Ended hooks saw %q, want %q: the lock ends as released", got, want)
		}
		within(t, "the lock released", released(f))
	})

	t.Run("an Attempt hook's: the value the strategy wrote is deleted", func(t *testing.T) {
		f := newFake()
		f.grant = strategy.Grant{Value: "timestamp"} // as setnx-getset reports its own value
		v := recovered(func() {
			_, _ = lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithHooks(&lock.Hooks{
				Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
					if err := next(ctx); err != nil {
						return err
					}
					panic(errHook)
				},
			}))
		})
		if v != errHook {
			t.Fatalf("Obtain panicked with %v, want %v", v, errHook)
		}
		within(t, "the value released", released(f))
		if got := values(f.callsTo("release")); !slices.Equal(got, []string{"timestamp"}) {
			t.Errorf("released values = %q, want [timestamp]", got)
		}
	})

	t.Run("a Wait hook's: the listener is closed, and the queue left", func(t *testing.T) {
		f := newNotifyFake(1, time.Hour)
		f.hold("k", "other")
		v := recovered(func() {
			_, _ = lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.Linear(time.Hour)),
				lock.WithHooks(&lock.Hooks{Wait: func(context.Context, lock.Event) { panic(errHook) }}))
		})
		if v != errHook {
			t.Fatalf("Obtain panicked with %v, want %v", v, errHook)
		}
		within(t, "the queue left", func() bool { _, _, leaves := f.counts(); return len(leaves) > 0 })
		listens, closes, leaves := f.counts()
		ids, _ := f.waiters()
		if listens != closes {
			t.Errorf("Listen called %d times, Close %d, want as many", listens, closes)
		}
		if !slices.Equal(leaves[:1], ids[:1]) {
			t.Errorf("Leave got %q, want the waiter's id %q", leaves, ids[:1])
		}
		if got := len(f.callsTo("release")); got != 0 {
			t.Errorf("releases = %d, want none: the attempt found the lock held, and wrote nothing", got)
		}
	})

	t.Run("an Ended hook's: Done is closed", func(t *testing.T) {
		f := newFake()
		lk, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithHooks(&lock.Hooks{Ended: func(lock.Event) { panic(errHook) }}))
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		done := lk.Done()
		if v := recovered(func() { _ = lk.Release(ctx) }); v != errHook {
			t.Fatalf("Release panicked with %v, want %v", v, errHook)
		}
		select {
		case <-done:
		default:
			t.Fatalf("Done: open after the Ended hook's panic, want closed")
		}
		if err := lk.Err(); err == nil {
			t.Errorf("Err = nil, want the lock released")
		}
	})
}
