package single

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/drift"
	"github.com/locksmith-go/lock/strategy"
)

var _ strategy.Multi = (*single)(nil)

// group is the keys of a lock of several keys that one script (or, with
// without scripts, one transaction) takes: all of them, or, on a Cluster,
// those of one hash slot.
type group struct {
	keys []string
	at   []int // the index of each key among the lock's keys
}

// groups returns the groups of keys, in the order they are taken: one with
// every key, or, over a Cluster client, one per hash slot, by slot, each
// with its keys in their order. A standalone server takes keys of any slot
// in one script; a Cluster refuses a script whose keys span slots.
func (s *single) groups(keys []string) []group {
	var gs []group
	for _, at := range cas.Groups(keys, s.sharded) {
		gs = append(gs, group{pick(keys, at), at})
	}
	return gs
}

// write runs f with the Strategy's server or, with [WithReplicas], with its
// operations over one connection to the master of g's keys, followed by
// WAIT.
func (s *single) write(ctx context.Context, g group, f func(cas.Server) error) error {
	if s.ack.Replicas == 0 {
		return f(s.srv)
	}
	return cas.Acked(ctx, s.conn, g.keys[0], s.ack, func(c driver.Conn) error {
		return f(s.srv.Over(c))
	})
}

// AcquireKeys implements [strategy.Multi], as the package doc says: one
// script takes every key or none, or, over a Cluster client with keys in
// several slots, one per slot, in the order of the slots, and when a slot
// finds a key held it deletes what the earlier slots took before it
// returns; without scripts, one transaction runs where a script would (see
// cas.Acquire). It refuses, with an [*strategy.ArgumentError], a TTL that
// the drift allowance uses up, and, with lock.WithFencing, a key that
// [FenceKey] refuses, before anything is written.
//
// A waiter (lock.Locker.ObtainMany waiting by notification) queues in the
// FIFO queues of the keys, in their order, one key at a time, keeping its
// place in the queues of the keys before the one it waits for: see
// docs/multi-key.md. Over a Cluster with keys in several slots, it
// reserves its places slot by slot, then takes the slots, one script each,
// and then leaves the queues: three scripts per slot for an attempt that
// obtains the lock. With a key that has no queue (a key with '}' but no
// hash tag), or without scripts, it polls.
func (s *single) AcquireKeys(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	d, err := drift.Allowance(r.TTL, drift.DefaultFactor)
	if err != nil {
		return strategy.Grant{Undone: true}, err
	}
	grant := strategy.Grant{Drift: d}
	var fenceKeys []string
	if r.Fencing {
		fenceKeys, grant.Fences = make([]string, len(r.Keys)), make([]int64, len(r.Keys))
		for i, k := range r.Keys {
			if fenceKeys[i], err = FenceKey(k); err != nil {
				return strategy.Grant{Undone: true}, err
			}
		}
	}
	value := r.Value()
	gs := s.groups(r.Keys)
	if ok := s.queuesOf(r); ok && len(gs) == 1 {
		return s.acquireQueued(ctx, r, gs[0], fenceKeys, grant)
	} else if ok {
		if g, ok, err := s.acquireSlots(ctx, r, gs, fenceKeys, grant); ok {
			return g, err
		}
	}
	ttl, life := r.TTL, s.fenceLife(r.TTL) // what the closure needs of r, which is too large for it to copy
	for i, g := range gs {
		var fences []int64
		var held time.Duration
		err := s.write(ctx, g, func(srv cas.Server) (err error) {
			res, err := srv.Run(ctx, cas.Acquire(cas.Lock{Key: g.keys[0], Keys: g.keys, Value: value, TTL: ttl, Fences: pick(fenceKeys, g.at), FenceTTL: life}))
			fences, held = res.Fences, res.HolderTTL
			return err
		})
		switch {
		case errors.Is(err, strategy.ErrNotObtained):
			return s.undo(ctx, gs[:i], value, strategy.Grant{HolderTTL: held}, err)
		case errors.As(err, new(*ReplicaError)):
			return s.undo(ctx, gs[:i+1], value, strategy.Grant{}, err)
		case err != nil:
			return strategy.Grant{}, err // the Locker deletes every key, in the background
		}
		for j, n := range fences {
			grant.Fences[g.at[j]] = n
		}
	}
	return grant, nil
}

// queuesOf reports whether r's waiter can queue in the queue of each key:
// it waits by notification, the Strategy's waiters queue (see queues), and
// every key has a queue (see cas.NewQueue). Otherwise the waiter polls.
func (s *single) queuesOf(r strategy.Request) bool {
	if r.Waiter == "" || !s.queues() {
		return false
	}
	for _, k := range r.Keys {
		if _, ok := s.queue(k); !ok {
			return false
		}
	}
	return true
}

