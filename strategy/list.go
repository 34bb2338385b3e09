package strategy

import "context"

// Lister is an optional interface of a [Strategy] that can find the keys
// of its locks, for lock.Locker.List.
type Lister interface {
	// List calls yield with each key that starts with prefix and may hold
	// one of the strategy's locks, until yield returns false or the keys
	// run out. It SCANs count keys a call (SCAN's COUNT): the keys of
	// every server that holds locks (every master of a Cluster; for a
	// multi-node strategy, enough nodes that a key that a quorum holds is
	// on one of them), and skips the keys that the strategy keeps beside
	// its locks (queues, fencing counters). It reads no value: a key it
	// yields may be free by the time the caller inspects it, and it may
	// yield a key more than once, as SCAN may. A strategy that cannot
	// scan returns an error matching errors.ErrUnsupported.
	List(ctx context.Context, prefix string, count int, yield func(key string) bool) error
}
