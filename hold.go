package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/internal/wait"
	"github.com/locksmith-go/lock/strategy"
)

// Do runs fn while holding the lock on key, and releases it when fn returns.
//
// It obtains the lock with opts, as [Locker.Obtain] does, and refreshes it
// in the background every [WithRefreshFraction] of ttl (a third by
// default), retrying a failed refresh while the lock is still valid. fn's
// context is cancelled as soon as the lock is lost: when a refresh finds it
// gone or taken, or when its validity deadline ([Lock.ValidUntil], counted
// from when the last successful refresh was sent) passes before a refresh
// confirmed it. context.Cause on fn's context says why, and [FromContext]
// returns the lock, for its fencing token ([Lock.Fence], with
// [WithFencing]). [WithMaxHold] caps how long it is held.
//
// Cancelling ctx cancels fn's context and stops the refreshes. After fn
// returns (or panics), Do stops the refreshes and releases the lock on a
// context that outlives ctx's cancellation, bounded by strategy.CleanupTimeout (5s). It
// waits for the release for [ReleaseTimeout] at most, and no later than
// 100ms past ctx's deadline, so that it keeps the deadline; a release still
// on its way then goes on in the background, and its outcome reaches the
// Op hooks (e.Op "release"), while Do returns a release error matching
// context.DeadlineExceeded.
//
// Its error tells the cases apart:
//   - Obtain's error when the lock was not obtained (fn did not run), such
//     as one matching ErrNotObtained;
//   - an error matching [ErrLost], and the cause (ErrExpired, ErrTaken or
//     ErrLapsed), when the lock was lost before fn returned, or found gone
//     by the release after it; it also wraps fn's error, if any;
//   - otherwise fn's error as it is, joined with the release's error if
//     that failed too, or the release's error alone.
func Do(ctx context.Context, l Locker, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...Option) error {
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
		return fmt.Errorf("%w %q: %w", ErrLost, key, err)
	}
	fnErr := fn(fnCtx)
	returned = true
	lost := lk.Err()
	relErr := release(ctx, lk)
	if lost == nil && errors.Is(relErr, ErrNotHeld) {
		lost = relErr // gone by the time fn returned
	}
	switch {
	case lost != nil && fnErr != nil:
		return fmt.Errorf("%w %q: %w (fn returned: %w)", ErrLost, key, lost, fnErr)
	case lost != nil:
		return fmt.Errorf("%w %q: %w", ErrLost, key, lost)
	case fnErr != nil && relErr != nil:
		return errors.Join(fnErr, relErr)
	case fnErr != nil:
		return fnErr
	}
	return relErr
}

// releaseGrace is how long past ctx's deadline Do waits for its release.
const releaseGrace = 100 * time.Millisecond

// release releases lk for Do, as its doc says.
func release(ctx context.Context, lk *Lock) error {
	wait := time.Now().Add(ReleaseTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Add(releaseGrace).Before(wait) {
		wait = dl.Add(releaseGrace)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), strategy.CleanupTimeout)
		defer cancel()
		done <- lk.Release(ctx)
	}()
	t := time.NewTimer(time.Until(wait))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return opError("release", lk.key, errReleasePending)
	}
}

var errReleasePending = fmt.Errorf("%w: the release goes on in the background", context.DeadlineExceeded)

type lockKey struct{}

// FromContext returns the lock of a context made by [Lock.Context], such as
// the one [Do] passes to fn.
func FromContext(ctx context.Context) (*Lock, bool) {
	l, ok := ctx.Value(lockKey{}).(*Lock)
	return l, ok && l != nil
}

// Fence returns the lock's fencing token and true when it was obtained with
// [WithFencing]: a number that is larger for every new holder of the key,
// across releases, expiries and crashed holders. Pass it to the resource the
// lock protects, which must remember the largest token it has seen and
// reject requests carrying a smaller one: then a holder that lost its lock
// without knowing it (a pause, a slow network) cannot overwrite the work of
// the next holder. Unlike Token, it is not a secret.
func (l *Lock) Fence() (int64, bool) {
	if l == nil || l.fence == 0 {
		return 0, false
	}
	return l.fence, true
}

// closed is the Done channel of a nil *Lock.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Done returns a channel that is closed when the lock is no longer held:
// found gone or taken (by Refresh, auto-refresh, TTL or Release), lapsed
// (ValidUntil passed before a refresh confirmed it), or released. Err then
// says why. Like Err, Context and StartRefresh, it makes the lock watch its
// validity deadline, with a timer, from the first call on.
func (l *Lock) Done() <-chan struct{} {
	if l == nil {
		return closed
	}
	return l.watch().Done()
}

