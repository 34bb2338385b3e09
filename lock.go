// Package lock is a framework for distributed locks on Redis.
//
// A [Locker] obtains locks. Each strategy package (strategy/single,
// strategy/setnx-getset, strategy/redlock) returns one, built over a driver
// (driver/goredis, driver/redigo or driver/rueidis), and so does the config
// package. Application code depends on [Locker] and [Lock] only, so the
// strategy can change without touching it:
//
//	locker, err := single.New(goredis.New(client)) // client: a *redis.Client
//	...
//	lk, err := locker.Obtain(ctx, "report:daily", 30*time.Second)
//	if err != nil {
//		return err // errors.Is(err, lock.ErrNotObtained): held by another owner
//	}
//	defer lk.Release(ctx)
//
// [Locker.Obtain] waits as its [RetryPolicy] says, and returns a [*Lock]
// to refresh and release; [Do] runs a function under a lock refreshed in
// the background, and cancels its context when the lock is lost;
// [Locker.Inspect] reads a lock without holding it. The errors are
// [ErrNotObtained], [ErrNotHeld] and its kinds, [ErrLost], [ErrNoAnswer]
// when Redis did not answer, and [*ArgumentError]. [Hooks] let
// instrumentation, such as package otel, see every step. A new strategy
// implements package strategy's interface, and [New] turns it into a
// Locker. docs/locking.md covers the handle, the options and the errors,
// and docs/safety.md holding a lock safely.
package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locksmith-go/lock/internal/background"
	"github.com/locksmith-go/lock/strategy"
)

// Lock is a held lock, returned by [Locker.Obtain]. Its methods are safe for
// concurrent use; Refresh, Release, TTL, SetMetadata and the guarded writes
// (Guard, GuardCommands) run one at a time.
// A nil *Lock is never held: its methods return ErrNotHeld. Those that take
// a ctx refuse a nil one with an [*ArgumentError] named "ctx". The Redis
// and transport errors of Refresh, Release, TTL and SetMetadata are
// wrapped with the operation's name ("metadata" for SetMetadata);
// when Redis did not answer, they match [ErrNoAnswer], and when the
// context ended, its error.
//
// Besides refreshing and releasing it by hand, a holder can have it
// refreshed in the background ([Lock.StartRefresh]) and learn that it is
// lost ([Lock.Done], [Lock.Err], [Lock.Context]); [Do] does both around a
// function.
type Lock struct {
	s    strategy.Strategy
	key  string
	many *many // a lock of several keys; nil for one key

	hooks     hookList
	obtained  time.Time
	fence     int64     // 0: none
	permit    int       // a semaphore's permit index + 1; 0: none
	fraction  float64   // the auto-refresh interval, as a fraction of the TTL
	holdUntil time.Time // WithMaxHold's limit; zero: none
	// bg counts the work that the lock's calls leave running in the
	// background: its Locker's, for Close.
	bg *background.Group

	// ops serializes Refresh, Release, TTL, SetMetadata and the guarded
	// writes: a refresh can
	// replace the value (setnx-getset stores timestamps), and SetMetadata
	// does, so no operation may use the value while another is on its way.
	// mu guards the fields below.
	ops           sync.Mutex
	mu            sync.Mutex
	token         string
	value         string
	metadata      string
	unsure        []lockValue   // values refreshes or relabels whose replies were lost may have written, oldest first
	ttl           time.Duration // asked for by the last Obtain or Refresh
	sent          time.Time     // when the last successful Obtain or Refresh was sent
	validUntil    time.Time
	released      bool
	refreshesLeft int   // -1: no limit
	limited       bool  // a limit refused or shortened a refresh
	refreshErr    error // the error of the last refresh, if it failed (see lapse)

	// Why the lock ended (errReleased, or a loss matching ErrNotHeld; nil
	// while it is held), and what watches it, made on demand (see watch).
	cause     error
	done      context.Context // cancelled with cause; its Done is Lock.Done
	closeDone context.CancelCauseFunc
	deadline  *time.Timer // ends the lock when validUntil passes, unless its batcher watches it (see armLocked)
	refresher *refresher
	batch     *batcher // refreshes it with others; nil: its own goroutine does
}

