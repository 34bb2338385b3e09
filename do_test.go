package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
)

func TestDo(t *testing.T) {
	ctx := context.Background()

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
}

func TestDoLostLock(t *testing.T) {
	ctx := context.Background()
	errFn := errors.New("fn failed")

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
		// A refresh every 100ms, retried every 25ms for the second that the
		// lock is valid: many retries, even on a machine that stalls the
		// refresher for most of that second.
		err := lock.Do(ctx, lock.New(f), "k", time.Second, func(ctx context.Context) error {
			lk, _ := lock.FromContext(ctx)
			validUntil = lk.ValidUntil()
			<-ctx.Done()
			if now := time.Now(); now.Before(validUntil) {
				t.Errorf("fn's context cancelled %v before ValidUntil, want at or after it", validUntil.Sub(now))
			}
			return nil
		}, lock.WithRefreshFraction(0.1))
		if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrLapsed) || errors.Is(err, lock.ErrRefreshLimit) {
			t.Errorf("Do = %v, want ErrLost and ErrLapsed (not ErrRefreshLimit)", err)
		}
		if got := len(f.callsTo("refresh")); got < 2 {
			t.Errorf("refreshes = %d, want at least 2: a failed refresh is retried while the lock is valid", got)
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
}

func TestDoErrors(t *testing.T) {
	ctx := context.Background()
	errFn := errors.New("fn failed")

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
			locker *lock.Locker
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
