package driver

import "context"

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
	// shard, on a Redis Cluster), and calls on with every event the session
	// reads, from one goroutine at a time, in order. The last event is
	// always of kind [Closed]; no call of on follows it. on must not block.
	// ctx bounds the dial only.
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
	// SSUBSCRIBE to the master of the channel's slot.
	Subscribe(ctx context.Context, channels ...string) error
	// Unsubscribe sends the end of the subscription to channels; an event
	// of kind [Unsubscribed] confirms it.
	Unsubscribe(ctx context.Context, channels ...string) error
	// Close ends the session and closes its connections. The session then
	// reports an event of kind Closed, with a nil Err.
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