// Key returns the locked key: for a lock of several keys
// ([Locker.ObtainMany]), the first in their order (see [Lock.Keys]).
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// many is what a lock of several keys ([Locker.ObtainMany]) has beyond one
// key: kept apart, so that a Lock of one key stays small.
type many struct {
	keys   []string // sorted; Lock.key is the first
	fences []int64  // the fencing tokens, one per key, with WithFencing
}

// Keys returns the locked keys, sorted: one, or those of
// [Locker.ObtainMany].
func (l *Lock) Keys() []string {
	switch {
	case l == nil:
		return nil
	case l.many == nil:
		return []string{l.key}
	}
	return slices.Clone(l.many.keys)
}

// name names the lock in errors: its key quoted, or its keys.
func (l *Lock) name() string {
	if l.many == nil {
		return strconv.Quote(l.key)
	}
	return fmt.Sprintf("%q", l.many.keys)
}

// keyCount returns how many keys a lock of several keys has, and 0 for a
// lock of one key, as Event.Keys counts them.
func (l *Lock) keyCount() int {
	if l.many == nil {
		return 0
	}
	return len(l.many.keys)
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
// [WithMetadata]), or last given to [Lock.SetMetadata].
func (l *Lock) Metadata() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.metadata
}

// SetMetadata replaces the lock's metadata ([WithMetadata]) with metadata,
// in one step on the server, if the key still holds the lock's value: the
// value keeps its token and stamp, and gets metadata after them. Then
// Metadata and [Locker.Inspect] return it, the token and fence stay, and
// later calls (Refresh, Release, auto-refresh) use the new value. A lock
// obtained [WithToken], to be handed over by obtaining it again with the
// same token and metadata, must be obtained with the new metadata then.
//
// Like a Refresh with a ttl of 0, it resets the key's expiry to the lock's
// TTL and moves ValidUntil, and WithMaxHold shortens it to end at the
// limit, or refuses it with ErrRefreshLimit once the limit is reached. But
// it spends none of the refreshes that [WithMaxRefreshes] allows, which
// cap the renewals the holder asks for, not its relabels: it goes on once
// they are spent. A lock that lapsed (ErrLapsed) is refused with
// [Lock.Err], as Refresh refuses it.
//
// It returns an error matching ErrNotHeld (ErrExpired, or ErrTaken) when
// the key no longer holds the lock's value, and the lock ends, as with
// Refresh. Metadata that starts with the byte 0x1e gives an
// [*ArgumentError] named "metadata"; a strategy that cannot replace a
// value ([strategy.Relabeler]: single can, setnx-getset and redlock
// cannot), a lock of several keys ([Locker.ObtainMany]) and a shared lock
// ([WithPermits], [WithRead], [WithWrite]) give one named "lock" that
// matches errors.ErrUnsupported. Neither sends anything. It runs through
// the Op hooks, as e.Op "metadata".
func (l *Lock) SetMetadata(ctx context.Context, metadata string) error {
	if err := cmp.Or(checkContext(ctx), checkMetadata(metadata)); err != nil {
		return err
	}
	if l == nil {
		return ErrNotHeld
	}
	rl, err := l.relabeler()
	if err != nil {
		return err
	}
	l.ops.Lock()
	defer l.ops.Unlock()
	if _, err := l.current(); err != nil {
		return err
	}
	l.mu.Lock()
	ttl, token, value, old := l.ttl, l.token, l.value, l.metadata
	l.mu.Unlock()
	if !strings.HasPrefix(value, token) || !strings.HasSuffix(value[len(token):], old) {
		name, _ := describe(l.s)
		return &ArgumentError{Name: "lock", Reason: "SetMetadata is not supported by " + name + ": its value is not the token, a stamp and the metadata", Err: errors.ErrUnsupported}
	}
	lease, err := l.spendRefresh(ttl, false)
	if err != nil {
		return err
	}
	// The token and stamp, which relabels keep: the values that lost
	// replies may have written (l.unsure, which call may adopt) have them
	// too.
	next := value[:len(value)-len(old)] + metadata
	w := lockValue{next, token, metadata}
	sent := time.Now()
	var g strategy.Grant
	returned := false
	defer func() {
		if !returned { // a hook panicked, maybe after the relabel landed
			l.mayHold(w)
		}
	}()
	err = l.call(ctx, "metadata", lease, func(ctx context.Context, l *Lock, value string) (err error) {
		g, err = rl.Relabel(ctx, l.key, value, next, lease)
		return err
	})
	returned = true
	return l.endRefresh(ctx, "metadata", g, err, sent, ttl, lease, w)
}

