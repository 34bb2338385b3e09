package setnxgetset

import (
	"context"
	"slices"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

var _ strategy.Batcher = (*legacy)(nil)

// Batches implements [strategy.Batcher]: a Strategy batches the refreshes
// of its auto-refreshed locks, with scripts or without.
func (s *legacy) Batches() bool { return true }

// RefreshBatch implements [strategy.Batcher]: Refresh for every lock of the
// batch, in one script (cas.SetBatch), or one per hash slot over a Cluster
// client, one per cas.PerScript locks of a larger group, all in one round
// trip over a driver that pipelines (driver.Pipeliner); without scripts,
// a transaction instead of each script, as single's does. Each lock's key gets a new
// timestamp, as Refresh writes, if it holds the lock's value, or one that
// an earlier refresh whose reply was lost may have written (strategy.Refresh's
// Unsure); Grant.Value is the new timestamp, also when the call got no
// answer.
func (s *legacy) RefreshBatch(ctx context.Context, batch []strategy.Refresh) {
	now := s.now()
	var keys, values, nexts []string
	var unsures [][]string
	var ttls []time.Duration
	var at []int
	for i, r := range batch {
		next, err := s.next(r.TTL, now)
		switch {
		case err != nil:
			batch[i].Err = err
		case s.expired(r.Value) && !slices.ContainsFunc(r.Unsure, func(v string) bool { return !s.expired(v) }):
			batch[i].Err = strategy.ErrExpired
		default:
			batch[i].Grant = s.grant(next)
			keys, values, unsures = append(keys, r.Key), append(values, r.Value), append(unsures, r.Unsure)
			nexts = append(nexts, next)
			ttls, at = append(ttls, s.safetyTTL(next, now)), append(at, i)
		}
	}
	sub, ok := s.conn.(driver.Subscriber)
	gs := cas.Groups(keys, ok && sub.Sharded())
	errs, answered := s.srv.Batch(ctx, cas.SetBatch(keys, values, unsures, nexts, ttls, gs), cas.Ack{})
	for j, i := range at {
		if errs[j] != nil && answered[j] {
			batch[i].Grant = strategy.Grant{} // answered: nothing was written
		}
		batch[i].Err = errs[j] // without an answer, Grant.Value is what may have landed
	}
}

// next returns the timestamp that a refresh of ttl at now writes, or why
// Refresh would refuse ttl.
func (s *legacy) next(ttl time.Duration, now time.Time) (string, error) {
	if err := s.checkTTL(ttl); err != nil {
		return "", err
	}
	return s.encode(now, ttl)
}
