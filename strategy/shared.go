package strategy

import (
	"context"
	"time"
)

// Sharing says how a lock on one name admits several holders: a counting
// semaphore of Permits holders (lock.WithPermits), or one side of a
// read-write lock (lock.WithRead, lock.WithWrite). Exactly one of its
// fields is set.
type Sharing struct {
	Permits int  // a counting semaphore: at most Permits holders at once
	Read    bool // a read-write lock's read side: many readers, no writer
	Write   bool // a read-write lock's write side: one writer, no reader
}

// Option names the option that asked for sh, for an *ArgumentError that
// refuses it: "permits" for a semaphore, "mode" for a read-write lock.
func (sh Sharing) Option() string {
	if sh.Permits > 0 {
		return "permits"
	}
	return "mode"
}

// Sharer is an optional interface of a [Strategy] whose locks can be shared
// (lock.WithPermits, lock.WithRead, lock.WithWrite). A Strategy that cannot
// share locks, in general or as configured, may implement it all the same,
// to say why.
type Sharer interface {
	// Shared returns the Strategy that obtains the shared locks described
	// by sh, over the same connection: the Locker runs the Obtain, and the
	// lock's Refresh, Release and TTL, through it. Its Acquire takes a
	// holder's place (a permit, a read or a write) under r.Key with
	// r.Value(), and reports the permit in Grant.Permit; its Refresh,
	// Release and TTL act on that holder alone, with the errors of
	// Strategy, so that a holder never extends or releases another's
	// place. An Acquire that finds the key holding a lock of another
	// shape returns an error matching [ErrMismatch], having written
	// nothing. Shared refuses what it cannot do with an [*ArgumentError]
	// named sh.Option(), whose reason says why. The lock package checks sh
	// first: Permits from 1 to lock.MaxPermits, or one of Read and Write.
	Shared(sh Sharing) (SharedStrategy, error)
}

// SharedStrategy is the Strategy that [Sharer.Shared] returns.
type SharedStrategy interface {
	Strategy
	// Sharing returns the Sharing it was made for, which the lock
	// package's hooks report (lock.Event.Permits and Side).
	Sharing() Sharing
}

// Downgrader is an optional interface of the Strategy that [Sharer] returns
// for a read-write lock's write side (lock.Lock.Downgrade).
type Downgrader interface {
	// Downgrade turns the writer that holds key with value into a reader,
	// in one step: no other writer can come between. The holder keeps its
	// value and its lease, and its Refresh, Release and TTL are unchanged.
	// It returns ErrExpired when the holder's lease is gone. A holder that
	// is already a reader is left as it is.
	Downgrade(ctx context.Context, key, value string) error
}

// Holder is one holder of a shared lock, as an inspection read it: a
// semaphore's permit, or a read-write lock's reader or writer.
type Holder struct {
	Fingerprint string        // the fingerprint of the holder's token ([Fingerprint])
	Metadata    string        // the holder's metadata
	TTL         time.Duration // the holder's remaining lease
	Permit      int           // a semaphore holder's permit index, 0 to Permits-1
	Write       bool          // the holder is a read-write lock's writer
	HeldFor     time.Duration // how long the holder has held its lease (see State.HeldFor)
	Trace       string        // the holder's trace context (see State.Trace)
}
