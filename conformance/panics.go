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

// panicked returns what f panicked with, or nil.
func panicked(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// nilContext: every call that takes a context refuses a nil one with an
// *ArgumentError named "ctx", without a panic, from the first call on a
// fresh Locker on, and the Locker works after them.
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
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "ctx" {
				t.Fatalf("%s with a nil ctx = %v, want an *ArgumentError named ctx", call, err)
			}
		})
	}
	refuses("Inspect", func() error { _, err := l.Inspect(none, key); return err })
	refuses("Break", func() error { _, err := l.Break(none, key, ""); return err })
	refuses("Obtain", func() error {
		lk, err := l.Obtain(none, key, time.Minute)
		if lk != nil {
			release(t, lk)
		}
		return err
	})
	ran := false
	refuses("Do", func() error {
		return lock.Do(none, l, key, time.Minute, func(context.Context) error { ran = true; return nil })
	})
	if ran {
		t.Errorf("Do with a nil ctx ran fn, want it refused first")
	}
	lk := s.stillObtains(t, ctx, l, key, "the calls with a nil ctx")
	refuses("Lock.TTL", func() error { _, err := lk.TTL(none); return err })
	refuses("Lock.Refresh", func() error { return lk.Refresh(none, time.Minute) })
	refuses("Lock.StartRefresh", func() error { return lk.StartRefresh(none) })
	refuses("Lock.Release", func() error { return lk.Release(none) })
	if err := lk.Release(ctx); err != nil {
		t.Errorf("Release after the calls with a nil ctx = %v, want nil: they must leave the lock held", err)
	}
}

// stillObtains obtains key on l, after what, within afterPanicBound,
// waiting with a retry policy for the clean-ups that what left in the
// background; it fails t, without hanging, if l does not. t releases the
// lock when it ends.
func (s suite) stillObtains(t *testing.T, ctx context.Context, l lock.Locker, key, what string) *lock.Lock {
	t.Helper()
	lk, _ := s.stillObtainsOrHangs(t, ctx, l, key, what)
	if lk == nil {
		t.FailNow()
	}
	return lk
}

// stillObtainsOrHangs is stillObtains that reports, rather than stops at,
// a failure: the lock, or nil; and false when the Obtain did not return
// within hangMargin of its deadline, leaving the Locker wedged.
func (s suite) stillObtainsOrHangs(t *testing.T, ctx context.Context, l lock.Locker, key, what string) (*lock.Lock, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, afterPanicBound)
	defer cancel()
	type result struct {
		lk  *lock.Lock
		err error
	}
	done := make(chan result, 1) // the Obtain of a wedged Locker never sends
	go func() {
		lk, err := l.Obtain(ctx, key, heldTTL, lock.WithRetry(lock.Linear(10*time.Millisecond)))
		done <- result{lk, err}
	}()
	hang := time.NewTimer(afterPanicBound + hangMargin)
	defer hang.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			t.Errorf("Obtain after %s = %v, want a lock within %v (what the call wrote, or its place in a queue, was left behind)", what, r.err, afterPanicBound)
			return nil, true
		}
		release(t, r.lk)
		return r.lk, true
	case <-hang.C:
		t.Errorf("Obtain after %s did not return within %v of its deadline, %v: the Locker is wedged (a mutex held across the panic)", what, hangMargin, afterPanicBound)
		return nil, false
	}
}
