package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// shortTTL is the TTL of the locks these tests let lapse. aliveTTL, with
// the refresh fraction alive, is that of the locks they keep held or
// refreshed: a loaded machine can stall a process for far longer than a
// refresh takes, and a stall past ValidUntil rightly lapses the lock.
const (
	shortTTL = 300 * time.Millisecond
	aliveTTL = 3 * time.Second
)

var alive = lock.WithRefreshFraction(0.05)

// noLeaks fails t if goroutines started after the call are still running
// when t ends.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// waitDone waits for lk to be no longer held, for at most timeout.
func waitDone(t *testing.T, lk *lock.Lock) {
	t.Helper()
	select {
	case <-lk.Done():
	case <-time.After(timeout):
		t.Fatalf("Done not closed after %v", timeout)
	}
}

// refreshing obtains "k" on f for aliveTTL and starts refreshing it.
func refreshing(t *testing.T, f *fakeStrategy, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := lock.New(f).Obtain(context.Background(), "k", aliveTTL, append([]lock.Option{alive}, opts...)...)
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	if err := lk.StartRefresh(context.Background()); err != nil {
		t.Fatalf("StartRefresh = %v, want nil", err)
	}
	return lk
}

// waitRefreshes waits until f has seen n refreshes, or ctx ends.
func waitRefreshes(ctx context.Context, f *fakeStrategy, n int) error {
	for len(f.callsTo("refresh")) < n {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// endings records the Ended hooks' events.
type endings struct {
	mu   sync.Mutex
	errs []error
}

func (e *endings) hooks() lock.Option {
	return lock.WithHooks(&lock.Hooks{Ended: func(ev lock.Event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.errs = append(e.errs, ev.Err)
	}})
}

func (e *endings) get() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

func TestDo(t *testing.T) {
	ctx := context.Background()
	errFn := errors.New("fn failed")

	t.Run("fn runs while the lock is held, and Do releases it after", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		err := lock.Do(ctx, lock.New(f), "k", time.Minute, func(ctx context.Context) error {
			if _, err := lock.New(f).Obtain(ctx, "k", time.Minute); !errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("Obtain inside fn = %v, want ErrNotObtained", err)
			}
			if lk, ok := lock.FromContext(ctx); !ok || lk.Key() != "k" {
				t.Errorf("FromContext(fn's context) = %v, %v; want the lock on k", lk, ok)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		if got := len(f.callsTo("release")); got != 1 {
			t.Errorf("releases = %d, want 1", got)
		}
		if _, err := lock.New(f).Obtain(ctx, "k", time.Minute); err != nil {
			t.Errorf("Obtain after Do = %v, want a lock", err)
		}
	})

	t.Run("fn's error is returned as it is, and the lock released", func(t *testing.T) {
		f := newFake()
		err := lock.Do(ctx, lock.New(f), "k", time.Minute, func(context.Context) error { return errFn })
		if !errors.Is(err, errFn) || errors.Is(err, lock.ErrLost) || err != errFn {
			t.Errorf("Do = %v, want fn's error itself", err)
		}
		if got := len(f.callsTo("release")); got != 1 {
			t.Errorf("releases = %d, want 1", got)
		}
	})

	t.Run("a lock found gone cancels fn's context, and Do reports ErrLost and the cause", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		err := lock.Do(ctx, lock.New(f), "k", aliveTTL, func(ctx context.Context) error {
			f.drop("k")
			<-ctx.Done()
			if cause := context.Cause(ctx); !errors.Is(cause, lock.ErrExpired) {
				t.Errorf("context.Cause(fn's context) = %v, want ErrExpired", cause)
			}
			return errFn
		}, alive)
		if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrExpired) || !errors.Is(err, errFn) {
			t.Errorf("Do = %v, want ErrLost, ErrExpired and fn's error", err)
		}
	})

	t.Run("a lock whose refreshes keep failing lapses at ValidUntil, after retries", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		f.failRefreshes(errBoom)
		var validUntil time.Time
		err := lock.Do(ctx, lock.New(f), "k", shortTTL, func(ctx context.Context) error {
			lk, _ := lock.FromContext(ctx)
			validUntil = lk.ValidUntil()
			<-ctx.Done()
			if now := time.Now(); now.Before(validUntil) {
				t.Errorf("fn's context cancelled %v before ValidUntil, want at or after it", validUntil.Sub(now))
			}
			return nil
		})
		if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrLapsed) || errors.Is(err, lock.ErrRefreshLimit) {
			t.Errorf("Do = %v, want ErrLost and ErrLapsed (not ErrRefreshLimit)", err)
		}
		if got := len(f.callsTo("refresh")); got < 2 {
			t.Errorf("refreshes = %d, want at least 2: a failed refresh is retried while the lock is valid", got)
		}
	})

	t.Run("a failed refresh that succeeds on retry keeps the lock", func(t *testing.T) {
		f := newFake()
		f.failRefreshes(nil, errBoom, errBoom)
		err := lock.Do(ctx, lock.New(f), "k", aliveTTL, func(ctx context.Context) error {
			return waitRefreshes(ctx, f, 4)
		}, alive)
		if err != nil {
			t.Errorf("Do = %v, want nil: the retries succeeded", err)
		}
	})

	t.Run("cancelling the parent cancels fn's context, stops refreshing and releases", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		parent, cancel := context.WithCancel(ctx)
		var lk *lock.Lock
		err := lock.Do(parent, lock.New(f), "k", aliveTTL, func(ctx context.Context) error {
			lk, _ = lock.FromContext(ctx)
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}, alive)
		if !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrLost) {
			t.Errorf("Do = %v, want context.Canceled and not ErrLost", err)
		}
		if got := len(f.callsTo("release")); got != 1 {
			t.Errorf("releases = %d, want 1", got)
		}
		for _, c := range f.callsTo("release") {
			if c.ctxErr != nil || !c.hasDeadline {
				t.Errorf("release context: err %v, deadline %v; want alive, with a deadline", c.ctxErr, c.hasDeadline)
			}
		}
		refreshes := len(f.callsTo("refresh"))
		time.Sleep(shortTTL)
		if got := len(f.callsTo("refresh")); got != refreshes {
			t.Errorf("refreshes after Do returned = %d, want 0", got-refreshes)
		}
		if err := lk.Err(); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Err() after Do = %v, want ErrNotHeld", err)
		}
	})

	t.Run("the lock is released when fn panics", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("recovered %v, want fn's panic", r)
				}
			}()
			_ = lock.Do(ctx, lock.New(f), "k", time.Minute, func(context.Context) error { panic("boom") })
		}()
		if got := len(f.callsTo("release")); got != 1 {
			t.Errorf("releases = %d, want 1", got)
		}
	})

	t.Run("WithMaxHold cancels fn's context once the hold time is spent", func(t *testing.T) {
		f := newFake()
		const maxHold = aliveTTL + aliveTTL/10
		start := time.Now()
		err := lock.Do(ctx, lock.New(f), "k", aliveTTL, func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}, alive, lock.WithMaxHold(maxHold))
		if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrLapsed) || !errors.Is(err, lock.ErrRefreshLimit) {
			t.Errorf("Do = %v, want ErrLost, ErrLapsed and ErrRefreshLimit", err)
		}
		if held := time.Since(start); held < maxHold-10*time.Millisecond {
			t.Errorf("held for %v, want the max hold, %v", held, maxHold)
		}
	})

	t.Run("auto-refresh goes through the Op hooks with the lock's TTL", func(t *testing.T) {
		var mu sync.Mutex
		var ttls []time.Duration
		hooks := lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			if e.Op == "refresh" {
				mu.Lock()
				ttls = append(ttls, e.TTL)
				mu.Unlock()
			}
			return next(ctx)
		}})
		f := newFake()
		err := lock.Do(ctx, lock.New(f), "k", aliveTTL, func(ctx context.Context) error {
			return waitRefreshes(ctx, f, 2)
		}, hooks, alive)
		if err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(ttls) < 2 || ttls[0] != aliveTTL {
			t.Errorf("refresh hook TTLs = %v, want at least 2 of %v", ttls, aliveTTL)
		}
	})

	t.Run("a failed release is reported with fn's error", func(t *testing.T) {
		f := newFake()
		f.releaseErr = errBoom
		err := lock.Do(ctx, lock.New(f), "k", time.Minute, func(context.Context) error { return errFn })
		if !errors.Is(err, errFn) || !errors.Is(err, errBoom) || errors.Is(err, lock.ErrLost) {
			t.Errorf("Do = %v, want fn's error and the release's", err)
		}
		err = lock.Do(ctx, lock.New(f), "k2", time.Minute, func(context.Context) error { return nil })
		if !errors.Is(err, errBoom) {
			t.Errorf("Do with a nil fn error = %v, want the release's error", err)
		}
	})

	t.Run("Obtain's error is returned and fn does not run", func(t *testing.T) {
		f := newFake()
		f.hold("k", "another owner")
		ran := false
		err := lock.Do(ctx, lock.New(f), "k", time.Minute, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, lock.ErrNotObtained) || ran {
			t.Errorf("Do on a held key = %v, fn ran %v; want ErrNotObtained, not run", err, ran)
		}
	})

	t.Run("bad arguments are *ArgumentErrors, and nothing is obtained", func(t *testing.T) {
		f := newFake()
		fn := func(context.Context) error { return nil }
		for _, c := range []struct {
			name   string
			locker lock.Locker
			fn     func(context.Context) error
			opts   []lock.Option
			arg    string
		}{
			{"a nil locker", nil, fn, nil, "locker"},
			{"a nil fn", lock.New(f), nil, nil, "fn"},
			{"a refresh fraction of 0", lock.New(f), fn, []lock.Option{lock.WithRefreshFraction(0)}, "refresh fraction"},
			{"a refresh fraction of 1", lock.New(f), fn, []lock.Option{lock.WithRefreshFraction(1)}, "refresh fraction"},
			{"a negative max hold", lock.New(f), fn, []lock.Option{lock.WithMaxHold(-time.Second)}, "max hold"},
			{"a max hold below the TTL", lock.New(f), fn, []lock.Option{lock.WithMaxHold(time.Second)}, "max hold"},
		} {
			t.Run(c.name, func(t *testing.T) {
				err := lock.Do(ctx, c.locker, "k", time.Minute, c.fn, c.opts...)
				var ae *lock.ArgumentError
				if !errors.As(err, &ae) || ae.Name != c.arg {
					t.Errorf("Do = %v, want an *ArgumentError named %q", err, c.arg)
				}
			})
		}
		if got := len(f.callsTo("acquire")); got != 0 {
			t.Errorf("acquisitions = %d, want 0", got)
		}
	})
}

