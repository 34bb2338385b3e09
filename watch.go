package lock

import (
	"context"
	"errors"
	"time"

	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/internal/wait"
)

type lockKey struct{}

// FromContext returns the lock of a context made by [Lock.Context], such as
// the one [Do] passes to fn.
func FromContext(ctx context.Context) (*Lock, bool) {
	if ctx == nil {
		return nil, false
	}
	l, ok := ctx.Value(lockKey{}).(*Lock)
	return l, ok && l != nil
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
// found gone or taken (ErrBroken, which matches ErrExpired, when a
// Locker.Break deleted it), ErrLapsed when its validity deadline passed first,
// and "already released" after Release. A lapse that followed a failed
// refresh also matches that refresh's error and names it ("validity
// lapsed before a refresh confirmed it; the last refresh failed: lock:
// refresh "k": NOPERM …"); when that refresh got no answer, it matches
// ErrNoAnswer, and never the errors of the refresh's own context. The
// first cause stays. (Err can report it a moment before Done is closed, while
// the Ended hooks run.)
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
// the work it governs is done, as with context.WithCancel. Like
// context.WithCancel, it panics when parent is nil.
func (l *Lock) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(context.WithValue(parent, lockKey{}, l))
	if l == nil {
		cancelCause(ErrNotHeld)
		return ctx, func() {}
	}
	done := l.watch()
	stop := context.AfterFunc(done, func() { cancelCause(context.Cause(done)) })
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
	if l.done == nil {
		l.done, l.closeDone = context.WithCancelCause(context.Background())
		if l.cause != nil {
			l.closeDone(l.cause) // endLocked has run, or will find closeDone set
		} else {
			l.armLocked()
		}
	}
	done := l.done
	l.mu.Unlock()
	l.lapse()
	return done
}

// armLocked sets the deadline timer of a watched lock to ValidUntil,
// unless its batcher watches its validity (see batcher.sweep), which
// signals the lapses of many locks from one timer. l.mu must be held.
func (l *Lock) armLocked() {
	if l.done == nil || l.cause != nil {
		return
	}
	if l.batched() {
		if l.deadline != nil {
			l.deadline.Stop()
		}
		l.batch.mu.Lock()
		l.batch.watch(l.validUntil)
		l.batch.mu.Unlock()
		return
	}
	if l.deadline == nil {
		l.deadline = time.AfterFunc(time.Until(l.validUntil), func() { l.lapse() })
	} else {
		l.deadline.Reset(time.Until(l.validUntil))
	}
}

// batched reports whether l's batcher refreshes it, and so watches its
// validity. l.mu must be held.
func (l *Lock) batched() bool {
	if l.batch == nil || l.refresher == nil {
		return false
	}
	select {
	case <-l.refresher.done:
		return false
	default:
		return true
	}
}

// lapse ends the lock with ErrLapsed if ValidUntil has passed, and reports
// whether it did.
func (l *Lock) lapse() bool {
	l.mu.Lock()
	if l.cause != nil || time.Now().Before(l.validUntil) {
		l.mu.Unlock()
		return false
	}
	cause := ErrLapsed
	if l.limited {
		cause = errLapsedAtLimit
	}
	if l.refreshErr != nil {
		cause = lapsedAfter(cause, l.refreshErr)
	}
	l.endLocked(cause)
	return true
}

// lapsedAfter is the loss cause, a lapse, of a lock whose last refresh
// failed with err: it says so, and matches err too, except when err
// matches the errors of that refresh's context (it got no answer in time,
// or was not sent), which are not the holder's: then it keeps err's
// message, and ErrNoAnswer if err matches it.
func lapsedAfter(cause, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		var errs []error
		if errors.Is(err, ErrNoAnswer) {
			errs = []error{ErrNoAnswer}
		}
		err = &callError{msg: err.Error(), errs: errs}
	}
	return &lapseError{callError{msg: cause.Error() + "; the last refresh failed: " + err.Error(), errs: []error{cause, err}}}
}

// lapseError is a loss cause of lapsedAfter.
type lapseError struct{ callError }

// ErrorType returns "lapsed", the error.type that telemetry records of
// the loss (the otel package asks errors for it), rather than that of the
// refresh's error, which it wraps too.
func (e *lapseError) ErrorType() string { return "lapsed" }

// refresher is the goroutine of auto-refresh.
type refresher struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when it has exited
}

// StartRefresh starts refreshing the lock in the background, with the TTL
// it was obtained (or last refreshed) with, every [WithRefreshFraction] of
// it after the last successful refresh was sent. A refresh that fails
// without an answer (a timeout, a broken connection, no quorum), or with
// an error reply that passes by itself (LOADING, BUSY, READONLY, and the
// others docs/safety.md lists), is retried after a quarter of that
// interval while the lock is valid. Each refresh is bounded by the
// interval and by ValidUntil, and goes through Refresh, so its hooks and
// limits apply. ctx's values (such as a trace) reach the refreshes.
//
// The refreshes stop when ctx is done, StopRefresh or Release is called, or
// the lock is lost (see Done): a refresh found it gone or taken, ValidUntil
// passed first, or a limit ([WithMaxRefreshes], [WithMaxHold]) was reached,
// after which the lock lapses at the end of its last refresh. They stop
// too after an error that no refresh sent again could turn into a success
// (NOPERM, WRONGTYPE, a script's error, a command the server lacks); the
// lock then lapses at ValidUntil, and Err names that error. Always stop
// them: a lock refreshed forever keeps everyone else out.
//
// A Locker whose strategy batches refreshes (strategy.Batcher) refreshes
// its locks together, with one timer and no goroutine per lock, each from
// half an interval to an interval after its last refresh was sent; such a
// lock's validity ends sooner (see [Lock.ValidUntil]). docs/locking.md
// says more.
//
// It returns nil when the refreshes run, started by this call or an
// earlier one, Err if the lock is no longer held, and an [*ArgumentError]
// for a nil ctx.
func (l *Lock) StartRefresh(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
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
	if l.batch != nil {
		l.batch.add(ctx, l, r, l.nextLocked(false))
		l.armLocked() // the batcher watches it now
	} else {
		go l.refresh(ctx, r)
	}
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
		if ctx.Err() != nil || stopsRefresh(err) {
			return
		}
		failed = err != nil
	}
}

// stopsRefresh reports whether auto-refresh stops after a refresh that
// returned err, as no refresh sent again could succeed: the lock is lost, a
// limit was reached, the refresh was refused as an argument, the server
// lacks what it needs (errors.ErrUnsupported), or the server refused it
// with an error reply that does not pass by itself, such as NOPERM or
// WRONGTYPE (neterr.Final, whose Transient lists the replies that are
// retried). The deadline timer then ends the lock, with err beside
// ErrLapsed. A refresh without an answer, or refused a connection, is
// retried.
func stopsRefresh(err error) bool {
	return errors.Is(err, ErrNotHeld) || errors.Is(err, ErrRefreshLimit) || errors.As(err, new(*ArgumentError)) ||
		errors.Is(err, errors.ErrUnsupported) || neterr.Final(err)
}
