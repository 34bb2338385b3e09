package single

import (
	"context"
	"errors"
	"time"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

// acquireSlots makes the attempt of r's waiter to take r's keys in several
// Cluster slots, the groups gs, with their queues, into grant: it reserves each group in turn, stopping at the first with a
// key it cannot take, then takes each group, keeping its places, and then
// leaves the queues (see cas.Waiter). ok is false when the ACL does not
// allow the queues, or the server refuses scripts, and the caller takes
// the keys without them.
func (s *single) acquireSlots(ctx context.Context, r strategy.Request, gs []group, fenceKeys []string, grant strategy.Grant) (strategy.Grant, bool, error) {
	w := cas.Waiter{ID: s.member(r.Waiter), Poll: r.Poll, Patience: r.Patience}
	for i, g := range gs {
		e, err := w.Hold(ctx, s.conn, s.lock(g, r.TTL), false)
		switch {
		case errors.Is(err, cas.ErrNoQueue) || s.srv.Refuses(err):
			return strategy.Grant{}, false, nil
		case errors.Is(err, strategy.ErrNotObtained):
			s.leaveSlots(ctx, w, gs[i+1:])
			return queued(grant, e, err, gs[0].keys[0]), true, err
		case err != nil:
			return strategy.Grant{}, true, err
		}
	}
	value, ttl, life := r.Value(), r.TTL, s.fenceLife(r.TTL) // what the closure needs of r, which is too large for it to copy
	for i, g := range gs {
		var fences []int64
		var e cas.Result
		err := s.write(ctx, g, func(srv cas.Server) (err error) {
			l := s.lock(g, ttl)
			l.Value, l.Fences, l.FenceTTL = value, pick(fenceKeys, g.at), life
			e, err = w.Hold(ctx, srv.Conn, l, true)
			fences = e.Fences
			return err
		})
		switch {
		case errors.Is(err, strategy.ErrNotObtained): // a client outside the queues took a key
			s.leaveSlots(ctx, w, gs[i+1:])
			undone, err := s.undo(ctx, gs[:i], value, strategy.Grant{}, err)
			if !undone.Undone {
				return undone, true, err
			}
			got := queued(grant, e, err, gs[0].keys[0])
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
		_ = w.Leave(ctx, s.conn, s.lock(g, 0), true)
	}
	return grant, true, nil
}

// leaveSlots takes w out of the queues of the keys of gs, which an earlier
// attempt may have reserved: it keeps places only up to the key it waits
// for. Best effort: a place left behind is dropped after its patience.
func (s *single) leaveSlots(ctx context.Context, w cas.Waiter, gs []group) {
	for _, g := range gs {
		_ = w.Leave(ctx, s.conn, s.lock(g, 0), false)
	}
}

// lock returns the lock of the keys of g, with their queues, for ttl.
func (s *single) lock(g group, ttl time.Duration) cas.Lock {
	return cas.Lock{Key: g.keys[0], Keys: g.keys, TTL: ttl, Sharded: s.sharded}
}
