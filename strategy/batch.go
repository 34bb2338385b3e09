package strategy

import (
	"context"
	"time"
)

// Batcher is an optional interface of a [Strategy] that refreshes many
// locks in few round trips: one script per server, or per Cluster hash
// slot, that carries every lock's key, value and TTL, and replies per
// lock. The Locker refreshes the locks that it refreshes in the background
// (lock.Lock.StartRefresh, lock.Do) through it, in batches, instead of one
// Refresh per lock. See the repository's docs/design/batched-refresh.md.
type Batcher interface {
	// Batches reports whether RefreshBatch batches: false when the
	// Strategy's configuration has no batched form (the Locker then
	// refreshes each lock with Refresh).
	Batches() bool
	// RefreshBatch does for each lock of batch what Refresh would, and
	// sets its Grant and Err as Refresh would return them: one lock's
	// failure is its own, and a call that got no answer gives each lock
	// it carried that error. The lock package guarantees that keys are
	// distinct and that there is at least one lock. A strategy whose
	// Refresh replaces the value (Grant.Value) takes a lock's Unsure
	// values for its own too; so does a [Relabeler], which reports in
	// Grant.Value the Unsure value that the key held, when not Value.
	RefreshBatch(ctx context.Context, batch []Refresh)
}

// Refresh is one lock of a batch ([Batcher]): what to refresh, and, once
// RefreshBatch returns, how it went.
type Refresh struct {
	Key   string        // the lock's key
	Value string        // the value it is held under
	TTL   time.Duration // the TTL to reset its expiry to
	// Unsure holds the values that earlier refreshes or relabels, whose
	// replies were lost, may have written in Value's place (see Strategy's
	// Refresh, and [Relabeler]), oldest first: the lock is held under any
	// of them, or Value. Only a strategy whose Refresh replaces the value,
	// or a Relabeler, ever sees one.
	Unsure []string

	Grant Grant // as Strategy.Refresh would return it
	Err   error // as Strategy.Refresh would return it
}
