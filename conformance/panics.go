package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
)

// A Locker must survive what its callers get wrong: a nil context is an
// argument error, never a panic, and a hook that panics (recovered by the
// caller, as a server's recovery middleware does) leaves the Locker
// working. Both are checked on a fresh Locker, whose first calls are the
// ones under test: a multi-node strategy has not contacted its nodes yet.

// afterPanicBound is the deadline of the Obtain that checks that a Locker
// still works: it waits, with a retry policy, for the clean-ups that a
// panic left in the background. hangMargin is how long past that deadline
// it may return, on a loaded machine, before the suite decides that the
// panic left the Locker wedged.
const (
	afterPanicBound = 10 * time.Second
	hangMargin      = 5 * time.Second
)

// errBoom is what the suite's hooks panic with.
var errBoom = errors.New("conformance: a hook panicked")

// panicked returns what f panicked with, or nil.
func panicked(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func (s suite) nilContext(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	key := Key(t)
	var none context.Context // nil
	refuses := func(call string, f func() error) {
		t.Run(call, func(t *testing.T) {
			var err error
			if v := panicked(func() { err = f() }); v != nil {
				t.Fatalf("%s with a nil ctx panicked: %v; want an *ArgumentError named ctx", call, v)
			}
			if !argumentError(err, "ctx") {
				t.Fatalf("%s with a nil ctx = %v, want an *ArgumentError named ctx", call, err)
			}
		})
	}
	refuses("Inspect", func() error { _, err := l.Inspect(none, key); return err })
	refuses("Break", func() error { _, err := l.Break(none, key, ""); return err })
	refuses("Obtain", func() error {
		lk, err := l.Obtain(none, key, time.Minute)
		release(t, lk)
		return err
	})
	ran := false
	refuses("Do", func() error {
		return lock.Do(none, l, key, time.Minute, func(context.Context) error { ran = true; return nil })
	})
	if ran {
		t.Errorf("Do with a nil ctx ran fn, want it refused first")
	}
	lk, _ := s.stillObtains(t, ctx, l, key, "the calls with a nil ctx")
	if lk == nil {
		t.FailNow()
	}
	refuses("Lock.TTL", func() error { _, err := lk.TTL(none); return err })
	refuses("Lock.Refresh", func() error { return lk.Refresh(none, time.Minute) })
	refuses("Lock.StartRefresh", func() error { return lk.StartRefresh(none) })
	refuses("Lock.Release", func() error { return lk.Release(none) })
	if err := lk.Release(ctx); err != nil {
		t.Errorf("Release after the calls with a nil ctx = %v, want nil: they must leave the lock held", err)
	}
}

// survivesHookPanics: the cases share one Locker, as a server's handlers
// do, and stop at the first that leaves it wedged.
func (s suite) survivesHookPanics(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	// after panics after a call that succeeded.
	after := func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
		if err := next(ctx); err != nil {
			return err
		}
		panic(errBoom)
	}
	for _, c := range []struct {
		name string
		// call makes the call whose hook panics, on key, and returns what it
		// panicked with: nil when its hook did not run.
		call func(t *testing.T, key string) any
	}{
		{"Obtain hook", func(t *testing.T, key string) any {
			return s.obtainPanics(t, ctx, l, key, &lock.Hooks{
				Obtain: func(ctx context.Context, _ lock.Event, next func(context.Context) (*lock.Lock, error)) (*lock.Lock, error) {
					lk, err := next(ctx)
					if err == nil {
						panic(errBoom)
					}
					return lk, err
				}})
		}},
		{"Attempt hook", func(t *testing.T, key string) any {
			return s.obtainPanics(t, ctx, l, key, &lock.Hooks{Attempt: after})
		}},
		{"Node hook", func(t *testing.T, key string) any {
			return s.obtainPanics(t, ctx, l, key, &lock.Hooks{Node: func(context.Context, lock.Event) { panic(errBoom) }})
		}},
		{"Wait hook", func(t *testing.T, key string) any {
			if !s.probeWaiting(t, ctx).notifies {
				return nil // no Wait event comes, but for a timer's
			}
			holder := s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL)
			// A waiter whose timer never fires within the property, so that
			// a place it kept in a queue would hold the next one back.
			v := s.obtainPanics(t, ctx, l, key, &lock.Hooks{Wait: func(context.Context, lock.Event) { panic(errBoom) }},
				lock.WithRetry(lock.Linear(noTimer)))
			if err := holder.Release(ctx); err != nil {
				t.Fatalf("the holder's Release = %v, want nil", err)
			}
			return v
		}},
		{"Op hook of Inspect", func(t *testing.T, key string) any {
			return panicked(func() {
				_, _ = l.Inspect(ctx, key, lock.WithHooks(&lock.Hooks{Op: after}))
			})
		}},
		{"Op hook of Release", func(t *testing.T, key string) any {
			lk := s.obtain(t, ctx, l, key, heldTTL, lock.WithHooks(&lock.Hooks{
				Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
					if e.Op != "release" {
						return next(ctx)
					}
					return after(ctx, e, next)
				}}))
			return panicked(func() { _ = lk.Release(ctx) })
		}},
		{"Ended hook", func(t *testing.T, key string) any {
			lk := s.obtain(t, ctx, l, key, heldTTL, lock.WithHooks(&lock.Hooks{Ended: func(lock.Event) { panic(errBoom) }}))
			done := lk.Done()
			v := panicked(func() { _ = lk.Release(ctx) })
			select {
			case <-done:
			default:
				t.Errorf("Done of a lock released, whose Ended hook panicked: open, want it closed")
			}
			return v
		}},
	} {
		wedged := false
		t.Run(c.name, func(t *testing.T) {
			key := Key(t)
			v := c.call(t, key)
			switch {
			case v == nil:
				t.Skipf("the %s never ran: the Locker does not report such events", c.name)
			case v != errBoom:
				t.Fatalf("the call panicked with %v, want the hook's own panic, %v", v, errBoom)
			}
			lk, ok := s.stillObtains(t, ctx, l, key, "a panic of the "+c.name)
			wedged = !ok
			if lk != nil {
				if err := lk.Release(ctx); err != nil {
					t.Errorf("Release = %v, want nil", err)
				}
			}
		})
		if wedged {
			t.Fatalf("the %s's panic left the Locker wedged: the cases that follow need it working", c.name)
		}
	}
}

