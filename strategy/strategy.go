// Package strategy is the interface between the lock package and the lock
// algorithms: what a strategy author implements, and what the lock package
// gives it. Application code uses the lock package and a strategy package
// (strategy/single, strategy/setnx-getset, strategy/redlock), and needs
// this one only for [Fingerprint], to tell whether a State that
// lock.Locker.Inspect read names the holder of a lock it has, and to name
// the type of State's Nodes, [NodeState].
//
// A strategy implements [Strategy]: one attempt to acquire, and the
// operations on a held lock. lock.New turns it into a lock.Locker, which
// supplies validation, tokens, the wait loop, the lock handle and the hooks.
// Check a Strategy with the conformance package, and see the repository's
// docs/extending.md guide.
//
// The errors are defined here, and the lock package re-exports them (as
// os.ErrNotExist is fs.ErrNotExist), so errors.Is and errors.As match across
// both: a strategy returns strategy.ErrTaken, and its user matches
// lock.ErrNotHeld.
//
// This split follows database/sql and database/sql/driver.
package strategy

import (
	"context"
	"time"
)

// Strategy is a lock algorithm: the part of a lock.Locker that talks to
// Redis. lock.New turns it into a Locker.
//
// The lock package guarantees that contexts are not nil, keys are
// non-empty, TTLs are at least one millisecond and values are non-empty.
// Implementations must be safe for concurrent use, and must hold no mutex
// across code that can panic (a call into a driver, ReportNode, whose Node
// hooks are the user's), so that a recovered panic leaves them working.
//
// Refresh, Release and TTL return [ErrExpired] when the key is gone, and
// [ErrTaken] when another value holds it (both match [ErrNotHeld]); a
// strategy that cannot tell the two apart returns ErrNotHeld.
//
// When Request.Fencing is set, Acquire issues a fencing token atomically
// with the acquisition and reports it in Grant.Fence, or, if it cannot,
// refuses with an [*ArgumentError] named "fencing" before writing anything.
type Strategy interface {
	// Acquire makes one attempt to lock r.Key. It returns an error
	// matching ErrNotObtained when another owner holds the key, and any
	// other error (a Redis or transport error, unwrapped) when the attempt
	// failed. After an error, the Locker deletes the value the attempt may
	// have written (Grant.Value if set, else r.Value()) with Release,
	// through [CleanUp], in the background once ctx is done, so an attempt
	// whose reply was lost leaves nothing behind; unless Grant.Undone says
	// the attempt did that itself. Every attempt gets a fresh random token,
	// unless the caller chose one.
	Acquire(ctx context.Context, r Request) (Grant, error)
	// Refresh resets the expiry of key to ttl if it still holds value.
	// A Refresh that replaces the value reports the value it tried to
	// write in Grant.Value even when it fails without an answer (a timeout,
	// a transport error): the write may have landed. The lock then tries
	// that value too when a later call finds its own value taken.
	Refresh(ctx context.Context, key, value string, ttl time.Duration) (Grant, error)
	// Release deletes key if it still holds value.
	Release(ctx context.Context, key, value string) error
	// TTL returns the remaining time to live of key if it still holds value.
	TTL(ctx context.Context, key, value string) (time.Duration, error)
	// Inspect reads the state of the lock on key without changing it. It
	// returns the server's error unwrapped; a multi-node strategy that
	// could not tell returns the State it read (with Nodes) and an error.
	Inspect(ctx context.Context, key string) (State, error)
}

