package strategy

import (
	"context"
	"strconv"
)

// Notifier is an optional interface of a [Strategy] whose releases wake the
// waiters of a lock, so that they need not poll. A lock.Locker finds it by
// type assertion, and listens for the wake-ups of an Obtain that waits
// (unless it was told to poll, with lock.WithPolling).
//
// Wake-ups carry no authority: the lock is granted by Acquire alone, so a
// wake-up that is lost, duplicated, late or forged costs latency or
// fairness, never mutual exclusion. A waiter that hears nothing tries again
// when its retry policy says, as one that polls does.
type Notifier interface {
	// Listen returns the wake-ups of the waiter id for key, or nil when
	// the strategy cannot deliver them (its driver has no pub/sub, say),
	// and the waiter polls. It does not block: the subscription is made in
	// the background, and its confirmation is a wake-up of its own
	// ([WakeSubscribed]), since a release before it went unheard.
	Listen(key, id string) Listener
	// Leave takes the waiter id out of the queue of key, for a waiter that
	// gives up, and wakes the next when id was the head and the lock is
	// free. It is best effort: a queue drops a waiter that does not come
	// back within its Patience anyway. A strategy without a queue returns
	// nil.
	Leave(ctx context.Context, key, id string) error
}

// Listener delivers the wake-ups of one waiter; see [Notifier.Listen].
type Listener interface {
	// Wakes delivers a wake-up whenever the waiter should try again, or
	// (WakePromoted) poll sooner. It holds few pending wake-ups, and drops
	// one that would not fit: a pending wake-up serves as well.
	Wakes() <-chan Wake
	// Close stops the deliveries, and lets go of the subscription once no
	// waiter of the process uses it.
	Close()
}

// Wake is why a waiter woke up.
type Wake int

const (
	// WakeMessage: a release (or a waiter that found the lock free) named
	// this waiter, or, for a strategy without a queue, every waiter.
	WakeMessage Wake = iota + 1
	// WakeSubscribed: the subscription was confirmed; a release before it
	// went unheard.
	WakeSubscribed
	// WakeResubscribed: the subscription was restored after its connection
	// failed or its Cluster slot moved; messages in between were lost.
	WakeResubscribed
	// WakeTimer: no message came before the waiter's timer, the delay of
	// its retry policy (lock.WithRetry).
	WakeTimer
	// WakePromoted: the waiter is now the head of the queue: the next
	// release wakes it. It does not try again yet, but from now on polls
	// as the head does (every Request.Poll), so that a lost wake-up costs
	// it one poll at most.
	WakePromoted
)

// String returns the reason's name: "message", "subscribed",
// "resubscribed", "timer" or "promoted".
func (w Wake) String() string {
	if w > 0 && int(w) < len(wakeNames) {
		return wakeNames[w]
	}
	return "Wake(" + strconv.Itoa(int(w)) + ")"
}

var wakeNames = [...]string{WakeMessage: "message", WakeSubscribed: "subscribed", WakeResubscribed: "resubscribed", WakeTimer: "timer", WakePromoted: "promoted"}