// relabeler returns the lock's strategy as a strategy.Relabeler, or why
// SetMetadata cannot relabel the lock.
func (l *Lock) relabeler() (strategy.Relabeler, error) {
	rl, ok := l.s.(strategy.Relabeler)
	_, shared := l.s.(strategy.SharedStrategy)
	var reason string
	switch {
	case shared:
		reason = "SetMetadata needs a lock that one holder holds alone, not a semaphore or a read-write lock"
	case l.many != nil:
		reason = "SetMetadata needs a lock of one key, not one of several (Locker.ObtainMany)"
	case !ok:
		name, _ := describe(l.s)
		reason = "SetMetadata is not supported by " + name + ": it cannot replace a held value (strategy.Relabeler)"
	default:
		return rl, nil
	}
	return nil, &ArgumentError{Name: "lock", Reason: reason, Err: errors.ErrUnsupported}
}

// Fence returns the lock's fencing token and true when it was obtained with
// [WithFencing]: a number that is larger for every new holder of the key,
// across releases, expiries and crashed holders. Pass it to the resource the
// lock protects, which must remember the largest token it has seen and
// reject requests carrying a smaller one: then a holder that lost its lock
// without knowing it (a pause, a slow network) cannot overwrite the work of
// the next holder. Unlike Token, it is not a secret. A lock of several keys
// has a token per key ([Lock.FenceOf]); Fence returns its first key's.
func (l *Lock) Fence() (int64, bool) {
	if l == nil || l.fence == 0 {
		return 0, false
	}
	return l.fence, true
}

// FenceOf returns the fencing token of key, one of the lock's keys, and
// true when the lock was obtained with [WithFencing]: each key of a lock of
// several keys has its own counter, so that the guard of each resource
// checks its own (see [Lock.Fence]).
func (l *Lock) FenceOf(key string) (int64, bool) {
	switch {
	case l == nil || l.fence == 0:
		return 0, false
	case l.many == nil && key == l.key:
		return l.fence, true
	case l.many == nil:
		return 0, false
	}
	i, ok := slices.BinarySearch(l.many.keys, key)
	if !ok {
		return 0, false
	}
	return l.many.fences[i], true
}

// Permit returns the index of the semaphore permit that the lock holds,
// from 0 to n-1 for a semaphore of n permits ([WithPermits]): the lowest
// that was free when it was obtained. False for any other lock.
func (l *Lock) Permit() (int, bool) {
	if l == nil || l.permit == 0 {
		return 0, false
	}
	return l.permit - 1, true
}

// Downgrade turns the write side of a read-write lock ([WithWrite]) into a
// read side, in one step: no other writer can come between, and readers
// waiting behind it may enter at once. The lock keeps its token, lease,
// fence and auto-refresh; Refresh, Release and TTL go on as before. A lock
// that is not a write lock gives an [*ArgumentError] named "lock", and one
// no longer held an error matching ErrNotHeld. Upgrading a reader is not
// offered: two readers that both waited to upgrade would wait for each
// other forever; release the read lock and obtain the write lock.
func (l *Lock) Downgrade(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if l == nil {
		return ErrNotHeld
	}
	d, ok := l.s.(strategy.Downgrader)
	if !ok {
		return &ArgumentError{Name: "lock", Reason: "Downgrade needs the write side of a read-write lock (WithWrite)"}
	}
	l.ops.Lock()
	defer l.ops.Unlock()
	err := l.call(ctx, "downgrade", 0, func(ctx context.Context, l *Lock, value string) error {
		return d.Downgrade(ctx, l.key, value)
	})
	if err != nil {
		return l.fail(ctx, "downgrade", err)
	}
	return nil
}

