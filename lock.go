// Package lock is a framework for distributed locks on Redis.
//
// A [Locker] obtains locks; each strategy package (strategy/single,
// strategy/setnx-getset, strategy/redlock) returns one, built over a driver
// (driver/goredis or driver/redigo). Application code depends on [Locker] and
// [Lock] only, so the strategy can change without touching it.
//
// The lock package owns everything the strategies share: the wait loop and
// its [RetryPolicy], token generation, argument validation, the local
// validity deadline and the error taxonomy ([ErrNotObtained], [ErrNotHeld],
// [*ArgumentError]). A strategy implements the strategy package's interface
// (one attempt, and the operations on a held lock) and hands it to [New].
package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/locksmith-go/lock/internal/scope"
	"github.com/locksmith-go/lock/internal/wait"
	"github.com/locksmith-go/lock/strategy"
)

// Locker obtains distributed locks.
type Locker interface {
	// Obtain locks key for ttl. It makes one attempt, then waits and tries
	// again as the retry policy says (see [WithRetry]; the default is
	// [NoRetry]) until the lock is obtained, the policy gives up, or ctx is
	// done.
	//
	// When another owner still holds the key, the error satisfies
	// errors.Is(err, ErrNotObtained); when ctx ended the wait it also
	// matches the context's cause (for example context.DeadlineExceeded).
	// Invalid arguments give an [*ArgumentError]. Redis and transport errors
	// are wrapped with the operation's name.
	Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error)

	// Inspect reads the state of the lock on key without holding it or
	// changing it: whether it is held, for how long yet, by whom (a
	// fingerprint of the holder's token, never the token, and its
	// metadata), and what else the strategy can tell (see [State]). Invalid
	// arguments give an [*ArgumentError]; Redis and transport errors are
	// wrapped with the operation's name, "inspect". A multi-node strategy
	// that could not tell returns what it read, with its error.
	Inspect(ctx context.Context, key string) (State, error)
}

// State is what [Locker.Inspect] read of a lock: whether it is held, its
// remaining TTL, the holder's token fingerprint and metadata, its fencing
// counter, and for some strategies more: each Redlock node's answer, a
// legacy lock's decoded timestamp and whether it can be taken over now.
type State = strategy.State

// New returns the [Locker] for a strategy. Strategy packages call it;
// application code gets a Locker from them (single.New, redlock.New, …) or
// from the config package. The defaults apply to every Obtain, before the
// options of the call.
func New(s strategy.Strategy, defaults ...Option) Locker {
	return &locker{s: s, defaults: defaults}
}

type locker struct {
	s        strategy.Strategy
	defaults []Option
}

func (l *locker) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	if len(l.defaults) > 0 {
		opts = append(slices.Clip(l.defaults), opts...)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if len(o.hooks) == 0 {
		return l.obtain(ctx, key, ttl, o)
	}
	e := o.hooks.event(l.s, "obtain", key)
	e.TTL = ttl
	return o.hooks.obtain(ctx, e, func(ctx context.Context) (*Lock, error) { return l.obtain(ctx, key, ttl, o) })
}

func (l *locker) obtain(ctx context.Context, key string, ttl time.Duration, o options) (*Lock, error) {
	if err := checkKeyTTL(key, ttl); err != nil {
		return nil, err
	}
	if o.maxHold > 0 && o.maxHold < ttl {
		return nil, &ArgumentError{Name: "max hold", Reason: fmt.Sprintf("must be at least the TTL, %v, got %v", ttl, o.maxHold)}
	}
	r := strategy.Request{Key: key, TTL: ttl, Token: o.token, Metadata: o.metadata, CallerToken: o.token != "", Fencing: o.fencing}
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return nil, notObtained(ctx)
		}
		// A fresh token for every attempt: a clean-up of an earlier attempt
		// that is still on its way to a slow server can never delete what a
		// later attempt acquired.
		if !r.CallerToken {
			var err error
			if r.Token, err = newToken(); err != nil {
				return nil, err
			}
		}
		sent := time.Now()
		g, err := l.attempt(ctx, r, attempt, o.hooks)
		if err == nil && r.Fencing && g.Fence <= 0 {
			l.cleanUp(ctx, o.hooks, key, cmp.Or(g.Value, r.Value()))
			name, _ := describe(l.s)
			return nil, &ArgumentError{Name: "fencing", Reason: "not supported by " + name + ": it issued no fencing token"}
		}
		if err == nil {
			lk := &Lock{s: l.s, key: key, token: r.Token, metadata: r.Metadata, value: r.Value(),
				refreshesLeft: o.maxRefreshes, hooks: o.hooks, obtained: sent,
				fraction: o.fraction, ttl: ttl}
			if r.Fencing {
				lk.fence = g.Fence
			}
			if o.maxHold > 0 {
				lk.holdUntil = sent.Add(o.maxHold)
			}
			lk.grant(g, sent, ttl)
			return lk, nil
		}
		if !errors.Is(err, ErrNotObtained) {
			// The command may have been applied even though its reply was
			// lost (a timeout, a cancelled context, a broken connection):
			// delete it, in the background once ctx is done.
			if !g.Undone {
				l.cleanUp(ctx, o.hooks, key, cmp.Or(g.Value, r.Value()))
			}
			if wait.Over(ctx) {
				return nil, notObtained(ctx)
			}
			return nil, opError("obtain", key, err)
		}
		delay, ok := o.retry.Delay(attempt)
		if !ok {
			return nil, err
		}
		if err := wait.Sleep(ctx, delay); err != nil {
			return nil, notObtained(ctx)
		}
	}
}

