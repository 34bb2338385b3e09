package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/internal/wait"
	"github.com/locksmith-go/lock/strategy"
)

var (
	// ErrNotObtained means the lock is still held by another owner after
	// the attempts the retry policy allowed: an attempt of the Obtain found
	// it held. When the context ended the wait, the error also matches the
	// context's error and cause; when the last attempt got no answer, it
	// also matches ErrNoAnswer. An Obtain none of whose attempts found the
	// lock held never returns it.
	ErrNotObtained = strategy.ErrNotObtained

	// ErrNoAnswer means that Redis did not answer: a command was sent, or
	// on its way, and no reply came before the driver's timeout or the end
	// of the context, or its connection died (over TLS, also a handshake
	// that never finished). The command may have been applied. The error
	// of any call (Obtain, Inspect, Break, and the lock's Refresh, Release
	// and TTL) matches it then, and also the driver's error and, when the
	// context ended, the context's error and cause. An error reply, a
	// refused connection or a closed client are answers, and do not match
	// it.
	ErrNoAnswer = errors.New("lock: Redis did not answer")

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

	// ErrBroken means the key is gone because [Locker.Break] deleted it: a
	// Refresh, Release or TTL of the broken holder, or its auto-refresh,
	// finds the mark the Break left beside the key. It matches ErrExpired
	// and ErrNotHeld. A holder that finds its key gone before the mark is
	// written, or after it expired (with the lock's TTL), or where the
	// mark could not be written, reports ErrExpired; so does the holder of
	// a setnx-getset lock, whose value, a timestamp, is not its own.
	ErrBroken = strategy.ErrBroken

	// ErrMismatch means that Obtain asked for a lock of another shape than
	// the one its key holds: a semaphore whose limit differs from the one
	// its holders stated ([WithPermits]), a read-write lock's key asked
	// for as a semaphore or the reverse, a plain lock's key asked for as a
	// shared lock, or a shared lock's key as a plain lock. Nothing is
	// written.
	ErrMismatch = strategy.ErrMismatch

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

	// ErrClosed is the error of a call on a Locker that was closed
	// ([Locker.Close]), and what the errors of a config.Open Locker's locks
	// match once its clients are closed.
	ErrClosed = errors.New("lock: locker closed")

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

// KeyError is the error of one key of a lock of several keys
// ([Locker.ObtainMany]): the key (Key) and what was found there (Err,
// matching ErrNotObtained, ErrExpired or ErrTaken). A Release or Refresh
// that found several keys gone or taken joins one KeyError per key. Match
// it with errors.As.
type KeyError = strategy.KeyError

// KeyErrors returns every *KeyError in err's tree: each key of a lock of
// several keys that a call found held, gone or taken, where errors.As
// finds only the first. It returns nil if there are none.
func KeyErrors(err error) []*KeyError { return strategy.KeyErrors(err) }

// opError wraps err, the Redis or transport error of op on key, with the
// operation and key. When op got no answer (see unanswered), the error
// says so, and matches ErrNoAnswer and ctx's errors too.
func opError(ctx context.Context, op, key string, err error) error {
	if errors.As(err, new(*callError)) {
		return err // ours already: see notSent
	}
	if !unanswered(ctx, err) {
		return fmt.Errorf("lock: %s %q: %w", op, key, err)
	}
	return noAnswer(ctx, fmt.Sprintf("lock: %s %q: ", op, key), err)
}

// unanswered reports whether a call that failed with err got no answer:
// err is a timeout or a dead connection (neterr.Unanswered), or the
// context ended first. A call whose context was done before it began is
// not sent (see notSent).
func unanswered(ctx context.Context, err error) bool {
	return wait.Over(ctx) || neterr.Unanswered(err) || errors.Is(err, context.Canceled)
}

// noAnswer returns the error of a call that got no answer, err: its
// message is prefix ("lock: obtain \"k\": ", for example), "Redis did not
// answer: ", err's, and ctx's errors once ctx ended. It matches others
// (ErrNotObtained, when an attempt found the lock held), ErrNoAnswer, err,
// and ctx's errors.
func noAnswer(ctx context.Context, prefix string, err error, others ...error) error {
	ends := ended(ctx, err)
	msg := prefix + "Redis did not answer: " + err.Error()
	if len(ends) > 0 {
		texts := make([]string, len(ends))
		for i, e := range ends {
			texts[i] = e.Error()
		}
		msg += " (" + strings.Join(texts, ": ") + ")"
	}
	return &callError{msg: msg, errs: slices.Concat(others, []error{ErrNoAnswer, err}, ends)}
}

// ended returns what says that ctx ended, if it did (wait.Over): its error
// (context.DeadlineExceeded when its deadline passed and its timer has not
// fired yet), and its cause when that differs; err's own are left out.
func ended(ctx context.Context, err error) []error {
	if !wait.Over(ctx) {
		return nil
	}
	var ends []error
	cerr := ctx.Err()
	if cerr == nil {
		cerr = context.DeadlineExceeded
	}
	for _, e := range []error{cerr, context.Cause(ctx)} {
		if e != nil && (err == nil || !errors.Is(err, e)) && (len(ends) == 0 || ends[0] != e) {
			ends = append(ends, e)
		}
	}
	return ends
}

// notSent is the error of op on key, whose ctx was done before it began:
// nothing was sent. It matches ctx's errors.
func notSent(ctx context.Context, op, key string) error {
	return &callError{msg: fmt.Sprintf("lock: %s %q: %v", op, key, context.Cause(ctx)), errs: ended(ctx, nil)}
}

// callError is an error that matches several (errs), with a message of
// its own.
type callError struct {
	msg  string
	errs []error
}

func (e *callError) Error() string   { return e.msg }
func (e *callError) Unwrap() []error { return e.errs }
