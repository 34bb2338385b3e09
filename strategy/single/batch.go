package single

import (
	"context"
	"errors"
	"time"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/drift"
	"github.com/locksmith-go/lock/strategy"
)

var _ strategy.Batcher = (*single)(nil)

// Batches implements [strategy.Batcher]: a Strategy batches the refreshes
// of its auto-refreshed locks, with scripts or without.
func (s *single) Batches() bool { return true }

// RefreshBatch implements [strategy.Batcher]: one script refreshes the
// locks of the batch, or, over a Cluster client, one per hash slot (keys
// that share a hash tag share a script), each carrying at most
// cas.PerScript locks; a driver that pipelines (driver.Pipeliner) sends
// them all in one round trip, to each server. Without scripts, each
// script is a transaction instead: WATCH and GET of its keys, then
// MULTI, a PEXPIRE for each key that holds its lock's value, and EXEC,
// in two round trips. With [WithReplicas], each script or transaction is
// followed by WAIT, as Refresh's is, and a refresh that too few replicas
// acknowledged fails with a *ReplicaError. A lock with Unsure values (a
// Relabel's whose reply was lost) is refreshed on its own, after the
// batch: Refresh with its Value, then with each Unsure value, newest
// first, while the key is taken; Grant.Value is the one the key held.
func (s *single) RefreshBatch(ctx context.Context, batch []strategy.Refresh) {
	var keys, values []string
	var ttls []time.Duration
	var at, alone []int
	for i, r := range batch {
		d, err := drift.Allowance(r.TTL, drift.DefaultFactor)
		batch[i].Grant, batch[i].Err = strategy.Grant{Drift: d}, err
		switch {
		case err != nil:
		case len(r.Unsure) > 0:
			alone = append(alone, i)
		default:
			keys, values = append(keys, r.Key), append(values, r.Value)
			ttls, at = append(ttls, r.TTL), append(at, i)
		}
	}
	if len(keys) > 0 {
		b := cas.PExpireBatch(keys, values, ttls, cas.Groups(keys, s.sharded))
		errs, _ := s.srv.Batch(ctx, b, s.ack)
		for j, i := range at {
			batch[i].Err = errs[j]
		}
	}
	for _, i := range alone {
		batch[i].Grant, batch[i].Err = s.refreshUnsure(ctx, batch[i])
	}
}

// refreshUnsure refreshes r's lock, held under r.Value or one of r.Unsure,
// as RefreshBatch says.
func (s *single) refreshUnsure(ctx context.Context, r strategy.Refresh) (strategy.Grant, error) {
	g, err := s.Refresh(ctx, r.Key, r.Value, r.TTL)
	for i := len(r.Unsure) - 1; i >= 0 && errors.Is(err, strategy.ErrTaken); i-- {
		if g, err = s.Refresh(ctx, r.Key, r.Unsure[i], r.TTL); err == nil {
			g.Value = r.Unsure[i]
		}
	}
	return g, err
}
