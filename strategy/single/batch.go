package single

import (
	"context"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/drift"
	"github.com/locksmith-go/lock/strategy"
)

var _ strategy.Batcher = (*Strategy)(nil)

// Batches implements [strategy.Batcher]: a Strategy batches the refreshes
// of its auto-refreshed locks, unless [WithoutScripts], whose
// transactions take a round trip per command.
func (s *Strategy) Batches() bool { return !s.noScripts }

// RefreshBatch implements [strategy.Batcher]: one script refreshes every
// lock of the batch, or, over a Cluster client, one per hash slot (keys
// that share a hash tag share a script), up to cas.SlotWorkers at once.
// With [WithReplicas], each script is followed by WAIT, as Refresh's is,
// and a refresh that too few replicas acknowledged fails with a
// *ReplicaError.
func (s *Strategy) RefreshBatch(ctx context.Context, batch []strategy.Refresh) {
	keys := make([]string, len(batch))
	for i, r := range batch {
		keys[i] = r.Key
	}
	gs := s.groups(keys)
	cas.EachSlot(len(gs), func(i int) { s.refreshGroup(ctx, batch, gs[i]) })
}

// refreshGroup refreshes the locks of batch in g in one script, and sets
// their Grant and Err.
func (s *Strategy) refreshGroup(ctx context.Context, batch []strategy.Refresh, g group) {
	var keys, values []string
	var ttls []time.Duration
	var at []int
	for _, i := range g.at {
		d, err := drift.Allowance(batch[i].TTL, drift.DefaultFactor)
		batch[i].Grant, batch[i].Err = strategy.Grant{Drift: d}, err
		if err == nil {
			keys, values = append(keys, batch[i].Key), append(values, batch[i].Value)
			ttls, at = append(ttls, batch[i].TTL), append(at, i)
		}
	}
	if len(keys) == 0 {
		return
	}
	var errs []error
	write := func(c driver.Conn) (err error) {
		errs, err = cas.PExpireEach(ctx, c, keys, values, ttls)
		return err
	}
	var err error
	if s.ack.Replicas == 0 {
		err = write(s.conn)
	} else {
		err = cas.Acked(ctx, s.conn, keys[0], s.ack, write)
	}
	for j, i := range at {
		switch {
		case errs == nil:
			batch[i].Err = err // no answer
		case errs[j] != nil:
			batch[i].Err = errs[j]
		default:
			batch[i].Err = err // nil, or too few replicas acknowledged
		}
	}
}