// attempt runs one Acquire, through the Attempt hooks.
func (l *locker) attempt(ctx context.Context, r strategy.Request, n int, hs hookList) (strategy.Grant, error) {
	if len(hs) == 0 {
		return l.s.Acquire(ctx, r)
	}
	e := hs.event(l.s, "attempt", r.Key)
	e.TTL, e.Attempt = r.TTL, n
	a := &acquisition{s: l.s, r: r}
	err := hs.wrap(ctx, l.s, e, attemptHook, a.run)
	return a.g, err
}

// acquisition is one Acquire whose Grant outlives the hooks around it.
type acquisition struct {
	s strategy.Strategy
	r strategy.Request
	g strategy.Grant
}

func (a *acquisition) run(ctx context.Context) (err error) {
	a.g, err = a.s.Acquire(ctx, a.r)
	return err
}

// ReleaseTimeout bounds how long [Do] waits for the release after fn, when
// ctx allows that long (see Do).
const ReleaseTimeout = time.Second

// cleanUp deletes value, which the attempt may have written under key, with
// strategy.CleanUp in the background, and waits for it while ctx allows.
func (l *locker) cleanUp(ctx context.Context, hs hookList, key, value string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if len(hs) > 0 {
			ctx = scope.With(ctx, &hookScope{hs, l.s})
		}
		_ = strategy.CleanUp(ctx, key, func(ctx context.Context) error { return l.s.Release(ctx, key, value) })
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func notObtained(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrNotObtained, cmp.Or(context.Cause(ctx), context.DeadlineExceeded))
}

// Lock is a held lock, returned by [Locker.Obtain]. Its methods are safe for
// concurrent use; Refresh, Release and TTL run one at a time. A nil *Lock is
// never held: its methods return ErrNotHeld.
//
// Besides refreshing and releasing it by hand, a holder can have it
// refreshed in the background ([Lock.StartRefresh]) and learn that it is
// lost ([Lock.Done], [Lock.Err], [Lock.Context]); [Do] does both around a
// function.
type Lock struct {
	s             strategy.Strategy
	key, metadata string

	hooks     hookList
	obtained  time.Time
	fence     int64     // 0: none
	fraction  float64   // the auto-refresh interval, as a fraction of the TTL
	holdUntil time.Time // WithMaxHold's limit; zero: none

	// ops serializes Refresh, Release and TTL: a refresh can replace the
	// value (setnx-getset stores timestamps), so no operation may use the
	// value while a refresh is on its way. mu guards the fields below.
	ops           sync.Mutex
	mu            sync.Mutex
	token         string
	value         string
	unsure        string        // a value a refresh whose reply was lost may have written; "": none
	ttl           time.Duration // asked for by the last Obtain or Refresh
	sent          time.Time     // when the last successful Obtain or Refresh was sent
	validUntil    time.Time
	released      bool
	refreshesLeft int  // -1: no limit
	limited       bool // a limit refused or shortened a refresh

	// Why the lock ended (errReleased, or a loss matching ErrNotHeld; nil
	// while it is held), and what watches it, made on demand (see watch).
	cause     error
	lost      context.Context // cancelled with cause
	lose      context.CancelCauseFunc
	deadline  *time.Timer // ends the lock when validUntil passes
	refresher *refresher
}

