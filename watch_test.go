package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
	"go.uber.org/goleak"
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
	opts := append([]goleak.Option{goleak.IgnoreCurrent()}, lingering...)
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// lingering are the goroutines of the process's wake-up subscriptions,
// which an earlier test that waited by notification may have left: they
// belong to no lock, and end when their channels' linger (notify.Linger,
// 30s) does. The hub of a client that a test closed tries to reconnect
// until then, in new goroutines.
var lingering = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/locksmith-go/lock/internal/notify.(*hub).connect.func1"),
	goleak.IgnoreAnyFunction("github.com/locksmith-go/lock/driver/goredis.(*session).read"),
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
}

func TestLapse(t *testing.T) {
	ctx := context.Background()

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
