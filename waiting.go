package lock

import (
	"context"
	"time"

	"github.com/locksmith-go/lock/internal/wait"
	"github.com/locksmith-go/lock/strategy"
)

// patienceSlack is added to a waiter's patience beyond three retry delays,
// so that a live waiter on a loaded machine is not taken for dead.
const patienceSlack = 50 * time.Millisecond

// waiter is the part of an Obtain that waits to try again: by notification
// when the strategy notifies, by the retry policy's timer alone otherwise.
type waiter struct {
	l        *locker
	key      string
	hs       hookList
	n        strategy.Notifier // nil: poll
	id       string            // the waiter's id in the queue and in messages
	listened bool              // Listen was called, after the first attempt failed
	listener strategy.Listener // nil until then, or when the strategy cannot deliver
	queued   bool              // an attempt queued the waiter: leave the queue when giving up
	expected bool              // a timer woke the waiter though a message was due: the holder's key would not have expired
}

// newWaiter returns the waiter of an Obtain of key.
func (l *locker) newWaiter(key string, o options) (*waiter, error) {
	w := &waiter{l: l, key: key, hs: o.hooks}
	if n, ok := l.s.(strategy.Notifier); ok && !o.poll {
		id, err := newToken()
		if err != nil {
			return nil, err
		}
		w.n, w.id = n, id
	}
	return w, nil
}

// ask sets r's Waiter and Patience for an attempt after which the caller
// waits delay, when again, and tries again.
func (w *waiter) ask(ctx context.Context, r *strategy.Request, delay time.Duration, again bool) {
	r.Waiter, r.Patience = "", 0
	if w.n == nil || !again {
		return
	}
	p := 3*delay + patienceSlack
	if dl, ok := ctx.Deadline(); ok {
		p = min(p, time.Until(dl))
	}
	r.Waiter, r.Patience = w.id, max(p, time.Millisecond)
}

// sleep waits, after an attempt that found the lock held (g), for a
// wake-up, or delay, or for ctx. It returns ctx's error when ctx ended the
// wait.
func (w *waiter) sleep(ctx context.Context, g strategy.Grant, delay time.Duration) error {
	if w.n == nil {
		return wait.Sleep(ctx, delay)
	}
	if g.Position > 0 && !w.queued {
		w.queued = true
		w.event(ctx, Event{Op: "enqueued", Rank: g.Position})
	}
	if !w.listened {
		w.listened, w.listener = true, w.n.Listen(w.key, w.id)
	}
	if w.listener == nil && !w.queued {
		return wait.Sleep(ctx, delay) // the strategy can neither wake nor queue it: it polls
	}
	// A queued waiter that the strategy cannot wake keeps its place, and
	// tries again on its timer alone.
	var wakes <-chan strategy.Wake
	if w.listener != nil {
		wakes = w.listener.Wakes()
	}
	// An expiry wakes no one: the head tries again when it is due.
	if g.Position == 1 && g.HolderTTL > 0 {
		delay = min(delay, g.HolderTTL+time.Millisecond)
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	reason := strategy.WakeTimer
	select {
	case reason = <-wakes:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	// A message was due if one could come, and the holder's key would
	// not have expired by the timer.
	w.expected = wakes != nil && reason == strategy.WakeTimer && g.HolderTTL > delay
	w.event(ctx, Event{Op: "woken", Reason: reason.String()})
	return nil
}

// obtained reports a lock obtained: if a timer woke the waiter though a
// message was due, the message was lost.
func (w *waiter) obtained(ctx context.Context) {
	if w.expected {
		w.event(ctx, Event{Op: "missed"})
	}
	w.close(ctx, false)
}

// close ends the wait; a waiter that gives up leaves the queue, in the
// background once ctx is done.
func (w *waiter) close(ctx context.Context, givingUp bool) {
	if w.listener != nil {
		w.listener.Close()
	}
	if givingUp && w.queued {
		n, key, id := w.n, w.key, w.id
		w.l.cleanUp(ctx, w.hs, key, func(ctx context.Context) error { return n.Leave(ctx, key, id) })
	}
}

// event runs the Wait hooks.
func (w *waiter) event(ctx context.Context, e Event) {
	if len(w.hs) == 0 {
		return
	}
	base := w.hs.event(w.l.s, e.Op, w.key)
	base.Rank, base.Reason = e.Rank, e.Reason
	w.hs.runWait(ctx, base)
}
