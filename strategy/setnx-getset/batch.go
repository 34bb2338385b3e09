package setnxgetset

import (
	"context"
	"slices"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

var _ strategy.Batcher = (*Strategy)(nil)

// Batches implements [strategy.Batcher]: a Strategy batches the refreshes
// of its auto-refreshed locks, unless [WithoutScripts], whose transactions
// take several round trips per lock.
func (s *Strategy) Batches() bool { return !s.plain }

// RefreshBatch implements [strategy.Batcher]: Refresh for every lock of the
// batch, in one script (cas.SetEach), or one per hash slot over a Cluster
// client, up to cas.SlotWorkers at once. Each lock's key gets a new
// timestamp, as Refresh writes, if it holds the lock's value, or one that
// an earlier refresh whose reply was lost may have written (strategy.Refresh's
// Unsure); Grant.Value is the new timestamp, also when the call got no
// answer.
func (s *Strategy) RefreshBatch(ctx context.Context, batch []strategy.Refresh) {
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
	gs := [][]int{indexes(len(keys))}
	if sub, ok := s.conn.(driver.Subscriber); ok && sub.Sharded() {
		gs = cas.SlotGroups(keys)
	}
	cas.EachSlot(len(gs), func(g int) {
		errs, err := cas.SetEach(ctx, s.conn, pick(keys, gs[g]), pick(values, gs[g]), pick(unsures, gs[g]), pick(nexts, gs[g]), pick(ttls, gs[g]))
		for k, j := range gs[g] {
			i := at[j]
			switch {
			case errs == nil:
				batch[i].Err = err // no answer: Grant.Value is what may have landed
			case errs[k] != nil:
				batch[i].Grant, batch[i].Err = strategy.Grant{}, errs[k]
			}
		}
	})
}

// pick returns all's elements at indexes.
func pick[T any](all []T, indexes []int) []T {
	out := make([]T, len(indexes))
	for k, j := range indexes {
		out[k] = all[j]
	}
	return out
}

// next returns the timestamp that a refresh of ttl at now writes, or why
// Refresh would refuse ttl.
func (s *Strategy) next(ttl time.Duration, now time.Time) (string, error) {
	if err := s.checkTTL(ttl); err != nil {
		return "", err
	}
	return s.encode(now, ttl)
}

// indexes returns 0 to n-1.
func indexes(n int) []int {
	at := make([]int, n)
	for i := range at {
		at[i] = i
	}
	return at
}