// Key returns the locked key.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the secret that proves ownership of the lock: the random
// token, or the strategy's own value where it stores one (a legacy
// timestamp, which Refresh replaces). Keep it out of logs: formatting a Lock
// (with any verb) or logging it with log/slog shows the key only.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token
}

// Metadata returns the metadata the lock was obtained with (see
// [WithMetadata]).
func (l *Lock) Metadata() string {
	if l == nil {
		return ""
	}
	return l.metadata
}

// ValidUntil returns the local validity deadline: the time when the lock was
// requested (or last refreshed) plus the TTL, less the strategy's drift
// allowance. It carries a monotonic clock reading, so time.Until on it is
// immune to wall-clock jumps. Work that must not outlive the lock should end
// before it; on a watched lock, Done is closed when it passes. After
// Release, or once the lock was found gone or lapsed, it returns the zero
// time.
func (l *Lock) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// TTL returns the remaining time to live of the lock as Redis sees it.
// It returns an error matching ErrNotHeld when the lock is no longer ours.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, ErrNotHeld
	}
	l.ops.Lock()
	defer l.ops.Unlock()
	var ttl time.Duration
	err := l.call(ctx, "ttl", 0, func(ctx context.Context, value string) (err error) {
		ttl, err = l.s.TTL(ctx, l.key, value)
		return err
	})
	if err != nil {
		return 0, l.fail("ttl", err)
	}
	return ttl, nil
}

// Refresh resets the lock's expiry to ttl from now, and moves ValidUntil
// accordingly. It returns an error matching ErrNotHeld (ErrExpired or
// ErrTaken where the strategy can tell) when the lock is no longer ours, and
// ErrRefreshLimit once the refreshes allowed by [WithMaxRefreshes] are
// spent. Under [WithMaxHold] it shortens ttl to end at the limit, and
// returns ErrRefreshLimit once the limit is reached. A lock that lapsed
// (ErrLapsed) is never refreshed, since the refresh could revive a lock its
// holder was told it lost: Refresh returns [Lock.Err].
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	if l == nil {
		return ErrNotHeld
	}
	l.ops.Lock()
	defer l.ops.Unlock()
	if _, err := l.current(); err != nil {
		return err
	}
	lease, err := l.spendRefresh(ttl)
	if err != nil {
		return err
	}
	sent := time.Now()
	var g strategy.Grant
	err = l.call(ctx, "refresh", lease, func(ctx context.Context, value string) (err error) {
		g, err = l.s.Refresh(ctx, l.key, value, lease)
		return err
	})
	if err != nil && g.Value != "" && !errors.Is(err, ErrNotHeld) {
		l.mu.Lock()
		l.unsure = g.Value // the reply was lost: the write may have landed
		l.mu.Unlock()
	}
	if err != nil {
		return l.fail("refresh", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cause != nil {
		return l.cause // released or lost while the refresh was on its way
	}
	l.ttl = ttl
	l.grant(g, sent, lease)
	return nil
}

// Release releases the lock. It returns an error matching ErrNotHeld
// (ErrExpired or ErrTaken where the strategy can tell) when the lock was no
// longer ours; it never deletes another owner's lock. It first stops
// auto-refresh and waits for the refresher to exit, so no refresh follows
// it, and it closes Done.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	l.StopRefresh() // first: a refresh on its way can replace the value
	l.ops.Lock()
	defer l.ops.Unlock()
	err := l.call(ctx, "release", 0, func(ctx context.Context, value string) error { return l.s.Release(ctx, l.key, value) })
	if err != nil {
		return l.fail("release", err)
	}
	l.mu.Lock()
	l.released = true
	l.endLocked(errReleased)
	return nil
}

// call runs fn, through the Op hooks, with the value the lock is held under.
// l.ops must be held. An answer with that value settles any value a refresh
// whose reply was lost may have written (l.unsure). When the answer is
// ErrTaken and there is such a value, the held value is gone for good and
// the unsure one is the lock's only chance: call adopts it and runs fn once
// more with it.
func (l *Lock) call(ctx context.Context, op string, ttl time.Duration, fn func(ctx context.Context, value string) error) error {
	value, err := l.current()
	if err != nil {
		return err
	}
	err = l.op(ctx, op, ttl, func(ctx context.Context) error { return fn(ctx, value) })
	l.mu.Lock()
	unsure := l.unsure
	switch {
	case unsure != "" && errors.Is(err, ErrTaken):
		l.value, l.token, l.unsure = unsure, unsure, ""
	case err == nil || errors.Is(err, ErrNotHeld):
		l.unsure, unsure = "", ""
	default:
		unsure = "" // no answer: nothing settled
	}
	l.mu.Unlock()
	if unsure == "" {
		return err
	}
	return l.op(ctx, op, ttl, func(ctx context.Context) error { return fn(ctx, unsure) })
}

