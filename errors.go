package lock

import (
	"errors"
	"fmt"
)

var (
	// ErrNotObtained means the lock is still held by another owner after
	// the attempts the retry policy allowed. When the context ended the
	// wait, the error also matches the context's cause.
	ErrNotObtained = errors.New("lock: not obtained")

	// ErrNotHeld means a Refresh, Release or TTL found that the lock is no
	// longer ours. ErrExpired and ErrTaken match it and say why, where the
	// server can tell.
	ErrNotHeld = errors.New("lock: not held")

	// ErrExpired means the key is gone: the lock expired (or was deleted)
	// and nobody holds it now. It matches ErrNotHeld.
	ErrExpired = fmt.Errorf("%w: expired", ErrNotHeld)

	// ErrTaken means the key is held by another owner. It matches
	// ErrNotHeld.
	ErrTaken = fmt.Errorf("%w: held by another owner", ErrNotHeld)

	// ErrRefreshLimit means the lock was refreshed as many times as
	// [WithMaxRefreshes] allows. The lock is still held until its TTL ends.
	ErrRefreshLimit = errors.New("lock: refresh limit reached")

	// ErrInvalidArgument is matched by every [*ArgumentError].
	ErrInvalidArgument = errors.New("lock: invalid argument")

	errReleased = fmt.Errorf("%w: already released", ErrNotHeld)
)

// ArgumentError reports an invalid argument or option, by name. It matches
// ErrInvalidArgument.
type ArgumentError struct {
	Name   string // the argument or option, for example "key" or "ttl"
	Reason string // what is wrong, and what is allowed
}

func (e *ArgumentError) Error() string {
	return "lock: invalid " + e.Name + ": " + e.Reason
}

// Is reports whether target is ErrInvalidArgument.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// opError wraps a Redis or transport error with the operation and key.
func opError(op, key string, err error) error {
	return fmt.Errorf("lock: %s %q: %w", op, key, err)
}