// Err returns nil while the lock is held, and afterwards why it is not: an
// error matching ErrNotHeld, which is ErrExpired or ErrTaken when it was
// found gone or taken, ErrLapsed when its validity deadline passed first,
// and "already released" after Release. The first cause stays. (Err can
// report it a moment before Done is closed, while the Ended hooks run.)
func (l *Lock) Err() error {
	if l == nil {
		return ErrNotHeld
	}
	l.watch()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

// Context returns a copy of parent that is also cancelled when the lock is
// no longer held (see Done), with Err as its cause (context.Cause). The
// lock can be had back from it with [FromContext]. Call cancel as soon as
// the work it governs is done, as with context.WithCancel.
func (l *Lock) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(context.WithValue(parent, lockKey{}, l))
	if l == nil {
		cancelCause(ErrNotHeld)
		return ctx, func() {}
	}
	lost := l.watch()
	stop := context.AfterFunc(lost, func() { cancelCause(context.Cause(lost)) })
	return ctx, func() {
		stop()
		cancelCause(context.Canceled)
	}
}

// watch makes, once, the context that is cancelled when the lock ends, and
// the timer that ends it with ErrLapsed when ValidUntil passes. It ends the
// lock at once if ValidUntil has already passed: a late timer, or a late
// first call, must not leave a lapsed lock looking held.
func (l *Lock) watch() context.Context {
	l.mu.Lock()
	if l.lost == nil {
		l.lost, l.lose = context.WithCancelCause(context.Background())
		if l.cause != nil {
			l.lose(l.cause) // endLocked has run, or will find lose set
		} else {
			l.deadline = time.AfterFunc(time.Until(l.validUntil), l.lapse)
		}
	}
	lost := l.lost
	l.mu.Unlock()
	l.lapse()
	return lost
}

// lapse ends the lock with ErrLapsed if ValidUntil has passed.
func (l *Lock) lapse() {
	l.mu.Lock()
	if l.cause != nil || time.Now().Before(l.validUntil) {
		l.mu.Unlock()
		return
	}
	cause := ErrLapsed
	if l.limited {
		cause = errLapsedAtLimit
	}
	l.endLocked(cause)
}

// refresher is the goroutine of auto-refresh.
type refresher struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when it has exited
}

// StartRefresh starts refreshing the lock in the background, with the TTL
// it was obtained (or last refreshed) with, every [WithRefreshFraction] of
// it after the last successful refresh was sent. A refresh that fails
// without an answer (a timeout, a broken connection, no quorum) is retried
// after a quarter of that interval, for as long as the lock is valid. Each
// refresh is bounded by the interval and by ValidUntil, and goes through
// Refresh, so its hooks and limits apply.
//
// The refreshes stop when ctx is done, StopRefresh or Release is called, or
// the lock is lost (see Done): a refresh found it gone or taken, ValidUntil
// passed first, or a limit ([WithMaxRefreshes], [WithMaxHold]) was reached,
// after which the lock lapses at the end of its last refresh. Always end
// them: a lock refreshed forever keeps everyone else out. ctx's values
// (such as a trace) reach the refreshes.
//
// It returns nil if the refreshes run (or already ran), and Err if the lock
// is no longer held.
func (l *Lock) StartRefresh(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	l.watch()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cause != nil {
		return l.cause
	}
	if r := l.refresher; r != nil {
		select {
		case <-r.done: // it stopped by itself (ctx, a limit): start again
		default:
			return nil
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &refresher{cancel: cancel, done: make(chan struct{})}
	l.refresher = r
	go l.refresh(ctx, r)
	return nil
}

// StopRefresh stops auto-refresh and waits for its goroutine to exit. The
// lock stays held until ValidUntil, unless refreshed by hand. Hooks, which
// can run on that goroutine, must not call it.
func (l *Lock) StopRefresh() {
	if l == nil {
		return
	}
	l.mu.Lock()
	r := l.refresher
	l.refresher = nil
	l.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// refresh is the refresher's loop.
func (l *Lock) refresh(ctx context.Context, r *refresher) {
	defer close(r.done)
	defer r.cancel()
	failed := false
	for {
		l.mu.Lock()
		ttl, sent := l.ttl, l.sent
		l.mu.Unlock()
		interval := time.Duration(float64(ttl) * l.fraction)
		next := sent.Add(interval)
		if failed {
			next = time.Now().Add(interval / 4)
		}
		if wait.Sleep(ctx, time.Until(next)) != nil {
			return
		}
		l.mu.Lock()
		ttl, deadline := l.ttl, l.validUntil
		l.mu.Unlock()
		now := time.Now()
		if !now.Before(deadline) {
			l.lapse() // too late to refresh: the timer may not have fired yet
			return
		}
		if d := now.Add(interval); d.Before(deadline) {
			deadline = d
		}
		callCtx, cancel := context.WithDeadline(ctx, deadline)
		err := l.Refresh(callCtx, ttl)
		cancel()
		switch {
		case err == nil:
			failed = false
		case ctx.Err() != nil, errors.Is(err, ErrNotHeld), errors.Is(err, ErrRefreshLimit), errors.As(err, new(*ArgumentError)):
			return // stopped, lost, or limited: the deadline timer ends the lock
		default:
			failed = true
		}
	}
}
