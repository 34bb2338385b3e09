package elect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locksmith-go/lock"
)

// Term is one term of leadership, held from Campaign until it ends: it is
// resigned, its lease is found gone or taken, or it comes within the stop
// grace of its end before a refresh confirmed it. Its methods are safe for
// concurrent use.
type Term struct {
	e       *Elector
	lk      *lock.Lock
	w       *watcher
	number  int64
	elected time.Time
	ctx     context.Context // cancelled, with the term's error as cause, when it ends
	cancel  context.CancelCauseFunc

	mu       sync.Mutex
	identity string
	err      error     // why it ended; nil while held
	deadline time.Time // when it ended: the end of its lease as it counted it
	overrun  time.Duration
	reported bool // the Ended hooks ran
	leading  bool // Run's lead runs in it
}

func newTerm(e *Elector, lk *lock.Lock, w *watcher, elected time.Time) *Term {
	n, _ := lk.Fence()
	t := &Term{e: e, lk: lk, w: w, number: n, elected: elected, identity: e.identity}
	t.ctx, t.cancel = context.WithCancelCause(context.Background())
	w.term.Store(t)
	return t
}

// Number returns the term's number: its fencing token, larger than every
// term's before it on this key, across resignations, expiries, crashed
// leaders, a broken or deleted key, and a deleted counter (which restarts
// from the server's clock, in microseconds). Pass it to the resources the
// leader writes, which must refuse a number smaller than one they saw.
func (t *Term) Number() int64 { return t.number }

// Identity returns the identity the term was elected with, or last
// proclaimed.
func (t *Term) Identity() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.identity
}

// Elected returns when the term was elected, by this process's clock.
func (t *Term) Elected() time.Time { return t.elected }

// ValidUntil returns when the term's lease could pass to another
// candidate, by this process's monotonic clock: the lock's validity
// deadline (lock.Lock.ValidUntil), which each refresh moves. The term
// ends a stop grace before it unless a refresh moved it. It is the zero
// time once the term ended.
func (t *Term) ValidUntil() time.Time {
	if t.Err() != nil {
		return time.Time{}
	}
	return t.lk.ValidUntil()
}

// Done returns a channel that is closed when the term ends; Err then says
// why.
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Err returns nil while the term is held, and afterwards an error matching
// ErrNotLeader and why it ended: ErrResigned, ErrStepDown (with the last
// refresh's error), or the lock's loss (lock.ErrExpired, lock.ErrTaken,
// lock.ErrBroken).
//
// It reads the clock: a term whose lease came within the stop grace of its
// end ends then, even before its timer fired (after a pause of the
// process, say).
func (t *Term) Err() error {
	t.mu.Lock()
	err := t.err
	t.mu.Unlock()
	if err == nil && t.check() {
		return t.Err()
	}
	return err
}

// check ends the term if its lock is lost, or its lease within the stop
// grace of its end, and reports whether it did.
func (t *Term) check() bool {
	_, ended := t.left()
	return ended
}

// left ends the term if its lock is lost, or its lease within the stop
// grace of its end, and reports whether it did; otherwise it returns how
// long until the stop grace begins.
func (t *Term) left() (time.Duration, bool) {
	vu := t.lk.ValidUntil()
	if vu.IsZero() { // lost, or released
		switch err := t.lk.Err(); {
		case t.w.released.Load():
			t.end(ErrResigned)
		case errors.Is(err, lock.ErrLapsed):
			// Its deadline passed before the stop grace's timer fired (the
			// process was paused, say): a step down all the same.
			t.end(stepDown(t.w.lastRefresh()))
		default:
			t.end(cmp.Or(err, lock.ErrNotHeld))
		}
		return 0, true
	}
	left := time.Until(vu) - t.e.grace
	if left <= 0 {
		t.end(stepDown(t.w.lastRefresh()))
		return 0, true
	}
	return left, false
}

// Context returns a copy of parent that is also cancelled when the term
// ends, with its error as the cause (context.Cause). Call cancel when the
// work it governs is done.
func (t *Term) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(parent)
	stop := context.AfterFunc(t.ctx, func() { cancelCause(context.Cause(t.ctx)) })
	return ctx, func() { stop(); cancelCause(context.Canceled) }
}

// Proclaim replaces the identity that the term's key carries, for the same
// term: what [Elector.Leader] and observers read next. It also refreshes
// the lease. A term that ended writes nothing, and gets its error
// (matching ErrNotLeader); so does one whose key another holds now.
func (t *Term) Proclaim(ctx context.Context, identity string) error {
	if err := t.Err(); err != nil {
		return err
	}
	err := t.lk.SetMetadata(ctx, identity)
	if errors.Is(err, lock.ErrNotHeld) {
		t.end(err)
		return t.Err()
	}
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.identity = identity
	t.mu.Unlock()
	return nil
}