func TestLostLockSignal(t *testing.T) {
	ctx := context.Background()

	t.Run("a nil *Lock is never held", func(t *testing.T) {
		var lk *lock.Lock
		select {
		case <-lk.Done():
		default:
			t.Error("(*Lock)(nil).Done() is open, want closed")
		}
		if err := lk.Err(); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("(*Lock)(nil).Err() = %v, want ErrNotHeld", err)
		}
		lctx, cancel := lk.Context(ctx)
		defer cancel()
		if cause := context.Cause(lctx); !errors.Is(cause, lock.ErrNotHeld) {
			t.Errorf("context.Cause((*Lock)(nil).Context()) = %v, want ErrNotHeld", cause)
		}
		if _, ok := lock.FromContext(lctx); ok {
			t.Error("FromContext((*Lock)(nil).Context()) reports a lock, want none")
		}
		if err := lk.StartRefresh(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("(*Lock)(nil).StartRefresh = %v, want ErrNotHeld", err)
		}
		lk.StopRefresh()
		if n, ok := lk.Fence(); n != 0 || ok {
			t.Errorf("(*Lock)(nil).Fence() = %d, %v; want 0, false", n, ok)
		}
	})

	t.Run("a held lock's Done is open and Err nil", func(t *testing.T) {
		lk := obtain(t, newFake(), "k")
		defer lk.Release(ctx)
		select {
		case <-lk.Done():
			t.Errorf("Done closed on a held lock (Err %v)", lk.Err())
		default:
		}
		if err := lk.Err(); err != nil {
			t.Errorf("Err() = %v, want nil", err)
		}
	})

	t.Run("a Refresh that finds the lock gone closes Done, and Err says ErrExpired", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		done := lk.Done()
		f.drop("k")
		_ = lk.Refresh(ctx, time.Minute)
		waitDone(t, lk)
		if err := lk.Err(); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Err() = %v, want ErrExpired", err)
		}
		if done != lk.Done() {
			t.Error("Done() returned another channel, want the same one")
		}
	})

	t.Run("a lock whose ValidUntil passes lapses, and is not refreshed again", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		lk, err := lock.New(f).Obtain(ctx, "k", shortTTL)
		if err != nil {
			t.Fatal(err)
		}
		validUntil := lk.ValidUntil()
		waitDone(t, lk)
		if now := time.Now(); now.Before(validUntil) {
			t.Errorf("Done closed %v before ValidUntil, want at or after it", validUntil.Sub(now))
		}
		if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) || !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Err() = %v, want ErrLapsed, matching ErrNotHeld", err)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() after the lapse = %v, want the zero time", got)
		}
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrLapsed) || len(f.callsTo("refresh")) != 0 {
			t.Errorf("Refresh after the lapse = %v, %d calls; want ErrLapsed, no call", err, len(f.callsTo("refresh")))
		}
		if err := lk.StartRefresh(ctx); !errors.Is(err, lock.ErrLapsed) {
			t.Errorf("StartRefresh after the lapse = %v, want ErrLapsed", err)
		}
	})

	t.Run("Err on a lock past its ValidUntil reports the lapse at once", func(t *testing.T) {
		lk, err := lock.New(newFake()).Obtain(ctx, "k", time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) {
			t.Errorf("Err() past ValidUntil = %v, want ErrLapsed", err)
		}
	})

	t.Run("a refresh by hand moves the deadline Done waits for", func(t *testing.T) {
		lk, err := lock.New(newFake()).Obtain(ctx, "k", aliveTTL)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		_ = lk.Done()
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		time.Sleep(aliveTTL + 100*time.Millisecond)
		if err := lk.Err(); err != nil {
			t.Errorf("Err() after a refresh by hand and the first TTL = %v, want nil", err)
		}
	})

	t.Run("Release closes Done, and Err says already released", func(t *testing.T) {
		lk := obtain(t, newFake(), "k")
		lctx, cancel := lk.Context(ctx)
		defer cancel()
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		waitDone(t, lk)
		<-lctx.Done()
		if err, cause := lk.Err(), context.Cause(lctx); !errors.Is(err, lock.ErrNotHeld) || cause != err {
			t.Errorf("Err(), context cause after Release = %v, %v; want the same error, matching ErrNotHeld", err, cause)
		}
	})

	t.Run("Context is cancelled with the cause, keeps parent's values, and holds the lock", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		type key struct{}
		lctx, cancel := lk.Context(context.WithValue(ctx, key{}, "v"))
		defer cancel()
		if got, ok := lock.FromContext(lctx); !ok || got != lk {
			t.Errorf("FromContext = %v, %v; want the lock", got, ok)
		}
		if lctx.Value(key{}) != "v" {
			t.Error("the lock's context lost its parent's value")
		}
		f.hold("k", "another owner")
		_, _ = lk.TTL(ctx)
		<-lctx.Done()
		if cause := context.Cause(lctx); !errors.Is(cause, lock.ErrTaken) {
			t.Errorf("context.Cause = %v, want ErrTaken", cause)
		}
	})

	t.Run("cancel of Context leaves the lock held", func(t *testing.T) {
		lk := obtain(t, newFake(), "k")
		defer lk.Release(ctx)
		lctx, cancel := lk.Context(ctx)
		cancel()
		if lctx.Err() == nil || lk.Err() != nil {
			t.Errorf("after cancel: context err %v, lock Err %v; want cancelled, nil", lctx.Err(), lk.Err())
		}
	})

	t.Run("the Ended hooks run once, with ErrLapsed, when a watched lock lapses", func(t *testing.T) {
		var e endings
		lk, err := lock.New(newFake()).Obtain(ctx, "k", shortTTL, e.hooks())
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, lk)
		_ = lk.Release(ctx)
		if got := e.get(); len(got) != 1 || !errors.Is(got[0], lock.ErrLapsed) {
			t.Errorf("Ended errors = %v, want one ErrLapsed", got)
		}
	})
}

