package single

import (
	"context"
	"errors"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

// acquireSlots makes the attempt of r's waiter to take r's keys in several
// Cluster slots, the groups gs, whose queues are qs (one per key of r),
// into grant: it reserves each group in turn, stopping at the first with a
// key it cannot take, then takes each group, keeping its places, and then
// leaves the queues (see cas.Waiter). ok is false when the ACL does not
// allow the queues, or the server refuses scripts, and the caller takes
// the keys without them.
func (s *single) acquireSlots(ctx context.Context, r strategy.Request, gs []group, qs []cas.Queue, fenceKeys []string, grant strategy.Grant) (strategy.Grant, bool, error) {
	w := cas.Waiter{ID: s.member(r.Waiter), Poll: r.Poll, Patience: r.Patience}
	queued := func(e cas.Enqueued, err error) (strategy.Grant, bool, error) {
		if held := (*strategy.KeyError)(nil); errors.As(err, &held) {
			grant.Position, grant.HolderTTL, grant.Queue = e.Position, e.HolderTTL, held.Key
			if held.Key != gs[0].keys[0] {
				grant.Position = 1 // it heads the queues of the keys before: it keeps them at the head's pace
			}
		}
		return grant, true, err
	}
	for i, g := range gs {
		e, err := w.Reserve(ctx, s.conn, g.keys, pickQueues(qs, g.at), r.TTL)
		switch {
		case errors.Is(err, cas.ErrNoQueue) || s.srv.Refuses(err):
			return strategy.Grant{}, false, nil
		case errors.Is(err, strategy.ErrNotObtained):
			s.leaveSlots(ctx, w, gs[i+1:], qs)
			return queued(e, err)
		case err != nil:
			return strategy.Grant{}, true, err
		}
	}
	value := r.Value()
	for i, g := range gs {
		var fences []int64
		var e cas.Enqueued
		err := s.write(ctx, g, func(srv cas.Server) (err error) {
			fences, e, err = w.Take(ctx, srv.Conn, g.keys, pickQueues(qs, g.at), pick(fenceKeys, g.at), value, r.TTL)
			return err
		})
		switch {
		case errors.Is(err, strategy.ErrNotObtained): // a client outside the queues took a key
			s.leaveSlots(ctx, w, gs[i+1:], qs)
			undone, err := s.undo(ctx, gs[:i], value, strategy.Grant{}, err)
			if !undone.Undone {
				return undone, true, err
			}
			got, _, err := queued(e, err)
			got.Undone = true
			return got, true, err
		case errors.As(err, new(*ReplicaError)):
			got, err := s.undo(ctx, gs[:i+1], value, strategy.Grant{}, err)
			return got, true, err
		case err != nil:
			return strategy.Grant{}, true, err // the Locker deletes every key, in the background
		}
		for j, n := range fences {
			grant.Fences[g.at[j]] = n
		}
	}
	for _, g := range gs { // best effort: a place left behind is dropped after its patience
		_ = w.Claim(ctx, s.conn, g.keys, pickQueues(qs, g.at))
	}
	return grant, true, nil
}

// leaveSlots takes w out of the queues of the keys of gs, which an earlier
// attempt may have reserved: it keeps places only up to the key it waits
// for. Best effort: a place left behind is dropped after its patience.
func (s *single) leaveSlots(ctx context.Context, w cas.Waiter, gs []group, qs []cas.Queue) {
	for _, g := range gs {
		_ = w.Leave(ctx, s.conn, g.keys, pickQueues(qs, g.at))
	}
}

// pickQueues returns the queues of qs at the indexes at.
func pickQueues(qs []cas.Queue, at []int) []cas.Queue {
	picked := make([]cas.Queue, len(at))
	for i, j := range at {
		picked[i] = qs[j]
	}
	return picked
}
