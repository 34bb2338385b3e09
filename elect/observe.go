package elect

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/locksmith-go/lock"
)

// Kind is what an [Event] reports.
type Kind int

const (
	// Elected: a leader holds the term Event.Leader.Term.
	Elected Kind = iota + 1
	// Proclaimed: the leader of the same term changed its identity
	// ([Term.Proclaim]).
	Proclaimed
	// Vacant: nobody leads; Event.Leader.Term is the last term elected.
	Vacant
	// Gap: terms were elected and ended between two readings, unseen:
	// Event.Missed says how many. It comes before the event of the reading
	// that found the gap.
	Gap
	// Error: a reading failed (Event.Err); the readings go on.
	Error
)

// String returns the kind's name: "elected", "proclaimed", "vacant",
// "gap" or "error".
func (k Kind) String() string {
	switch k {
	case Elected:
		return "elected"
	case Proclaimed:
		return "proclaimed"
	case Vacant:
		return "vacant"
	case Gap:
		return "gap"
	case Error:
		return "error"
	}
	return "unknown"
}

// Event is one transition that [Elector.Observe] saw.
type Event struct {
	Kind   Kind   // what it reports
	Leader Leader // Elected, Proclaimed: the leader; Vacant: the last term (Leader.Term)
	Missed int64  // Gap: how many terms came and went unseen
	Err    error  // Error: why the reading failed
}

// Observe reads the leader every interval ([WithInterval]) and yields
// each change, in order: the first reading's Elected or Vacant, then
// Elected for each new term, Proclaimed for a new identity within the
// term, Vacant when the key is gone, and, where terms passed between two
// readings, a Gap with their exact count before the reading's own event
// (terms are consecutive numbers). A failed reading yields an Error, and
// the readings go on: the next that succeeds reports what changed
// meanwhile, gaps included. It never names a leader whose key was gone
// when it read: a reading takes the key and its counter atomically (a
// script, or a transaction without scripts). It stops when ctx ends or the
// loop breaks; it reads nothing between two steps of the loop, so a slow
// consumer costs it readings, never order.
//
// A gap of a million terms or more means that the counter was deleted,
// and restarted from the server's clock (see [Term.Number]), not that so
// many terms were missed. A nil ctx yields one Error, an
// *lock.ArgumentError named "ctx".
func (e *Elector) Observe(ctx context.Context) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		if ctx == nil {
			yield(Event{Kind: Error, Err: &lock.ArgumentError{Name: "ctx", Reason: "must not be nil"}})
			return
		}
		var o observer
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			l, err := e.Leader(ctx)
			if ctx.Err() != nil {
				return
			}
			for _, ev := range o.next(l, err) {
				if !yield(ev) {
					return
				}
			}
			timer.Reset(e.interval)
		}
	}
}

// observer turns readings into events.
type observer struct {
	seen   bool   // a reading succeeded
	held   bool   // the last reading found a leader
	term   int64  // the last reading's term
	leader Leader // the last reading's leader
}

// next returns the events of a reading of l and err.
func (o *observer) next(l Leader, err error) []Event {
	vacant := errors.Is(err, ErrNoLeader)
	if err != nil && !vacant {
		return []Event{{Kind: Error, Err: err}}
	}
	var evs []Event
	if o.seen && o.term > 0 { // after term 0, none ever elected, the counter starts anywhere
		// Terms after o.term, and before l.Term, that this reading did not see.
		missed := l.Term - o.term - 1
		if vacant && l.Term != o.term {
			missed++ // l.Term came and ended too, unseen
		}
		if missed > 0 {
			evs = append(evs, Event{Kind: Gap, Missed: missed})
		}
	}
	switch {
	case vacant && (!o.seen || o.held || l.Term != o.term):
		evs = append(evs, Event{Kind: Vacant, Leader: Leader{Term: l.Term}})
	case !vacant && (!o.seen || !o.held || l.Term != o.term):
		evs = append(evs, Event{Kind: Elected, Leader: l})
	case !vacant && l.Identity != o.leader.Identity:
		evs = append(evs, Event{Kind: Proclaimed, Leader: l})
	}
	o.seen, o.held, o.term, o.leader = true, !vacant, l.Term, l
	return evs
}