// acquireQueued makes the attempt of r's waiter to take the keys of g,
// every key of r, with their queues (see cas.Acquire), into grant; where
// the server refuses scripts, without the queues.
func (s *single) acquireQueued(ctx context.Context, r strategy.Request, g group, fenceKeys []string, grant strategy.Grant) (strategy.Grant, error) {
	var fences []int64
	var e cas.Result
	l := cas.Lock{Key: r.Key, Keys: r.Keys, Value: r.Value(), TTL: r.TTL, Fences: fenceKeys, FenceTTL: s.fenceLife(r.TTL), Sharded: s.sharded,
		Waiter: cas.Waiter{ID: s.member(r.Waiter), Poll: r.Poll, Patience: r.Patience}}
	err := s.write(ctx, g, func(srv cas.Server) (err error) {
		e, err = srv.Run(ctx, cas.Acquire(l)) // unqueued where the server refuses scripts
		fences = e.Fences
		return err
	})
	switch {
	case errors.As(err, new(*strategy.KeyError)) && errors.Is(err, strategy.ErrNotObtained):
		return queued(grant, e, err, r.Keys[0]), err
	case errors.As(err, new(*ReplicaError)):
		return s.undo(ctx, []group{g}, r.Value(), strategy.Grant{}, err)
	case err != nil:
		return strategy.Grant{}, err
	}
	if r.Fencing {
		grant.Fences = fences
	}
	return grant, nil
}

// queued returns grant for a waiter that err, which names the key held,
// left queued: its place, and the queue it waits in. first is the key of
// the first queue it holds a place in.
func queued(grant strategy.Grant, e cas.Result, err error, first string) strategy.Grant {
	if held := (*strategy.KeyError)(nil); errors.As(err, &held) {
		grant.Position, grant.HolderTTL, grant.Queue, grant.Holder = e.Position, e.HolderTTL, held.Key, e.HolderState()
		if held.Key != first {
			grant.Position = 1 // it heads the queues of the keys before: it keeps them at the head's pace
		}
	}
	return grant
}

// undo deletes what an attempt took in gs, which ended with err, and
// returns g and err, with g.Undone set, when nothing is left behind. When
// the deletion fails, it returns its error, and the Locker deletes every key
// in the background.
func (s *single) undo(ctx context.Context, gs []group, value string, g strategy.Grant, err error) (strategy.Grant, error) {
	if len(gs) > 0 {
		if _, failed := s.release(ctx, gs, value); failed != nil {
			return strategy.Grant{}, fmt.Errorf("lock: %v, and undoing the keys taken before: %w", err, failed)
		}
	}
	g.Undone = true
	return g, err
}

// pick returns the elements of all at the indexes at, or nil when all is.
func pick(all []string, at []int) []string {
	if all == nil {
		return nil
	}
	picked := make([]string, len(at))
	for i, j := range at {
		picked[i] = all[j]
	}
	return picked
}

// RefreshKeys implements [strategy.Multi]: one script extends every key or
// none. Over a Cluster client with keys in several slots, each slot's keys
// are extended, all or none, by a script of their own: when one slot's
// fail, the others' are still extended, and the lock, reported lost, keeps
// those keys until it releases them or they expire.
func (s *single) RefreshKeys(ctx context.Context, keys []string, value string, ttl time.Duration) (strategy.Grant, error) {
	d, err := drift.Allowance(ttl, drift.DefaultFactor)
	if err != nil {
		return strategy.Grant{}, err
	}
	var errs []error
	for _, g := range s.groups(keys) {
		errs = append(errs, s.write(ctx, g, func(srv cas.Server) error {
			_, err := srv.Run(ctx, cas.PExpire(cas.Lock{Key: g.keys[0], Keys: g.keys, Value: value, TTL: ttl}))
			return err
		}))
	}
	return strategy.Grant{Drift: d}, errors.Join(errs...)
}

// ReleaseKeys implements [strategy.Multi]. It wakes the head of the queue of
// each key it deletes, as Release does. When a Cluster slot's keys could
// not be released (a transport error), it returns that error alone, rather
// than the keys found gone or taken, so that a clean-up tries again.
func (s *single) ReleaseKeys(ctx context.Context, keys []string, value string) error {
	lost, failed := s.release(ctx, s.groups(keys), value)
	if failed != nil {
		return failed
	}
	return lost
}

// release deletes the keys of gs that hold value, and returns the errors of
// the keys found gone or taken (lost), and of the groups whose call failed.
func (s *single) release(ctx context.Context, gs []group, value string) (lost, failed error) {
	var losts, fails []error
	for _, g := range gs {
		_, err := s.srv.Run(ctx, cas.Delete(cas.Lock{Key: g.keys[0], Keys: g.keys, Value: value, Queued: s.queues(), Sharded: s.sharded}))
		if errors.Is(err, strategy.ErrNotHeld) {
			losts = append(losts, err)
		} else if err != nil {
			fails = append(fails, err)
		}
	}
	return errors.Join(losts...), errors.Join(fails...)
}

// TTLKeys implements [strategy.Multi]: the least TTL of the keys, read in
// one script, or one per Cluster slot.
func (s *single) TTLKeys(ctx context.Context, keys []string, value string) (time.Duration, error) {
	least := time.Duration(-1)
	var errs []error
	for _, g := range s.groups(keys) {
		r, err := s.srv.Run(ctx, cas.PTTL(cas.Lock{Key: g.keys[0], Keys: g.keys, Value: value}))
		if ttl := r.TTL; err != nil {
			errs = append(errs, err)
		} else if ttl >= 0 && (least < 0 || ttl < least) {
			least = ttl
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return least, nil
}
