package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/locksmith-go/lock/strategy"
)

// listPage is the COUNT of List's SCAN calls: how many keys of the
// keyspace each walks.
const listPage = 1000

// Listed is a lock that [Locker.List] found held: its key, and its State,
// as [Locker.Inspect] reads it.
type Listed struct {
	Key   string // the lock's key
	State State  // what Inspect read of it
}

// List returns the locks held under prefix (the keys that start with it;
// every key when it is ""), sorted by key, at most limit of them: each
// with its State, as [Locker.Inspect] reads it (holder, metadata, held
// for, TTL left, waiters). It skips the keys that are free by the time it
// reads them, those of another type, and the strategy's own keys beside
// its locks (queues, fencing counters: see each strategy's List). A limit
// below 1 gives an [*ArgumentError] named "limit".
//
// Its cost: SCAN walks the whole keyspace of every server that holds locks
// (every master of a Redis Cluster; Redlock's nodes until N − quorum + 1
// answered), 1000 keys a call (COUNT 1000), whatever the prefix, which
// only filters what each call returns (MATCH); then one inspection (one
// round trip) per key under the prefix, in turn. Each call is short, so
// the servers go on serving locks meanwhile. It keeps in memory the keys
// under the prefix that it read, to skip those that SCAN returns twice.
// The limit bounds what it returns and how long it runs on a busy prefix:
// it stops once it found limit held locks, so a result of limit locks may
// leave others out. (A limit, not a callback: a caller such as locksmith
// top sorts the whole listing, and one number bounds its memory and its
// time alike.) A listing is not a snapshot: a lock taken or released
// during it may be left out, or listed. A string key under the prefix
// that is no lock, another application's, reads as one: choose a prefix
// of locks alone.
//
// State.Waited is how long the head of the lock's queue, its longest
// waiter, has waited, by the server's clock (single, whose queue records
// when each waiter joined); zero where there is no queue, or none waits.
//
// When Redis fails, List returns what it found until then, with the error
// (wrapped with the operation's name, "list", or, for a key's inspection,
// "inspect"). A strategy that cannot list (see [strategy.Lister]; a
// driver that cannot send SCAN, or pin a connection to each master of a
// Cluster) gives an error matching errors.ErrUnsupported.
//
// Of the options, only [WithHooks] applies, to each key's inspection, as
// to Inspect's.
func (l *Locker) List(ctx context.Context, prefix string, limit int, opts ...Option) ([]Listed, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, &ArgumentError{Name: "limit", Reason: fmt.Sprintf("must be at least 1, got %d", limit)}
	}
	lister, ok := l.s.(strategy.Lister)
	if !ok {
		name, _ := describe(l.s)
		return nil, fmt.Errorf("lock: list %q: the %s strategy cannot list locks: %w", prefix, name, errors.ErrUnsupported)
	}
	if _, err := l.options(opts); err != nil {
		return nil, err
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.life.bg.Done()
	var (
		held    []Listed
		seen    = map[string]bool{}
		readErr error
	)
	err := lister.List(ctx, prefix, listPage, func(key string) bool {
		if seen[key] {
			return true
		}
		seen[key] = true
		st, err := l.read(ctx, "inspect", key, opts, l.s.Inspect)
		switch {
		case err != nil && otherKind(err):
		case err != nil:
			readErr = err
			return false
		case st.Held:
			held = append(held, Listed{key, st})
		}
		return len(held) < limit
	})
	slices.SortFunc(held, func(a, b Listed) int { return strings.Compare(a.Key, b.Key) })
	switch {
	case readErr != nil:
		return held, readErr
	case err != nil:
		return held, opError(ctx, "list", prefix, err)
	}
	return held, nil
}

// otherKind reports whether err, an inspection's, says the key holds no
// lock of the strategy: a key of another type.
func otherKind(err error) bool {
	return errors.Is(err, ErrMismatch) || strings.Contains(err.Error(), "WRONGTYPE")
}