// obtainPanics runs an Obtain of key on l, with hooks h and opts, whose
// hook panics, and returns what it panicked with: nil, after releasing the
// lock, when it returned.
func (s suite) obtainPanics(t *testing.T, ctx context.Context, l *lock.Locker, key string, h *lock.Hooks, opts ...lock.Option) any {
	t.Helper()
	var lk *lock.Lock
	var err error
	v := panicked(func() { lk, err = l.Obtain(ctx, key, heldTTL, append(opts, lock.WithHooks(h))...) })
	if lk != nil {
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
	}
	if v == nil && err != nil && !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Obtain = %v, want a lock or a panic", err)
	}
	return v
}

// stillObtains obtains key on l, after what, within afterPanicBound,
// waiting with a retry policy for the clean-ups that what left in the
// background, and returns the lock, which t releases when it ends. It fails
// t, without hanging, if l does not: it returns nil then, and false when the
// Obtain did not return within hangMargin of its deadline, leaving the
// Locker wedged.
func (s suite) stillObtains(t *testing.T, ctx context.Context, l *lock.Locker, key, what string) (*lock.Lock, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, afterPanicBound)
	defer cancel()
	w := wait(ctx, l, key, lock.Linear(10*time.Millisecond), newWaitTrace(), nil) // a wedged Locker's never returns
	hang := time.NewTimer(afterPanicBound + hangMargin)
	defer hang.Stop()
	select {
	case <-w.done:
		if w.err != nil {
			t.Errorf("Obtain after %s = %v, want a lock within %v (what the call wrote, or its place in a queue, was left behind)", what, w.err, afterPanicBound)
			return nil, true
		}
		release(t, w.lk)
		return w.lk, true
	case <-hang.C:
		t.Errorf("Obtain after %s did not return within %v of its deadline, %v: the Locker is wedged (a mutex held across the panic)", what, hangMargin, afterPanicBound)
		return nil, false
	}
}
