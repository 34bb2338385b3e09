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
	// [WithMaxRefreshes] allows, or is as old as [WithMaxHold] allows. The
	// lock is still held until its TTL ends.
	ErrRefreshLimit = errors.New("lock: refresh limit reached")

	// ErrLapsed means the lock's local validity deadline ([Lock.ValidUntil])
	// passed before a refresh confirmed it, while the lock was watched (see
	// [Lock.Done]). The key may still be in Redis, but the holder can no
	// longer count on it. It matches ErrNotHeld; when a limit
	// ([WithMaxRefreshes], [WithMaxHold]) stopped the refreshes, it also
	// matches ErrRefreshLimit.
	ErrLapsed = fmt.Errorf("%w: validity lapsed before a refresh confirmed it", ErrNotHeld)

	// ErrLost is matched by the error of [Do] when the lock was lost before
	// fn returned, or found gone by the release after it. That error also
	// matches the cause (ErrExpired, ErrTaken or ErrLapsed, all matching
	// ErrNotHeld). fn's own errors never match it, unless fn returns it.
	ErrLost = errors.New("lock: lost")

	// ErrInvalidArgument is matched by every [*ArgumentError].
	ErrInvalidArgument = errors.New("lock: invalid argument")

	errReleased = fmt.Errorf("%w: already released", ErrNotHeld)

	// errHoldLimit refuses a refresh once WithMaxHold's time is spent, and
	// errLapsedAtLimit is the loss of a lock whose refreshes a limit stopped.
	errHoldLimit     = fmt.Errorf("%w: the hold time of WithMaxHold is spent", ErrRefreshLimit)
	errLapsedAtLimit = fmt.Errorf("%w: %w", ErrLapsed, ErrRefreshLimit)
)

// ArgumentError reports an invalid argument or option, by name. It matches
// ErrInvalidArgument.
type ArgumentError struct {
	Name   string // the argument or option, for example "key" or "ttl"
	Reason string // what is wrong, and what is allowed
}

// Error returns "lock: invalid <Name>: <Reason>".
func (e *ArgumentError) Error() string {
	return "lock: invalid " + e.Name + ": " + e.Reason
}

// Is reports whether target is ErrInvalidArgument.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// opError wraps a Redis or transport error with the operation and key.
func opError(op, key string, err error) error {
	return fmt.Errorf("lock: %s %q: %w", op, key, err)
}
