package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/strategy"
)

// Do runs fn while holding the lock on key: it obtains it with opts, as
// [Locker.Obtain] does (a ttl of 0 is the Locker's default TTL, [WithTTL]),
// then holds it while fn runs and releases it, as [Hold] does. When the
// lock is not obtained, fn does not run, and Do returns Obtain's error,
// such as one matching ErrNotObtained. A lock of several keys, or of any
// shape, is held with Hold: obtain it with [Locker.ObtainMany] and the
// options of the shape, and pass it to Hold.
func Do(ctx context.Context, l *Locker, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...Option) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	switch {
	case l == nil:
		return &ArgumentError{Name: "locker", Reason: "must not be nil"}
	case fn == nil:
		return &ArgumentError{Name: "fn", Reason: "must not be nil"}
	}
	lk, err := l.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		return err
	}
	return hold(ctx, lk, fn)
}

// Hold runs fn while holding lk, a lock just obtained (of one key or
// several, of any shape), and releases it when fn returns.
//
// It refreshes lk in the background every [WithRefreshFraction] of its
// TTL, retrying a failed refresh while the lock is valid, and cancels fn's
// context as soon as the lock is lost: a refresh finds it gone or taken,
// or its validity deadline ([Lock.ValidUntil]) passes before a refresh
// confirmed it. context.Cause on fn's context says why, and [FromContext]
// returns the lock. [WithMaxHold] caps how long it is held. Cancelling ctx
// cancels fn's context and stops the refreshes. docs/safety.md tells each
// step.
//
// After fn returns (or panics), Hold releases the lock on a context that
// outlives ctx's cancellation, bounded by 5s, and waits for it 1s at most,
// and no later than 100ms past ctx's deadline; a release still on its way
// then goes on in the background (its outcome reaches the Op hooks), and
// Hold returns a release error matching context.DeadlineExceeded.
//
// Its error is:
//   - when the lock was lost before fn returned, or found gone by the
//     release, one matching [ErrLost] and the cause (ErrExpired, ErrTaken
//     or ErrLapsed, and a failed refresh's error: see [Lock.Err]), which
//     also wraps fn's error, if any, and says the cause once when fn
//     returned it (or an error that wraps it);
//   - otherwise fn's error as it is, joined with the release's error if
//     that failed too, or the release's error alone.
//
// A nil ctx or fn gives an [*ArgumentError], and lk is left as it was.
func Hold(ctx context.Context, lk *Lock, fn func(ctx context.Context) error) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	switch {
	case lk == nil:
		return &ArgumentError{Name: "lock", Reason: "must not be nil"}
	case fn == nil:
		return &ArgumentError{Name: "fn", Reason: "must not be nil"}
	}
	return hold(ctx, lk, fn)
}

// hold is Hold, once its arguments are checked.
func hold(ctx context.Context, lk *Lock, fn func(ctx context.Context) error) error {
	name := lk.name()
	fnCtx, cancel := lk.Context(ctx)
	defer cancel()
	returned := false
	defer func() {
		if !returned { // fn panicked: release, and let the panic go on
			_ = release(ctx, lk)
		}
	}()
	if err := lk.StartRefresh(ctx); err != nil {
		returned = true
		_ = release(ctx, lk)
		return fmt.Errorf("%w %s: %w", ErrLost, name, err)
	}
	fnErr := fn(fnCtx)
	returned = true
	lost := lk.Err()
	relErr := release(ctx, lk)
	if lost == nil && errors.Is(relErr, ErrNotHeld) {
		lost = relErr // gone by the time fn returned
	}
	switch {
	case lost != nil && errors.Is(fnErr, lost):
		// fn returned the cause (its context's), or wrapped it: say it once
		return fmt.Errorf("%w %s: %w", ErrLost, name, fnErr)
	case lost != nil && fnErr != nil:
		return fmt.Errorf("%w %s: %w (fn returned: %w)", ErrLost, name, lost, fnErr)
	case lost != nil:
		return fmt.Errorf("%w %s: %w", ErrLost, name, lost)
	case fnErr != nil && relErr != nil:
		return errors.Join(fnErr, relErr)
	case fnErr != nil:
		return fnErr
	}
	return relErr
}

// releaseTimeout bounds how long Do waits for its release, when ctx allows
// that long.
const releaseTimeout = time.Second

// releaseGrace is how long past ctx's deadline Do waits for its release.
const releaseGrace = 100 * time.Millisecond

// release releases lk for Do, as its doc says.
func release(ctx context.Context, lk *Lock) error {
	wait := time.Now().Add(releaseTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Add(releaseGrace).Before(wait) {
		wait = dl.Add(releaseGrace)
	}
	done := make(chan error, 1)
	lk.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), strategy.CleanupTimeout)
		defer cancel()
		done <- lk.Release(ctx)
	})
	t := time.NewTimer(time.Until(wait))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return opError(ctx, "release", lk.key, errReleasePending)
	}
}

var errReleasePending = fmt.Errorf("%w: the release goes on in the background", context.DeadlineExceeded)
