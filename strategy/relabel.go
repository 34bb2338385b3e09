package strategy

import (
	"context"
	"time"
)

// Relabeler is an optional interface of a [Strategy] that can replace the
// value a lock is held under, atomically, with another (lock.Lock.SetMetadata,
// which changes the metadata stored after the token and its stamp). The
// lock package calls it only for a lock of one key that the Strategy itself
// obtained (not a [Multi] lock of several keys, nor a shared lock of a
// [SharedStrategy]), with next differing from value in its metadata alone;
// the guarantees of Strategy hold, and ttl is at least a millisecond.
type Relabeler interface {
	// Relabel replaces value with next on key if key still holds value,
	// and resets its expiry to ttl, as Refresh would; a key that holds
	// next already (the same Relabel applied before, its reply lost) is
	// taken as the lock's and gets the expiry again. It returns
	// [ErrExpired] when the key is gone, and [ErrTaken] when another value
	// holds it, writing nothing. Grant.Drift is as Refresh reports it;
	// Grant.Value is ignored: the lock is held under next. When the reply
	// is lost, next may have landed: the lock tries next too when a later
	// call finds value taken, and a [Batcher] that is a Relabeler takes
	// the Unsure values of a [Refresh] for the lock's own too.
	Relabel(ctx context.Context, key, value, next string, ttl time.Duration) (Grant, error)
}

// Fencer is an optional interface of a [Strategy] that says whether its
// Acquire honours Request.Fencing (lock.WithFencing), issuing fencing
// tokens, rather than refusing it with an [*ArgumentError] named
// "fencing". Code that cannot work without fencing tokens, such as a
// leader election that hands its leader's token to the resources it
// guards, checks it before it obtains anything: a Strategy that does not
// implement it is taken to issue none.
type Fencer interface {
	// Fences reports whether Acquire issues fencing tokens, as configured.
	// A Strategy that does may still refuse fencing for a key whose
	// counter cannot be named (see single.FenceKey).
	Fences() bool
}
