package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/locksmith-go/lock/strategy"
)

// NotObtainedError is the error of an Obtain or ObtainMany that found the
// lock held and gave up: its retry policy allowed no further attempt, or
// its context ended (the error then matches the context's errors too). It
// matches [ErrNotObtained], and names the lock and what the Obtain last
// read of its holder:
//
//	lock: not obtained: "report:daily" held by web-3 pid=4121 for 2.1s (4 waiting)
//
// A lock of several keys is named by its keys, the first few of them,
// and the one found held.
type NotObtainedError struct {
	Keys []string // the lock's key, or the keys of a lock of several keys
	Key  string   // the key found held: Keys[0], or one of several keys

	// Holder is what a read of Key (as [Locker.Inspect] reads it) found
	// after an attempt that found the key held: the holder's fingerprint,
	// metadata, how long it has held the lock (HeldFor), the time it has
	// left (TTL), the waiters, and the holder's trace context. An Obtain
	// reads it when its retry policy gives up, and, with an Attempt hook
	// set (see Hooks), at each holder it meets. Holder.Held is false when
	// no read was made (a wait that its context ended, with no Attempt
	// hook), when the read failed, or when it found the key already free.
	Holder State

	err error // the strategy's
}

// Error says which lock was held, and by whom.
func (e *NotObtainedError) Error() string {
	var b strings.Builder
	b.WriteString("lock: not obtained: ")
	b.WriteString(quoteKeys(e.Keys))
	if len(e.Keys) > 1 {
		b.WriteString(": ")
		b.WriteString(strconv.Quote(e.Key))
	}
	b.WriteString(" held by ")
	b.WriteString(holderText(e.Holder))
	return b.String()
}

// Unwrap returns the strategy's error, which matches ErrNotObtained.
func (e *NotObtainedError) Unwrap() error { return e.err }

// shownKeys is how many keys of a lock of several keys an error quotes.
const shownKeys = 3

// quoteKeys quotes keys, the first shownKeys of them and how many more.
func quoteKeys(keys []string) string {
	quoted := make([]string, 0, min(len(keys), shownKeys))
	for _, k := range keys[:min(len(keys), shownKeys)] {
		quoted = append(quoted, strconv.Quote(k))
	}
	s := strings.Join(quoted, ", ")
	if n := len(keys) - shownKeys; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}

// holderText names the holder of st, a lock found held, for an error:
// by its metadata, or its fingerprint, then how long it has held the lock
// and how many wait.
func holderText(st State) string {
	switch {
	case !st.Held && st.Waiters > 0: // freed, and passed on to the head of the queue
		return fmt.Sprintf("the next of %d waiting", st.Waiters)
	case !st.Held:
		return "another owner"
	}
	var s string
	switch {
	case st.Permits > 0 || st.ReadWrite && st.Fingerprint == "":
		s = fmt.Sprintf("%d holders", len(st.Holders))
		if st.Permits > 0 {
			s += fmt.Sprintf(" of %d permits", st.Permits)
		}
	case st.Metadata != "":
		s = st.Metadata
		if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
			s = strconv.Quote(s)
		}
	default:
		s = "holder " + st.Fingerprint
	}
	if st.HeldFor > 0 {
		s += " for " + roughly(st.HeldFor).String()
	}
	if st.Waiters > 0 {
		s += fmt.Sprintf(" (%d waiting)", st.Waiters)
	}
	return s
}

// roughly rounds d for people: to the millisecond below a second, to a
// tenth of a second below a minute, and to the second above.
func roughly(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// holderRead bounds the read of a holder that refused an attempt: it only
// informs, and must not hold up the wait. holderAgain is how long a
// sighting that tells no lease (the read failed, or found a key without
// expiry) stands.
const (
	holderRead  = time.Second
	holderAgain = 5 * time.Second
)

// sighting is what an Obtain last read of the holder of the key that
// refused it.
type sighting struct {
	key  string
	st   State
	at   time.Time // when st was read
	next time.Time // when to read again; zero: at the next refusal
}

// refused returns the error of an attempt of r that s refused with err,
// which matches ErrNotObtained: a *NotObtainedError with what is known of
// the holder. The holder is known, for free, when the strategy read it in
// the same round trip (Grant.Holder, here known). Otherwise, when read,
// it reads the holder again, with s.Inspect, if this Obtain has not read
// the holder of that key yet, or its holder may have changed since: the
// lease it read has run out, or the waiter was woken by a release (see
// forget). So a waiter by notification reads each holder once; one that
// polls, once per holder's lease. The Obtain asks for a read when an
// Attempt hook records each refusal, and when this refusal ends it;
// otherwise a waiter that goes on to obtain the lock costs no read at all.
func (seen *sighting) refused(ctx context.Context, s strategy.Strategy, r strategy.Request, known *State, err error, read bool) error {
	key := r.Key
	if ke := (*KeyError)(nil); errors.As(err, &ke) {
		key = ke.Key
	}
	switch now := time.Now(); {
	case known != nil:
		seen.saw(key, *known, nil, now)
	case read && (seen.key != key || !now.Before(seen.next)):
		rctx, cancel := context.WithTimeout(ctx, holderRead)
		st, rerr := s.Inspect(rctx, key)
		cancel()
		seen.saw(key, st, rerr, now)
	}
	e := &NotObtainedError{Keys: r.Keys, Key: key, err: err}
	if seen.key == key {
		e.Holder = seen.st
	}
	if e.Keys == nil {
		e.Keys = []string{r.Key}
	}
	if since := time.Since(seen.at); e.Holder.Held {
		if e.Holder.HeldFor > 0 {
			e.Holder.HeldFor += since
		}
		if e.Holder.TTL > 0 {
			e.Holder.TTL = max(e.Holder.TTL-since, time.Millisecond)
		}
	}
	return e
}

// saw records st, the holder of key that was read at now, or the error of
// that read, rerr, and when to read it again.
func (seen *sighting) saw(key string, st State, rerr error, now time.Time) {
	if rerr != nil {
		st = State{}
	}
	unstamp(&st)
	*seen = sighting{key: key, st: st, at: now, next: now.Add(holderAgain)}
	switch {
	case st.Held && st.TTL > 0:
		seen.next = now.Add(st.TTL)
	case rerr == nil && !st.Held: // freed since, or passed on to a waiter: whoever holds it next is read next time
		seen.next = now
	}
}

// forget makes the next refusal read the holder again: a release woke
// the waiter, so whoever holds the lock now is another.
func (seen *sighting) forget() { seen.next = time.Time{} }
