package lock

import (
	"errors"
	"fmt"

	"github.com/locksmith-go/lock/strategy"
)

var (
	// ErrNotObtained means the lock is still held by another owner after
	// the attempts the retry policy allowed. When the context ended the
	// wait, the error also matches the context's cause.
	ErrNotObtained = strategy.ErrNotObtained

	// ErrNotHeld means a Refresh, Release or TTL found that the lock is no
	// longer ours. ErrExpired and ErrTaken match it and say why, where the
	// server can tell.
	ErrNotHeld = strategy.ErrNotHeld

	// ErrExpired means the key is gone: the lock expired (or was deleted)
	// and nobody holds it now. It matches ErrNotHeld.
	ErrExpired = strategy.ErrExpired

	// ErrTaken means the key is held by another owner. It matches
	// ErrNotHeld.
	ErrTaken = strategy.ErrTaken

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

	errReleased = fmt.Errorf("%w: already released", ErrNotHeld)

	// errHoldLimit refuses a refresh once WithMaxHold's time is spent, and
	// errLapsedAtLimit is the loss of a lock whose refreshes a limit stopped.
	errHoldLimit     = fmt.Errorf("%w: the hold time of WithMaxHold is spent", ErrRefreshLimit)
	errLapsedAtLimit = fmt.Errorf("%w: %w", ErrLapsed, ErrRefreshLimit)
)

// ArgumentError reports an invalid argument or option, by name: the
// argument at fault (Name, such as "key" or "ttl") and what is wrong with it
// (Reason). Match it with errors.As. Its Error method returns
// "lock: invalid <Name>: <Reason>".
type ArgumentError = strategy.ArgumentError

// opError wraps a Redis or transport error with the operation and key.
func opError(op, key string, err error) error {
	return fmt.Errorf("lock: %s %q: %w", op, key, err)
}
