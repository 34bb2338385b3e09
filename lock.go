// Package lock is a framework for distributed locks on Redis.
//
// A [Locker] obtains locks; each strategy package (strategy/single,
// strategy/setnx-getset, strategy/redlock) returns one, built over a driver
// (driver/goredis or driver/redigo). Application code depends on [Locker] and
// [Lock] only, so the strategy can change without touching it.
//
// The root package owns everything the strategies share: the wait loop and
// its [RetryPolicy], token generation, argument validation, the local
// validity deadline and the error taxonomy ([ErrNotObtained], [ErrNotHeld],
// [ErrInvalidArgument]). A strategy implements [Strategy] (one attempt, and
// the operations on a held lock) and hands it to [New].
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
}

// Strategy is a lock algorithm: the part of a [Locker] that talks to Redis.
// Application code uses a [Locker]; strategy authors implement Strategy and
// turn it into a Locker with [New], which supplies validation, tokens, the
// wait loop and the lock handle. Check a Strategy with the conformance
// package.
//
// The root package guarantees that keys are non-empty, TTLs are at least one
// millisecond and values are non-empty. Implementations must be safe for
// concurrent use.
//
// Refresh, Release and TTL return ErrExpired when the key is gone, and
// ErrTaken when another value holds it (both match ErrNotHeld); a strategy
// that cannot tell the two apart returns ErrNotHeld.
type Strategy interface {
	// Acquire makes one attempt to lock r.Key. It returns an error
	// matching ErrNotObtained when another owner holds the key, and any
	// other error (a Redis or transport error, unwrapped) when the attempt
	// failed. After an error, [New]'s loop calls Release with the value the
	// attempt may have written (Grant.Value if set, else r.Value()), so an
	// attempt whose reply was lost leaves nothing behind. Every attempt gets
	// a fresh random token, unless the caller chose one.
	Acquire(ctx context.Context, r Request) (Grant, error)
	// Refresh resets the expiry of key to ttl if it still holds value.
	Refresh(ctx context.Context, key, value string, ttl time.Duration) (Grant, error)
	// Release deletes key if it still holds value.
	Release(ctx context.Context, key, value string) error
	// TTL returns the remaining time to live of key if it still holds value.
	TTL(ctx context.Context, key, value string) (time.Duration, error)
}

// Request is what [Strategy.Acquire] is asked to lock.
type Request struct {
	Key      string
	TTL      time.Duration
	Token    string // random, or chosen with WithToken; at least MinTokenLen bytes
	Metadata string // from WithMetadata; often empty

	// CallerToken reports that Token was chosen with WithToken. A strategy
	// that cannot honour a chosen token refuses it.
	CallerToken bool
}

// Value returns the value a strategy that stores tokens writes: the token
// followed by the metadata.
func (r Request) Value() string { return r.Token + r.Metadata }

// Grant is what a [Strategy] reports about a successful Acquire or Refresh.
type Grant struct {
	// Value, when not empty, replaces the value the lock is held under and
	// becomes its token: a strategy that stores something other than the
	// token, such as a legacy timestamp, reports it here. Later calls
	// receive this value.
	Value string
	// Drift is subtracted from the TTL when the local validity deadline is
	// computed: an allowance for clock drift between client and servers.
	Drift time.Duration
	// Clean, returned with an error by Acquire, says that the attempt has
	// already undone whatever it may have written, so the loop skips its
	// own clean-up.
	Clean bool
}

// New returns the [Locker] for a [Strategy]. The defaults apply to every
// Obtain, before the options of the call.
func New(s Strategy, defaults ...Option) Locker {
	return &locker{s: s, defaults: defaults}
}

type locker struct {
	s        Strategy
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
	r := Request{Key: key, TTL: ttl, Token: o.token, Metadata: o.metadata, CallerToken: o.token != ""}
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
		if err == nil {
			lk := &Lock{s: l.s, key: key, token: r.Token, metadata: r.Metadata, value: r.Value(),
				refreshesLeft: o.maxRefreshes, hooks: o.hooks, obtained: sent}
			lk.grant(g, sent, ttl)
			return lk, nil
		}
		if !errors.Is(err, ErrNotObtained) {
			// The command may have been applied even though its reply was
			// lost (a timeout, a cancelled context, a broken connection).
			if !g.Clean {
				cleanup(ctx, l.s, key, cmp.Or(g.Value, r.Value()))
			}
			if ended(ctx) {
				return nil, notObtained(ctx)
			}
			return nil, opError("obtain", key, err)
		}
		delay, ok := o.retry.Delay(attempt)
		if !ok {
			return nil, err
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, notObtained(ctx)
		}
	}
}