// ValidUntil returns the local validity deadline: the time when the lock was
// requested (or last refreshed) plus the TTL, less the strategy's drift
// allowance (and, after a refresh in a batch, less an allowance for
// signalling the batch's lapses, which come together: 20 ms and 50 µs a
// lock). It carries a monotonic clock reading, so time.Until on it is
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
	if err := checkContext(ctx); err != nil {
		return 0, err
	}
	if l == nil {
		return 0, ErrNotHeld
	}
	l.ops.Lock()
	defer l.ops.Unlock()
	var ttl time.Duration
	err := l.call(ctx, "ttl", 0, func(ctx context.Context, l *Lock, value string) (err error) {
		if l.many != nil {
			ttl, err = l.s.(strategy.Multi).TTLKeys(ctx, l.many.keys, value)
		} else {
			ttl, err = l.s.TTL(ctx, l.key, value)
		}
		return err
	})
	if err != nil {
		return 0, l.fail(ctx, "ttl", err)
	}
	return ttl, nil
}

// Refresh resets the lock's expiry to ttl from now, and moves ValidUntil
// accordingly. A ttl of 0 is the TTL the lock was obtained, or last
// refreshed, with (the one auto-refresh renews). It returns an error
// matching ErrNotHeld (ErrExpired or ErrTaken where the strategy can tell)
// when the lock is no longer ours, and ErrRefreshLimit once the refreshes
// allowed by [WithMaxRefreshes] are spent. Under [WithMaxHold] it shortens ttl to end at the limit, and
// returns ErrRefreshLimit once the limit is reached. A lock that lapsed
// (ErrLapsed) is never refreshed, since the refresh could revive a lock its
// holder was told it lost: Refresh returns [Lock.Err].
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if ttl != 0 {
		if err := checkTTL(ttl); err != nil {
			return err
		}
	}
	if l == nil {
		return ErrNotHeld
	}
	l.ops.Lock()
	defer l.ops.Unlock()
	if _, err := l.current(); err != nil {
		return err
	}
	if ttl == 0 {
		l.mu.Lock()
		ttl = l.ttl
		l.mu.Unlock()
	}
	lease, err := l.spendRefresh(ttl, true)
	if err != nil {
		return err
	}
	sent := time.Now()
	var g strategy.Grant
	err = l.call(ctx, "refresh", lease, func(ctx context.Context, l *Lock, value string) (err error) {
		if l.many != nil {
			g, err = l.s.(strategy.Multi).RefreshKeys(ctx, l.many.keys, value, lease)
		} else {
			g, err = l.s.Refresh(ctx, l.key, value, lease)
		}
		return err
	})
	return l.endRefresh(ctx, "refresh", g, err, sent, ttl, lease, lockValue{})
}

// beginRefresh is what Refresh checks before a refresh by auto-refresh
// in a batch (see batcher), with l.ops held: the lock is held and did not
// lapse (it ends it if it did), and a refresh may be spent. It returns the
// TTL to renew, the lease to ask for, and ValidUntil.
func (l *Lock) beginRefresh() (ttl, lease time.Duration, until time.Time, err error) {
	if _, err := l.current(); err != nil {
		return 0, 0, time.Time{}, err
	}
	l.mu.Lock()
	ttl, until = l.ttl, l.validUntil
	l.mu.Unlock()
	if !time.Now().Before(until) {
		l.lapse() // too late to refresh: the timer may not have fired yet
		return 0, 0, time.Time{}, ErrLapsed
	}
	lease, err = l.spendRefresh(ttl, true)
	return ttl, lease, until, err
}