func TestAutoRefresh(t *testing.T) {
	ctx := context.Background()

	t.Run("StartRefresh keeps the lock past its TTL, and StopRefresh stops refreshing", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		lk := refreshing(t, f)
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatalf("second StartRefresh = %v, want nil", err)
		}
		time.Sleep(aliveTTL + aliveTTL/5)
		if err := lk.Err(); err != nil {
			t.Fatalf("Err() after 1.2 TTLs of auto-refresh = %v, want nil", err)
		}
		if _, err := lock.New(f).Obtain(ctx, "k", time.Minute); !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain by another after 1.2 TTLs = %v, want ErrNotObtained", err)
		}
		lk.StopRefresh()
		refreshes := len(f.callsTo("refresh"))
		time.Sleep(aliveTTL / 5)
		if got := len(f.callsTo("refresh")); got != refreshes {
			t.Errorf("refreshes after StopRefresh = %d, want 0", got-refreshes)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release = %v, want nil", err)
		}
	})

	t.Run("auto-refresh finding the lock taken ends it, and runs the Ended hooks once", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		var e endings
		lk := refreshing(t, f, e.hooks())
		f.hold("k", "another owner")
		waitDone(t, lk)
		if err := lk.Err(); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Err() = %v, want ErrTaken", err)
		}
		lk.StopRefresh()
		if got := e.get(); len(got) != 1 || !errors.Is(got[0], lock.ErrTaken) {
			t.Errorf("Ended errors = %v, want one ErrTaken", got)
		}
	})

	t.Run("StartRefresh after its context ended starts again", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		lk, err := lock.New(f).Obtain(ctx, "k", aliveTTL, alive)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		rctx, cancel := context.WithCancel(ctx)
		if err := lk.StartRefresh(rctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		time.Sleep(10 * time.Millisecond)
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatalf("StartRefresh = %v, want nil", err)
		}
		lctx, stop := lk.Context(ctx)
		defer stop()
		if err := waitRefreshes(lctx, f, len(f.callsTo("refresh"))+2); err != nil {
			t.Errorf("waiting for the second refresher's refreshes: %v", err)
		}
	})

	t.Run("a refresh that replaces the value is not overlapped by TTL or Release", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.refreshGrant = strategy.Grant{Value: "a later timestamp"} // as setnx-getset's refresh does
		f.afterRefresh = func() { time.Sleep(50 * time.Millisecond) }
		refreshed := make(chan error, 1)
		go func() { refreshed <- lk.Refresh(ctx, time.Minute) }()
		for len(f.callsTo("refresh")) == 0 {
			time.Sleep(time.Millisecond)
		}
		if _, err := lk.TTL(ctx); err != nil {
			t.Errorf("TTL during a refresh that replaces the value = %v, want nil", err)
		}
		if err := <-refreshed; err != nil {
			t.Errorf("Refresh = %v, want nil", err)
		}
		go func() { refreshed <- lk.Refresh(ctx, time.Minute) }()
		for len(f.callsTo("refresh")) < 2 {
			time.Sleep(time.Millisecond)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release during a refresh that replaces the value = %v, want nil", err)
		}
		<-refreshed
	})

	t.Run("Release stops auto-refresh before it releases", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		lk := refreshing(t, f)
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		refreshes := len(f.callsTo("refresh"))
		time.Sleep(aliveTTL / 5)
		if got := len(f.callsTo("refresh")); got != refreshes {
			t.Errorf("refreshes after Release = %d, want 0", got-refreshes)
		}
	})

	t.Run("WithMaxRefreshes stops auto-refresh, and the lock lapses with ErrRefreshLimit", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		lk := refreshing(t, f, lock.WithMaxRefreshes(2))
		waitDone(t, lk)
		if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) || !errors.Is(err, lock.ErrRefreshLimit) {
			t.Errorf("Err() = %v, want ErrLapsed and ErrRefreshLimit", err)
		}
		if got := len(f.callsTo("refresh")); got != 2 {
			t.Errorf("refreshes = %d, want 2", got)
		}
	})

	t.Run("WithMaxHold shortens a refresh to end at the limit, then refuses", func(t *testing.T) {
		lk, err := lock.New(newFake()).Obtain(ctx, "k", time.Minute, lock.WithMaxHold(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		if err := lk.Refresh(ctx, time.Hour); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		if v := time.Until(lk.ValidUntil()); v > 2*time.Minute || v < time.Minute {
			t.Errorf("validity after Refresh(1h) under a 2m max hold = %v, want in [1m, 2m]", v)
		}
		short, err := lock.New(newFake()).Obtain(ctx, "k", 10*time.Millisecond, lock.WithMaxHold(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		if err := short.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrRefreshLimit) {
			t.Errorf("Refresh past the max hold = %v, want ErrRefreshLimit", err)
		}
	})
}

func TestFencing(t *testing.T) {
	ctx := context.Background()

	t.Run("Fence reports the strategy's token, with WithFencing only", func(t *testing.T) {
		f := newFake()
		f.grant.Fence = 7
		lk := obtain(t, f, "k", lock.WithFencing())
		if n, ok := lk.Fence(); n != 7 || !ok {
			t.Errorf("Fence() = %d, %v; want 7, true", n, ok)
		}
		plain := obtain(t, f, "k2")
		if n, ok := plain.Fence(); n != 0 || ok {
			t.Errorf("Fence() without WithFencing = %d, %v; want 0, false", n, ok)
		}
	})

	t.Run("a strategy that issues no token is refused, and its key cleaned up", func(t *testing.T) {
		f := newFake()
		_, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithFencing())
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "fencing" {
			t.Fatalf("Obtain WithFencing = %v, want an *ArgumentError named fencing", err)
		}
		if got := len(f.callsTo("release")); got != 2 {
			t.Errorf("clean-up deletes = %d, want 2 (until the server answered twice)", got)
		}
		if _, err := lock.New(f).Obtain(ctx, "k", time.Minute); err != nil {
			t.Errorf("Obtain after the refusal = %v, want a lock", err)
		}
	})
}
