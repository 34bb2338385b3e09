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
	var keys, values []string
	var ttls []time.Duration
	var at []int
	for i, r := range batch {
		d, err := drift.Allowance(r.TTL, drift.DefaultFactor)
		batch[i].Grant, batch[i].Err = strategy.Grant{Drift: d}, err
		if err == nil {
			keys, values = append(keys, r.Key), append(values, r.Value)
			ttls, at = append(ttls, r.TTL), append(at, i)
		}
	}
	errs, _ := cas.Scatter(len(keys), cas.Groups(keys, s.sharded), func(g []int) (es []error, err error) {
		write := func(c driver.Conn) (err error) {
			es, err = cas.PExpireEach(ctx, c, cas.Pick(keys, g), cas.Pick(values, g), cas.Pick(ttls, g))
			return err
		}
		if s.ack.Replicas == 0 {
			err = write(s.conn)
		} else {
			// A *ReplicaError after es: the error of each lock extended.
			err = cas.Acked(ctx, s.conn, keys[g[0]], s.ack, write)
		}
		return es, err
	})
	for j, i := range at {
		batch[i].Err = errs[j]
	}
}
