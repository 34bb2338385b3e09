package strategy

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Multi is an optional interface of a [Strategy] that locks several keys as
// one lock (lock.Locker.ObtainMany), with one value: every key, or none.
//
// The lock package guarantees that there are at least two keys, each
// non-empty, sorted and distinct, and no more than lock.MaxKeys; the
// guarantees of Strategy hold too. An error about one key is a [*KeyError]
// that names it and wraps ErrNotObtained (AcquireKeys: the key found held),
// or ErrExpired or ErrTaken (the others: each key found gone or taken,
// joined with errors.Join), so that errors.Is and errors.As see through it.
type Multi interface {
	// AcquireKeys makes one attempt to lock every key of r.Keys (r.Key is
	// the first) with r.Value(): all of them or none. It reports a key
	// found held, and a failed attempt's clean-up, as Acquire does; the
	// Locker's clean-up calls ReleaseKeys. With r.Fencing it issues one
	// fencing token per key, in Grant.Fences, in the order of r.Keys.
	AcquireKeys(ctx context.Context, r Request) (Grant, error)
	// RefreshKeys resets the expiry of every key to ttl if every key still
	// holds value, and of none otherwise.
	RefreshKeys(ctx context.Context, keys []string, value string, ttl time.Duration) (Grant, error)
	// ReleaseKeys deletes each key that still holds value, and reports
	// each that did not.
	ReleaseKeys(ctx context.Context, keys []string, value string) error
	// TTLKeys returns the least remaining time to live of keys, if every
	// key still holds value.
	TTLKeys(ctx context.Context, keys []string, value string) (time.Duration, error)
}

// KeyError is the error of one key of a multi-key lock ([Multi]): the key
// found held by another owner, gone, or taken. Keys are not secrets; the
// message names the key, never a token.
type KeyError struct {
	Key string // the key
	Err error  // what was found: ErrNotObtained, ErrExpired or ErrTaken
}

// Error returns the key and what was found.
func (e *KeyError) Error() string { return fmt.Sprintf("key %q: %v", e.Key, e.Err) }

// Unwrap returns Err.
func (e *KeyError) Unwrap() error { return e.Err }

// KeyErrors returns every *KeyError in err's tree, in the order
// [errors.As] would visit them, without looking inside them: the keys a
// lock of several keys found held, gone or taken. It returns nil if there
// are none.
func KeyErrors(err error) []*KeyError {
	var found []*KeyError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *KeyError:
			found = append(found, e)
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		default:
			walk(errors.Unwrap(err))
		}
	}
	walk(err)
	return found
}