// endRefresh records the outcome of op, a refresh of ttl for lease
// ("refresh") or SetMetadata's relabel ("metadata"), that was sent at sent
// and returned g and err, and returns op's error. w is what a relabel
// writes in place of the held value; zero for a refresh, which reports
// in g.Value the value it writes, if it replaces it.
func (l *Lock) endRefresh(ctx context.Context, op string, g strategy.Grant, err error, sent time.Time, ttl, lease time.Duration, w lockValue) error {
	if err != nil && (g.Value != "" || w.value != "") && !errors.Is(err, ErrNotHeld) {
		l.mu.Lock()
		w = l.written(g, w)
		l.mu.Unlock()
		l.mayHold(w) // the reply was lost: the write may have landed
	}
	if err != nil {
		err = l.fail(ctx, op, err)
		l.mu.Lock()
		l.refreshErr = err
		l.mu.Unlock()
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cause != nil {
		return l.cause // released or lost while the refresh was on its way
	}
	l.ttl, l.refreshErr = ttl, nil
	if w = l.written(g, w); w.value != "" {
		l.value, l.token, l.metadata = w.value, w.token, w.metadata
	}
	g.Value = ""
	l.grant(g, sent, lease)
	return nil
}

// lockValue is a value the lock may be held under, with the token and
// metadata it has under it.
type lockValue struct{ value, token, metadata string }

// mayHold records that the key may hold w in place of the lock's value: a
// write whose reply was lost may have landed. Past maxUnsure, the oldest
// value is forgotten: should the key hold it, the lock is reported taken,
// and its key expires by itself.
func (l *Lock) mayHold(w lockValue) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unsure = append(l.unsure, w)
	if len(l.unsure) > maxUnsure {
		l.unsure = slices.Delete(l.unsure, 0, 1)
	}
}

// written returns what a refresh or relabel that returned g writes in
// place of the held value: w, for a relabel; for a refresh that replaces
// the value, the one it reports in g.Value, which is its token too, or,
// when that is one that a call whose reply was lost may have written (a
// batch of a Relabeler reports the one the key held), that one as it was
// written; and nothing for a refresh that keeps the value. l.mu must be
// held.
func (l *Lock) written(g strategy.Grant, w lockValue) lockValue {
	if w.value != "" || g.Value == "" {
		return w
	}
	if i := slices.IndexFunc(l.unsure, func(u lockValue) bool { return u.value == g.Value }); i >= 0 {
		return l.unsure[i]
	}
	return lockValue{g.Value, g.Value, l.metadata}
}

// unsureValues returns the values of l.unsure, oldest first, for a batch
// (strategy.Refresh's Unsure); nil when there are none. l.mu must be held.
func (l *Lock) unsureValues() []string {
	if len(l.unsure) == 0 {
		return nil
	}
	values := make([]string, len(l.unsure))
	for i, u := range l.unsure {
		values[i] = u.value
	}
	return values
}

// Release releases the lock. It returns an error matching ErrNotHeld
// (ErrExpired or ErrTaken where the strategy can tell) when the lock was no
// longer ours; it never deletes another owner's lock. It first stops
// auto-refresh and waits for the refresher to exit, so no refresh follows
// it, and it closes Done.
func (l *Lock) Release(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if l == nil {
		return ErrNotHeld
	}
	l.StopRefresh() // first: a refresh on its way can replace the value
	l.ops.Lock()
	defer l.ops.Unlock()
	err := l.call(ctx, "release", 0, releaseOp)
	if err != nil {
		return l.fail(ctx, "release", err)
	}
	l.mu.Lock()
	l.released = true
	l.endLocked(errReleased)
	return nil
}

// releaseOp is Release's operation: a function that captures nothing, so that
// an unhooked Release allocates no closure.
func releaseOp(ctx context.Context, l *Lock, value string) error {
	if l.many != nil {
		return l.s.(strategy.Multi).ReleaseKeys(ctx, l.many.keys, value)
	}
	return l.s.Release(ctx, l.key, value)
}

// abandon releases a lock that Obtain obtained but that a panicking Obtain
// hook kept from its caller: it deletes the lock's value in the
// background, without the hooks, and ends the lock as released, which the
// Ended hooks report.
func (l *Lock) abandon(ctx context.Context) {
	l.mu.Lock()
	value := l.value
	l.released = true
	discard(l.bg, ctx, l.key, true, func(ctx context.Context) error { return releaseOp(ctx, l, value) })
	l.endLocked(errReleased)
}