// Guard runs script on the election's server, atomically, only while the
// term's key still holds this term's lease, as lock.Lock.Guard does: a
// leader that was paused past its lease writes nothing, whatever its
// successor has done since. A term that ended, or is within the stop grace
// of its lease's end, is refused with its error (matching ErrNotLeader)
// before anything is sent, as is one whose key another holds now, which
// ends the term. keys must be in the election key's Cluster hash slot
// (give them its hash tag). This is the leader transaction of TiKV's
// Placement Driver, and etcd's Txn().If(leader key is ours), for Redis.
func (t *Term) Guard(ctx context.Context, script string, keys []string, args ...any) (any, error) {
	if err := t.Err(); err != nil {
		return nil, err
	}
	reply, err := t.lk.Guard(ctx, script, keys, args...)
	return reply, t.guarded(err)
}

// GuardCommands runs cmds in a transaction on the election's server only
// while the term's key holds this term's lease, as
// lock.Lock.GuardCommands does, for servers that refuse scripts; it
// refuses what [Term.Guard] refuses.
func (t *Term) GuardCommands(ctx context.Context, keys []string, cmds ...[]any) ([]any, error) {
	if err := t.Err(); err != nil {
		return nil, err
	}
	replies, err := t.lk.GuardCommands(ctx, keys, cmds...)
	return replies, t.guarded(err)
}

// guarded returns the error of a guarded write that failed with err: the
// term's error, once it ended it, when err says the lease is gone.
func (t *Term) guarded(err error) error {
	if errors.Is(err, lock.ErrNotHeld) {
		t.end(err)
		return t.Err()
	}
	return err
}

// Resign ends the term and deletes its key, if it still holds the term's
// lease (a compare-and-delete, which never deletes a successor's), which
// wakes the next candidate at once. It returns nil once the key is
// deleted or found gone, including on a second call, and an error when
// Redis did not answer or failed: the term has ended all the same, and
// Resign can be called again to delete the key, which otherwise expires at
// the end of the lease.
func (t *Term) Resign(ctx context.Context) error {
	if ctx == nil {
		return &lock.ArgumentError{Name: "ctx", Reason: "must not be nil"}
	}
	t.end(ErrResigned)
	if t.w.released.Load() {
		return nil
	}
	err := t.lk.Release(ctx)
	if err == nil || errors.Is(err, lock.ErrNotHeld) {
		return nil
	}
	return err
}

// watch ends the term when its lock is lost, or when its lease comes
// within the stop grace of its end without a refresh moving it.
func (t *Term) watch() {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.lk.Done():
		case <-timer.C:
		}
		left, ended := t.left()
		if ended {
			return
		}
		timer.Reset(left)
	}
}

// stepDown is the error of a term that stepped down after the refresh
// error err, if any.
func stepDown(err error) error {
	if err == nil {
		return ErrStepDown
	}
	return fmt.Errorf("%w; the last refresh failed: %w", ErrStepDown, err)
}

// end ends the term with cause, the first time: it stops the refreshes,
// cancels its context and runs the Ended hooks, unless Run's lead runs, in
// which case they wait for it to return (see returned).
func (t *Term) end(cause error) {
	if !errors.Is(cause, ErrNotLeader) {
		cause = fmt.Errorf("%w: %w", ErrNotLeader, cause)
	}
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return
	}
	t.err = cause
	t.deadline = time.Now()
	if vu := t.lk.ValidUntil(); vu.After(t.deadline) {
		t.deadline = vu
	}
	report := !t.leading
	t.mu.Unlock()
	t.e.ended(t)
	t.cancel(cause)
	// One loss signal: the refreshes stop with it. StopRefresh waits for
	// a refresh on its way (a paused server's), which neither the signal
	// nor the caller (IsLeader, say) may wait for.
	go t.lk.StopRefresh()
	if report {
		t.report()
	}
}

// lead marks that Run's lead runs in the term.
func (t *Term) lead() {
	t.mu.Lock()
	t.leading = true
	t.mu.Unlock()
}

// returned records that Run's lead returned: past the end of the lease,
// if the term ended before, it overran by the difference.
func (t *Term) returned() {
	now := time.Now()
	t.mu.Lock()
	t.leading = false
	ended := t.err != nil
	if ended && now.After(t.deadline) {
		t.overrun = now.Sub(t.deadline)
	}
	t.mu.Unlock()
	if ended {
		t.report()
	}
}

// report runs the Ended hooks, once.
func (t *Term) report() {
	t.mu.Lock()
	if t.reported {
		t.mu.Unlock()
		return
	}
	t.reported = true
	err, overrun := t.err, t.overrun
	t.mu.Unlock()
	t.e.hookList().ended(t, err, overrun)
}

// String describes the term by its key and number.
func (t *Term) String() string { return fmt.Sprintf("term %d of %q", t.number, t.e.key) }
