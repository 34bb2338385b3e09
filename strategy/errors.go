package strategy

import (
	"errors"
	"fmt"
)

// The errors of a lock's life. The lock package re-exports them under the
// same names, and its documentation says when each is returned.
var (
	// ErrNotObtained means another owner holds the lock.
	ErrNotObtained = errors.New("lock: not obtained")

	// ErrNotHeld means the lock is no longer ours. ErrExpired and ErrTaken
	// match it and say why, where the server can tell.
	ErrNotHeld = errors.New("lock: not held")

	// ErrExpired means the key is gone: the lock expired (or was deleted)
	// and nobody holds it now. It matches ErrNotHeld.
	ErrExpired = fmt.Errorf("%w: expired", ErrNotHeld)

	// ErrTaken means the key is held by another owner. It matches
	// ErrNotHeld.
	ErrTaken = fmt.Errorf("%w: held by another owner", ErrNotHeld)

	// ErrBroken means the key is gone because a Break deleted it
	// (lock.Locker.Break), which left a mark that names the holder. It
	// matches ErrExpired and ErrNotHeld.
	ErrBroken error = brokenError{}

	// ErrMismatch means that the lock on a key is of another shape than
	// asked for: a semaphore with another limit, a read-write lock asked
	// for as a semaphore (or the reverse), a plain lock's key asked for as
	// a shared lock, or a shared lock's as a plain lock.
	ErrMismatch = errors.New("lock: the key holds a lock of another shape")
)

// brokenError is ErrBroken: a gone key, which a Break deleted.
type brokenError struct{}

func (brokenError) Error() string { return "lock: not held: broken" }
func (brokenError) Unwrap() error { return ErrExpired }

// ArgumentError reports an invalid argument or option, by name. Match it
// with errors.As.
type ArgumentError struct {
	Name   string // the argument or option, for example "key" or "ttl"
	Reason string // what is wrong, and what is allowed
	// Err is errors.ErrUnsupported when the argument asks for what the
	// strategy cannot do (several keys, a shape, fencing, metadata), so
	// that errors.Is tells "not supported here" from a mistake; nil
	// otherwise.
	Err error
}

// Error returns "lock: invalid <Name>: <Reason>".
func (e *ArgumentError) Error() string {
	return "lock: invalid " + e.Name + ": " + e.Reason
}

// Unwrap returns Err.
func (e *ArgumentError) Unwrap() error { return e.Err }

// ReplicaError reports a write that the master applied but fewer replicas
// than asked acknowledged, within the wait (Redis's WAIT): a failover now
// could promote a replica that does not have it. Match it with errors.As.
type ReplicaError struct {
	Want int // the replicas asked for
	Got  int // the replicas that acknowledged the write
}

// Error returns "lock: <Got> of <Want> replicas acknowledged the write".
func (e *ReplicaError) Error() string {
	return fmt.Sprintf("lock: %d of %d replicas acknowledged the write", e.Got, e.Want)
}
