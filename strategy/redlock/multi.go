package redlock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/strategy"
)

var _ strategy.Multi = (*redlock)(nil)

// AcquireKeys implements [strategy.Multi]: Acquire's attempt, in which each
// node takes every key or none, in one script, and the quorum counts the
// nodes that took all of them; the validity is the same for every key, as
// they share the attempt's TTL and elapsed time. A failed attempt deletes
// the keys on each node that took them. When no quorum is reached and some
// nodes found a key held, the *QuorumError is wrapped in a
// *strategy.KeyError that names the key the most nodes found held.
//
// It refuses, with an *strategy.ArgumentError named "keys", nodes marked
// driver.WithoutScripts, and keys in several
// hash slots over a node that is a Cluster client, before anything is
// written.
func (s *redlock) AcquireKeys(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	if slices.Contains(s.plain, true) {
		return strategy.Grant{Undone: true}, &strategy.ArgumentError{Name: "keys", Reason: "not supported with nodes marked driver.WithoutScripts: " +
			"several keys as one lock are taken on each node in one script, all or none", Err: errors.ErrUnsupported}
	}
	if s.sharded() && slices.ContainsFunc(r.Keys, func(k string) bool { return cas.Slot(k) != cas.Slot(r.Key) }) {
		return strategy.Grant{Undone: true}, &strategy.ArgumentError{Name: "keys", Reason: "must be in one hash slot " +
			"(give them one hash tag) over a node that is a Cluster client: each node takes every key in one script"}
	}
	return s.acquire(ctx, r, cas.Lock{Key: r.Key, Keys: r.Keys, Value: r.Value(), TTL: r.TTL})
}

// sharded reports whether a node is a Cluster client: one whose channels
// are shard channels.
func (s *redlock) sharded() bool {
	return slices.ContainsFunc(s.nodes, func(n node) bool { return n.wake == notify.SPublish })
}

// RefreshKeys implements [strategy.Multi]: Refresh's, in which each node
// extends every key or none, and the quorum counts the nodes that extended
// all of them. When so many nodes found a key gone or taken that no
// quorum can hold the lock, the error names the keys that the most nodes
// found so (a *strategy.KeyError each, joined), and the lock is deleted,
// in the background, from the nodes that extended every key.
func (s *redlock) RefreshKeys(ctx context.Context, keys []string, value string, ttl time.Duration) (strategy.Grant, error) {
	return s.refresh(ctx, holding{keys[0], keys, value}, ttl)
}

// ReleaseKeys implements [strategy.Multi]: Release's, in which each node
// deletes each key that holds value, and publishes on each key's channel
// to wake its waiters. A node that found a key gone or taken counts as not
// holding the lock; when so many did that no quorum held it, the error
// names the keys that the most nodes found so, as RefreshKeys's does.
func (s *redlock) ReleaseKeys(ctx context.Context, keys []string, value string) error {
	return s.release(ctx, keys[0], keys, value)
}

// TTLKeys implements [strategy.Multi]: TTL's, over the least TTL of the
// keys on each node that holds every key, with RefreshKeys's errors.
func (s *redlock) TTLKeys(ctx context.Context, keys []string, value string) (time.Duration, error) {
	return s.ttl(ctx, cas.PTTL(cas.Lock{Key: keys[0], Keys: keys, Value: value}))
}