// Request is what [Strategy.Acquire] is asked to lock.
type Request struct {
	Key      string        // the key to lock, never empty
	Keys     []string      // every key of a multi-key lock ([Multi]), Key first; nil for one key
	TTL      time.Duration // how long the key lives, as Obtain was given it
	Token    string        // random, or chosen with lock.WithToken
	Metadata string        // from lock.WithMetadata; often empty

	// Stamp is what the Locker stamps on the value, between the token and
	// the metadata: when the attempt was sent, and the holder's trace
	// context, for those who inspect the lock. A strategy that stores
	// [Request.Value] stores it; one whose values cannot carry metadata
	// ignores it, as setnx-getset does.
	Stamp string

	// CallerToken reports that Token was chosen with lock.WithToken. A
	// strategy that cannot honour a chosen token refuses it.
	CallerToken bool

	// Fencing asks for a fencing token (lock.WithFencing), in Grant.Fence.
	Fencing bool

	// Retry reports that an earlier attempt of the same Obtain found the
	// lock held. A first attempt may start with the cheapest command for a
	// free key (single and Redlock send a bare SET NX PX); a retry, which
	// likely finds the key held again, skips it.
	Retry bool

	// Again reports that the retry policy allows another attempt after
	// this one, should it find the lock held. A first attempt with a fresh
	// token (not CallerToken) that another attempt follows may then take a
	// refused SET NX PX for "held": its token cannot be on the server, and
	// the last attempt's script still reports a key of another type.
	Again bool

	// Waiter, when not empty, names the caller as a waiter that will try
	// again after this attempt, woken through [Notifier]: a strategy with a
	// queue enqueues it when the lock is not free, and grants the lock to
	// the waiters in turn. It is empty for a caller that will not try again,
	// and for one that polls (lock.WithPolling). A strategy without a queue
	// ignores it.
	Waiter string
	// Poll is how often Waiter tries again, without a message, at the head
	// of the queue: the delay of its retry policy. A waiter at rank r
	// tries again every r × Poll, so a queue keeps a waiter for 3 × r ×
	// Poll + 50ms without another attempt (its patience), and a head that
	// a release woke for Poll + 50ms; past that, it is taken for dead and
	// dropped.
	Poll time.Duration
	// Patience, when positive, caps how long the queue keeps Waiter: the
	// time left before the caller's deadline, so that no entry outlives it.
	Patience time.Duration
}

// Value returns the value a strategy that stores tokens writes: the token
// followed by the stamp and the metadata.
func (r Request) Value() string { return r.Token + r.Stamp + r.Metadata }

// Grant is what a [Strategy] reports about a successful Acquire or Refresh.
type Grant struct {
	// Value, when not empty, replaces the value the lock is held under and
	// becomes its token: a strategy that stores something other than the
	// token, such as a legacy timestamp, reports it here. Later calls
	// receive this value. Returned by Refresh with an error that is not an
	// answer, it is the value the refresh may have written (see
	// [Strategy]).
	Value string
	// Drift is subtracted from the TTL when the local validity deadline is
	// computed: an allowance for clock drift between client and servers.
	Drift time.Duration
	// Undone, returned with an error by Acquire, says that the attempt has
	// already undone whatever it may have written, so the Locker skips its
	// own clean-up.
	Undone bool
	// Fence is the fencing token that Acquire issued for Request.Fencing:
	// positive, and larger than every token issued before for the key.
	Fence int64
	// Permit is, for a semaphore's holder ([Sharer]), its permit index
	// plus one: 1 to Permits, so that 0 says there is none.
	Permit int
	// Fences are the fencing tokens that [Multi.AcquireKeys] issued, one
	// per key, in the order of Request.Keys.
	Fences []int64
	// Position, returned with ErrNotObtained by a strategy with a queue, is
	// Request.Waiter's place in it: 1 for the head, which the next release
	// wakes. 0 when the waiter was not queued.
	Position int
	// Queue, returned with ErrNotObtained by [Multi.AcquireKeys] when it
	// queued Request.Waiter, is the key in whose queue the waiter waits
	// (Position is its place there, or 1 when it heads the queues of keys
	// before it, which it must keep by trying again at the head's pace):
	// the key whose wake-ups it listens for ([Notifier.Listen]). Empty when
	// the waiter was not queued, and polls.
	Queue string
	// HolderTTL, returned with ErrNotObtained, is the holder's remaining
	// time to live, when the strategy read it (0 otherwise). An expiry wakes
	// no one, so the head of a queue tries again when it ends.
	HolderTTL time.Duration
	// Holder, returned with ErrNotObtained, is the holder of the key that
	// refused the attempt (Request.Key, or the *KeyError's key), when the
	// strategy read it in the same round trip, as Inspect would show it
	// (Held, TTL, Fingerprint, Metadata and Waiters at least); nil
	// otherwise, and the Locker reads it with Inspect when it needs it.
	Holder *State
}

// Breaker is an optional interface of a [Strategy] whose locks can be
// broken (lock.Locker.Break): deleted without the holder's token, by an
// operator whose holder is gone.
type Breaker interface {
	// Break deletes key as the holder's Release would (waking its
	// waiters), if the holder's fingerprint ([State].Fingerprint) is
	// fingerprint, or whoever holds it when fingerprint is "". It returns
	// the State it read before, and [ErrExpired] when the lock is free, or
	// [ErrTaken] when another holder holds it, deleting nothing. It deletes
	// the value it read, with a compare-and-delete, so it never deletes a
	// holder that came after the reading. A multi-node strategy breaks the
	// lock on each node that holds such a value, and reports the nodes
	// in State.Nodes.
	Break(ctx context.Context, key, fingerprint string) (State, error)
}