// call runs fn, through the Op hooks, with the value the lock is held under.
// l.ops must be held. An answer with that value settles the values that
// refreshes or relabels whose replies were lost may have written
// (l.unsure). When the answer is ErrTaken and there are such values, the
// held value is gone for good and they are the lock's only chance: call
// adopts the newest (its value, token and metadata) and runs fn once more
// with it, and so on while the answer is ErrTaken.
func (l *Lock) call(ctx context.Context, op string, ttl time.Duration, fn func(ctx context.Context, l *Lock, value string) error) error {
	value, err := l.current()
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return notSent(ctx, op, l.key)
	}
	for {
		err = l.op(ctx, op, ttl, value, fn)
		// An error's Is method is a strategy's code: call it before taking l.mu.
		taken, answered := errors.Is(err, ErrTaken), err == nil || errors.Is(err, ErrNotHeld)
		l.mu.Lock()
		last := len(l.unsure) - 1
		switch {
		case taken && last >= 0:
			u := l.unsure[last]
			value = u.value
			l.value, l.token, l.metadata, l.unsure = u.value, u.token, u.metadata, l.unsure[:last]
		case answered:
			l.unsure = nil
			fallthrough
		default: // no answer: nothing settled
			l.mu.Unlock()
			return err
		}
		l.mu.Unlock()
	}
}

// maxUnsure bounds Lock.unsure: the lost replies a lock remembers.
const maxUnsure = 8

// op runs fn with value through the Op hooks.
func (l *Lock) op(ctx context.Context, op string, ttl time.Duration, value string, fn func(ctx context.Context, l *Lock, value string) error) error {
	if len(l.hooks) == 0 {
		return fn(ctx, l, value) // no closure: an unhooked call allocates nothing here
	}
	e := l.hooks.event(l.s, op, l.key)
	e.TTL, e.Lock, e.Keys = ttl, l, l.keyCount()
	return l.hooks.wrap(ctx, l.s, e, opHook, func(ctx context.Context) error { return fn(ctx, l, value) })
}

// endLocked ends the lock: released (errReleased), or lost (an error
// matching ErrNotHeld), which the Ended hooks report. It records, once,
// why the lock ended. It zeroes ValidUntil, stops the deadline timer, tells
// the refresher to stop (without waiting for it: it may be the caller),
// unlocks l.mu, which must be held, runs the Ended hooks, and then closes
// Done, so that whoever waits on it finds the hooks' work done: even when
// an Ended hook panics.
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
	defer l.closeDoneWith(cause)
	if len(l.hooks) > 0 {
		e := l.hooks.event(l.s, "ended", l.key)
		e.Keys = l.keyCount()
		e.Lock, e.Held = l, time.Since(l.obtained)
		if cause != errReleased {
			e.Err = cause
		}
		l.hooks.runEnded(e)
	}
}

// closeDoneWith closes Done, if it was made, with cause.
func (l *Lock) closeDoneWith(cause error) {
	l.mu.Lock()
	closeDone := l.closeDone
	l.mu.Unlock()
	if closeDone != nil {
		closeDone(cause)
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
// lapse, and the limits of WithMaxRefreshes (when spend is set) and
// WithMaxHold allow it. It counts the refresh, when spend is set, and
// returns ttl shortened to end at WithMaxHold's limit. SetMetadata, which
// renews the lease too, spends no refresh.
func (l *Lock) spendRefresh(ttl time.Duration, spend bool) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(l.cause, ErrLapsed) {
		return 0, l.cause
	}
	if spend && l.refreshesLeft == 0 {
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
	if spend && l.refreshesLeft > 0 {
		l.refreshesLeft--
	}
	return ttl, nil
}

// grant records a successful Acquire, Refresh or SetMetadata of ttl sent
// at sent, and moves the deadline timer. l.mu must be held, or l not yet
// shared.
func (l *Lock) grant(g strategy.Grant, sent time.Time, ttl time.Duration) {
	if g.Value != "" {
		l.value, l.token = g.Value, g.Value
	}
	l.sent = sent
	l.validUntil = sent.Add(ttl - g.Drift)
	l.armLocked()
}

// fail turns a strategy error into the error of op on ctx, and ends the
// lock when it is gone.
func (l *Lock) fail(ctx context.Context, op string, err error) error {
	if errors.Is(err, ErrNotHeld) {
		l.mu.Lock()
		l.endLocked(err)
		return err
	}
	return opError(ctx, op, l.key, err)
}
