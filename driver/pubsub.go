package driver

import (
	"context"
	"sync"
)

// Subscriber is an optional interface of a [Conn] that can subscribe to
// channels: the transport by which a release wakes the waiters of a lock.
// The strategies find it by type assertion; over a Conn without it, waiters
// poll.
//
// A driver only opens sessions and relays what it reads. Everything else,
// the one session per process that multiplexes every lock, reference
// counting, reconnecting, resubscribing and waking every waiter after a
// gap, lives once, in the module's portable layer.
type Subscriber interface {
	// Listen opens a subscriber session on a connection of its own (one per
	// server that owns a subscribed channel, on a Redis Cluster), and calls
	// on with every event the session reads, from one goroutine at a time,
	// in order (the order of each connection's events; those of different
	// connections interleave). The last event is always of kind [Closed];
	// no call of on follows it. on must not block, nor call the session's
	// methods. ctx bounds the opening only: a driver that dials a server
	// when a channel first needs it does so within Subscribe's ctx.
	//
	// A session never reconnects: when a connection fails, or its server
	// stops answering (a driver pings a silent connection), the whole
	// session ends with Closed and an error, and the caller opens another.
	Listen(ctx context.Context, on func(Event)) (Session, error)
	// Sharded reports whether channels are shard channels: Listen's
	// sessions subscribe with SSUBSCRIBE, and a release must publish with
	// SPUBLISH (a Redis Cluster of version 7 or later). Otherwise they are
	// classic channels: SUBSCRIBE and PUBLISH.
	Sharded() bool
}

// Session is one subscriber session, opened by [Subscriber.Listen]. Its
// methods are safe for concurrent use.
type Session interface {
	// Subscribe sends the subscription to channels and returns once it is
	// sent; the server's confirmation arrives later, as an event of kind
	// [Subscribed] for each channel. On a Cluster it sends each channel's
	// SSUBSCRIBE to the master of the channel's slot; after the server
	// dropped a subscription because its slot moved, it learns the slots
	// again first, so that the subscription follows the slot.
	Subscribe(ctx context.Context, channels ...string) error
	// Unsubscribe sends the end of the subscription to channels; an event
	// of kind [Unsubscribed] confirms it.
	Unsubscribe(ctx context.Context, channels ...string) error
	// Close ends the session, and closes its connections or gives them
	// back to their pool out of the subscribed state. The session then
	// reports an event of kind Closed, with a nil Err: before Close returns,
	// or once the server confirmed the end (or the connection failed).
	Close() error
}

// EventKind says what a subscriber session read.
type EventKind int

const (
	// Message: Payload was published on Channel.
	Message EventKind = iota + 1
	// Subscribed: the server confirmed the subscription to Channel.
	Subscribed
	// Unsubscribed: the subscription to Channel ended, because it was asked
	// to, or because the server dropped it (the Cluster slot of a shard
	// channel moved to another master).
	Unsubscribed
	// Closed: the session ended, because Close was called (Err nil) or its
	// connection failed (Err says why). Messages published since may be
	// lost.
	Closed
)

// Event is what a subscriber session read.
type Event struct {
	Kind    EventKind // what was read
	Channel string    // the channel (Message, Subscribed, Unsubscribed)
	Payload string    // the message (Message)
	Err     error     // why the session ended (Closed)
}

// Relay hands a session's events to the on function that Listen got, as
// [Subscriber.Listen] promises: one call at a time, in the order of the
// calls of Emit, and none after the first event of kind [Closed]. A session
// whose events come from several goroutines (goredis's and rueidis's, one
// per connection) reports every event through one Relay; one that reads
// from a single goroutine (redigo's) may call on directly.
type Relay struct {
	mu    sync.Mutex
	on    func(Event)
	ended bool // Closed was reported: on is called no more
}

// NewRelay returns a Relay that calls on.
func NewRelay(on func(Event)) *Relay { return &Relay{on: on} }

// Emit reports e unless the session has ended; an event of kind Closed
// ends it.
func (r *Relay) Emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	r.ended = e.Kind == Closed
	r.on(e)
}