// NodeReporter is an optional interface of a [Strategy] that calls
// [ReportNode] or [CleanUp] within its calls: a multi-node strategy. The
// hooks reach only such a strategy's calls, through their context; the
// others are spared the context value.
type NodeReporter interface {
	// ReportsNodes reports whether the strategy calls ReportNode.
	ReportsNodes() bool
}

// State is what an inspection read of a lock, without holding it or
// changing it. Fields that do not apply to a strategy are zero.
type State struct {
	// Held reports whether an owner holds the lock: for a multi-node
	// strategy, whether a quorum of nodes hold one value.
	Held bool
	// TTL is the lock's remaining time to live, as the server counts it:
	// for a multi-node strategy, the time until fewer than a quorum of nodes
	// hold it. It is negative when the key has no expiry (a legacy lock
	// written without a safety TTL), and zero when the lock is free.
	TTL time.Duration
	// Fingerprint identifies the holder without revealing its token
	// ([Fingerprint] of the token): equal fingerprints, equal holders.
	// Empty when the lock is free.
	Fingerprint string
	// Metadata is the holder's metadata (lock.WithMetadata), read back
	// from the stored value ([SplitValue]). Empty when there is none.
	Metadata string
	// Fence is the last fencing token issued for the key, by a strategy
	// that issues them: the holder's own when it obtained the lock with
	// lock.WithFencing. Zero when none was ever issued, or when the
	// counter that issues them expired (single.WithFenceTTL).
	Fence int64
	// Waiters is how many waiters the lock's queue holds, for a strategy
	// that queues them (single, waiting by notification): those that
	// Obtain wakes in turn. A waiter that died stays counted until the
	// queue drops it (see Request.Poll).
	Waiters int
	// Waited is, for a lock whose queue holds waiters, how long the one
	// that has waited longest has been in it. Zero when none waits.
	Waited time.Duration
	// HeldFor is how long the holder has held the lock: since the attempt
	// that obtained it, by the time its Locker stamped on the value (see
	// lock.WithMetadata), read by this client's clock, so it is off by
	// the skew between the two clients' clocks. Zero when the value bears
	// no stamp (a legacy lock, another library's, a free lock); at least
	// a millisecond otherwise.
	HeldFor time.Duration
	// Trace is the holder's trace context, when its hooks stored one at
	// acquire time (lock.Hooks.Trace; the otel package stores its
	// lock.obtain span's): the W3C trace-id and parent-id in lower-case
	// hex, joined by "-" (32 + 1 + 16 characters). Empty otherwise.
	Trace string
	// Expiry is, for a legacy lock whose value is a timestamp, that
	// timestamp, decoded: when the holder's lock ends by the fleet's clocks.
	Expiry time.Time
	// Takeover reports, for a legacy lock, that its timestamp has passed
	// (by more than the allowed clock skew): an Obtain would take the lock
	// over now, though its key still exists.
	Takeover bool
	// Permits is, for a counting semaphore ([Sharer]), its limit: how many
	// holders it admits at once. Zero for other locks.
	Permits int
	// ReadWrite reports that the key is a read-write lock's ([Sharer]).
	ReadWrite bool
	// Holders are, for a shared lock (a semaphore or a read-write lock),
	// its holders, soonest to expire first. Held is then whether there is
	// one, TTL the time until the last one's lease ends, and Fingerprint
	// and Metadata those of the writer, when one holds the lock.
	Holders []Holder
	// Nodes is, for a multi-node strategy, what each node answered, in the
	// order the nodes were given.
	Nodes []NodeState
	// Verdict sums the state up in a few words for people, such as "free",
	// "held", or, for Redlock, "held on 3 of 5 nodes (quorum 3)". Code
	// should read the fields above instead.
	Verdict string
}

// NodeState is what one node of a multi-node strategy answered to an
// inspection.
type NodeState struct {
	Node        string        // the node's name: its address, or "node <i>"
	Held        bool          // the node holds a value under the key
	TTL         time.Duration // the key's remaining time to live on the node
	Fingerprint string        // the fingerprint of the node's value's token
	Metadata    string        // the metadata in the node's value
	Err         error         // why the node gave no answer; nil if it did
}
