package lock

import (
	"context"
	"errors"
	"time"

	"github.com/locksmith-go/lock/internal/wait"
	"github.com/locksmith-go/lock/strategy"
)

// waiter is the part of an Obtain that waits to try again: by notification
// when the strategy notifies, by the retry policy's timer alone otherwise.
type waiter struct {
	l        *Locker
	key      string
	keys     []string // the keys of a lock of several keys; nil for one
	hs       hookList
	n        strategy.Notifier // nil: poll
	id       string            // the waiter's id in the queue and in messages, once it waits
	listened bool              // Listen was called, after the first attempt failed
	listener strategy.Listener // nil until then, or when the strategy cannot deliver
	heard    string            // the key the listener hears, for a lock of several keys
	queued   bool              // an attempt queued the waiter: leave the queue when giving up
	expected bool              // a timer woke the waiter though a message was due: the holder's key would not have expired
	woke     strategy.Wake     // why the last sleep ended; 0 when a timer of the retry policy alone ended it
}

// newWaiter returns the waiter of an Obtain of key, or of an ObtainMany of
// keys.
func (l *Locker) newWaiter(key string, keys []string, o options) waiter {
	w := waiter{l: l, key: key, keys: keys, hs: o.hooks}
	if n, ok := l.s.(strategy.Notifier); ok && !o.poll {
		w.n = n
	}
	return w
}

// ask sets r's Waiter, Poll and Patience for an attempt after which the
// caller waits delay, when again, and tries again. Wake-ups that came
// before the attempt are dropped: the attempt answers them (a release
// publishes on each node of Redlock, and the first message would
// otherwise leave the others to wake the waiter again, for nothing).
func (w *waiter) ask(ctx context.Context, r *strategy.Request, delay time.Duration, again bool) error {
	if w.listener != nil {
		for drained := false; !drained; {
			select {
			case <-w.listener.Wakes():
			default:
				drained = true
			}
		}
	}
	r.Waiter, r.Poll, r.Patience = "", 0, 0
	if w.n == nil || !again {
		return nil
	}
	if w.id == "" { // random, like a token: a message names it
		id, err := NewToken()
		if err != nil {
			return err
		}
		w.id = id
	}
	if dl, ok := ctx.Deadline(); ok {
		r.Patience = max(time.Until(dl), time.Millisecond)
	}
	r.Waiter, r.Poll = w.id, delay
	return nil
}

// sleep waits, after an attempt that found the lock held (g), for a
// wake-up, for its timer, or for ctx. The timer is the retry policy's
// delay d at the head of a queue, or until the holder's key expires if
// that is sooner (an expiry wakes no one), and rank × d further back,
// until the waiter is promoted to the head. It returns ctx's error when ctx
// ended the wait.
func (w *waiter) sleep(ctx context.Context, g strategy.Grant, delay time.Duration) error {
	if w.n == nil {
		return wait.Sleep(ctx, delay)
	}
	if g.Position > 0 && !w.queued {
		w.queued = true
		w.event(ctx, Event{Op: "enqueued", Rank: g.Position})
	}
	if w.keys != nil {
		w.hear(g.Queue)
	} else if !w.listened {
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
	timer := delay
	switch {
	case g.Position == 1 && g.HolderTTL > 0:
		timer = min(delay, g.HolderTTL+time.Millisecond)
	case g.Position > 1:
		timer = delay * time.Duration(g.Position)
	}
	t := time.NewTimer(timer)
	defer t.Stop()
	var reason strategy.Wake
	for reason == 0 {
		select {
		case r := <-wakes:
			if r != strategy.WakePromoted {
				reason = r
			} else if timer > delay { // the head polls every delay
				timer = delay
				t.Reset(delay)
			}
		case <-t.C:
			// A wake-up that came with the timer explains it better.
			reason = strategy.WakeTimer
			select {
			case r := <-wakes:
				if r != strategy.WakePromoted {
					reason = r
				}
			default:
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// A message was due if one could come, and the holder's key would not
	// have expired by the timer: the lock was released, and passed on
	// (promoting this waiter) without a message reaching it.
	w.expected = wakes != nil && reason == strategy.WakeTimer && g.HolderTTL > timer
	w.woke = reason
	w.event(ctx, Event{Op: "woken", Reason: reason.String()})
	return nil
}

// hear makes the waiter of a lock of several keys listen for the wake-ups
// of key, the key in whose queue its last attempt queued it (see
// strategy.Grant.Queue), and for none when key is "": it polls.
func (w *waiter) hear(key string) {
	if w.listened && key == w.heard {
		return
	}
	if w.listener != nil {
		w.listener.Close()
	}
	w.listened, w.heard, w.listener = true, key, nil
	if key != "" {
		w.listener = w.n.Listen(key, w.id)
	}
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
		w.l.cleanUp(ctx, w.hs, w.key, w.leave())
	}
}

// mayHaveQueued records that an attempt whose outcome is unknown (no
// answer, a failed script, a panic) may have queued the waiter.
func (w *waiter) mayHaveQueued() { w.queued = true }

// leave returns the clean-up that takes the waiter out of the queues it
// may be in: its key's, or those of every key of a lock of several keys
// (it may have kept places in any of them; see strategy.Grant.Queue).
func (w *waiter) leave() func(context.Context) error {
	n, key, keys, id := w.n, w.key, w.keys, w.id
	if keys == nil {
		return func(ctx context.Context) error { return n.Leave(ctx, key, id) }
	}
	return func(ctx context.Context) error {
		var errs []error
		for _, k := range keys {
			errs = append(errs, n.Leave(ctx, k, id))
		}
		return errors.Join(errs...)
	}
}

// abandon ends the wait of an Obtain that a panic interrupted, without
// waiting and without the hooks: it closes the listener, and, if an
// attempt may have queued the waiter, leaves the queue in the background.
func (w *waiter) abandon(ctx context.Context) {
	if w.listener != nil {
		w.listener.Close()
	}
	if w.id != "" {
		w.mayHaveQueued()
		discard(&w.l.life.bg, ctx, w.key, false, w.leave())
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