// op runs call through the Op hooks.
func (l *Lock) op(ctx context.Context, op string, ttl time.Duration, call func(context.Context) error) error {
	if len(l.hooks) == 0 {
		return call(ctx)
	}
	e := l.hooks.event(l.s, op, l.key)
	e.TTL, e.Lock = ttl, l
	return l.hooks.wrap(ctx, l.s, e, opHook, call)
}

// endLocked records, once, why the lock ended: errReleased, or a loss
// matching ErrNotHeld. It zeroes ValidUntil, stops the deadline timer, tells
// the refresher to stop (without waiting for it: it may be the caller),
// unlocks l.mu, which must be held, runs the Ended hooks, and then closes
// Done, so that whoever waits on it finds the hooks' work done.
func (l *Lock) endLocked(cause error) {
	first := l.cause == nil
	if first {
		l.cause, l.validUntil = cause, time.Time{}
		if l.deadline != nil {
			l.deadline.Stop()
		}
		if l.refresher != nil {
			l.refresher.cancel()
		}
	}
	l.mu.Unlock()
	if !first {
		return
	}
	if len(l.hooks) > 0 {
		e := l.hooks.event(l.s, "ended", l.key)
		e.Lock, e.Held = l, time.Since(l.obtained)
		if cause != errReleased {
			e.Err = cause
		}
		l.hooks.runEnded(e)
	}
	l.mu.Lock()
	lose := l.lose
	l.mu.Unlock()
	if lose != nil {
		lose(cause)
	}
}

// String describes the lock by its key; it never includes the token.
func (l *Lock) String() string {
	if l == nil {
		return "lock <nil>"
	}
	return fmt.Sprintf("lock %q", l.key)
}

// Format writes String for every verb, so that no verb (%v, %#v, %d, ...)
// prints the token.
func (l *Lock) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, l.String()) }

// LogValue makes log/slog record the key only, never the token.
func (l *Lock) LogValue() slog.Value {
	if l == nil {
		return slog.Value{}
	}
	return slog.GroupValue(slog.String("key", l.key))
}

// current returns the value the lock is held under, or ErrNotHeld.
func (l *Lock) current() (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return "", errReleased
	}
	return l.value, nil
}

// spendRefresh checks that the lock may be refreshed for ttl: it did not
// lapse, and the limits of WithMaxRefreshes and WithMaxHold allow it. It
// counts the refresh, and returns ttl shortened to end at WithMaxHold's
// limit.
func (l *Lock) spendRefresh(ttl time.Duration) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(l.cause, ErrLapsed) {
		return 0, l.cause
	}
	if l.refreshesLeft == 0 {
		l.limited = true
		return 0, ErrRefreshLimit
	}
	if !l.holdUntil.IsZero() {
		left := time.Until(l.holdUntil).Truncate(time.Millisecond)
		if left < time.Millisecond {
			l.limited = true
			return 0, errHoldLimit
		}
		if left < ttl {
			ttl, l.limited = left, true
		}
	}
	if l.refreshesLeft > 0 {
		l.refreshesLeft--
	}
	return ttl, nil
}

// grant records a successful Acquire or Refresh of ttl sent at sent, and
// moves the deadline timer. l.mu must be held, or l not yet shared.
func (l *Lock) grant(g strategy.Grant, sent time.Time, ttl time.Duration) {
	if g.Value != "" {
		l.value, l.token = g.Value, g.Value
	}
	l.sent = sent
	l.validUntil = sent.Add(ttl - g.Drift)
	if l.deadline != nil {
		l.deadline.Reset(time.Until(l.validUntil))
	}
}

// fail turns a strategy error into the error of op, and ends the lock when
// it is gone.
func (l *Lock) fail(op string, err error) error {
	if errors.Is(err, ErrNotHeld) {
		l.mu.Lock()
		l.endLocked(err)
		return err
	}
	return opError(op, l.key, err)
}