// attempt runs one Acquire, through the Attempt hooks.
func (l *locker) attempt(ctx context.Context, r Request, n int, hs hookList) (Grant, error) {
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
	s Strategy
	r Request
	g Grant
}

func (a *acquisition) run(ctx context.Context) (err error) {
	a.g, err = a.s.Acquire(ctx, a.r)
	return err
}

// ReleaseTimeout bounds the clean-up that [Locker.Obtain] runs, on a context
// detached from the caller's, after an attempt that may have been applied.
const ReleaseTimeout = time.Second

func cleanup(ctx context.Context, s Strategy, key, value string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	_ = s.Release(ctx, key, value) // best effort: the key expires anyway
}

// ended reports whether ctx is done or past its deadline: a driver can
// report its own timeout at the deadline a moment before ctx's timer fires.
func ended(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(dl)
}

func notObtained(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrNotObtained, cmp.Or(context.Cause(ctx), context.DeadlineExceeded))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Lock is a held lock, returned by [Locker.Obtain]. Its methods are safe for
// concurrent use. A nil *Lock is never held: its methods return ErrNotHeld.
type Lock struct {
	s             Strategy
	key, metadata string

	hooks    hookList
	obtained time.Time

	mu            sync.Mutex
	token         string
	value         string
	validUntil    time.Time
	released      bool
	ended         bool // the Ended hooks have run
	refreshesLeft int  // -1: no limit
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
// before it. After Release, or once Refresh, Release or TTL found the lock
// gone, it returns the zero time.
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
	value, err := l.current()
	if err != nil {
		return 0, err
	}
	var ttl time.Duration
	err = l.op(ctx, "ttl", 0, func(ctx context.Context) (err error) {
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
// ErrRefreshLimit once the refreshes allowed by [WithMaxRefreshes] are spent.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	value, err := l.current()
	if err != nil {
		return err
	}
	if err := l.spendRefresh(); err != nil {
		return err
	}
	sent := time.Now()
	var g Grant
	err = l.op(ctx, "refresh", ttl, func(ctx context.Context) (err error) {
		g, err = l.s.Refresh(ctx, l.key, value, ttl)
		return err
	})
	if err != nil {
		return l.fail("refresh", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.released {
		l.grant(g, sent, ttl)
	}
	return nil
}

// Release releases the lock. It returns an error matching ErrNotHeld
// (ErrExpired or ErrTaken where the strategy can tell) when the lock was no
// longer ours; it never deletes another owner's lock.
func (l *Lock) Release(ctx context.Context) error {
	value, err := l.current()
	if err != nil {
		return err
	}
	err = l.op(ctx, "release", 0, func(ctx context.Context) error { return l.s.Release(ctx, l.key, value) })
	if err != nil {
		return l.fail("release", err)
	}
	l.mu.Lock()
	l.released, l.validUntil = true, time.Time{}
	l.mu.Unlock()
	l.end(nil)
	return nil
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

// end runs the Ended hooks, once: the lock was released (cause nil) or
// found lost.
func (l *Lock) end(cause error) {
	if len(l.hooks) == 0 {
		return
	}
	l.mu.Lock()
	first := !l.ended
	l.ended = true
	l.mu.Unlock()
	if first {
		e := l.hooks.event(l.s, "ended", l.key)
		e.Lock, e.Err, e.Held = l, cause, time.Since(l.obtained)
		l.hooks.ended(e)
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
	if l == nil {
		return "", ErrNotHeld
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return "", errReleased
	}
	return l.value, nil
}

// spendRefresh counts a refresh against the limit of WithMaxRefreshes.
func (l *Lock) spendRefresh() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.refreshesLeft == 0:
		return ErrRefreshLimit
	case l.refreshesLeft > 0:
		l.refreshesLeft--
	}
	return nil
}

// grant records a successful Acquire or Refresh sent at sent. l.mu must be
// held, or l not yet shared.
func (l *Lock) grant(g Grant, sent time.Time, ttl time.Duration) {
	if g.Value != "" {
		l.value, l.token = g.Value, g.Value
	}
	l.validUntil = sent.Add(ttl - g.Drift)
}

// fail turns a strategy error into the error of op, and forgets the local
// validity when the lock is gone.
func (l *Lock) fail(op string, err error) error {
	if errors.Is(err, ErrNotHeld) {
		l.mu.Lock()
		l.validUntil = time.Time{}
		l.mu.Unlock()
		l.end(err)
		return err
	}
	return opError(op, l.key, err)
}
