package single

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

var (
	_ strategy.Guarder = (*single)(nil)
	_ strategy.Guarder = (*shared)(nil)
)

// Guard implements [strategy.Guarder] (lock.Lock.Guard and
// lock.Lock.GuardCommands): a script that checks that every key of the
// lock holds value and then runs the write, or a WATCH transaction that
// does the same without Lua (see cas.Server.Guard). The check and the
// write replicate together, so a replica promoted in a failover has both
// or neither. With [WithReplicas], it waits for the replicas'
// acknowledgement, as a refresh does. Over a Cluster client, the write's
// keys, and a lock's several keys, must be in the hash slot of the lock's
// first key.
func (s *single) Guard(ctx context.Context, keys []string, value string, w strategy.Write) (any, error) {
	l := cas.Lock{Key: keys[0], Value: value}
	if len(keys) > 1 {
		l.Keys = keys
	}
	return s.guard(ctx, l, false, w)
}

// Guard implements [strategy.Guarder] for a holder of a shared lock: its
// own lease, its score in the lock's sorted set, must not have ended by
// the server's clock. A reader's write is guarded against the loss of
// its own lease only, not against other readers, who hold the lock with
// it; a semaphore's holder's, likewise, against the loss of its permit.
func (v *shared) Guard(ctx context.Context, keys []string, value string, w strategy.Write) (any, error) {
	return v.s.guard(ctx, cas.Lock{Key: keys[0], Value: value}, true, w)
}

// guard runs w under l, after the check of its keys' slots, waiting for
// the replicas of WithReplicas.
func (s *single) guard(ctx context.Context, l cas.Lock, shared bool, w strategy.Write) (reply any, err error) {
	if err := s.sameSlot(l, w.Keys); err != nil {
		return nil, err
	}
	if s.ack.Replicas == 0 {
		return s.srv.Guard(ctx, l, shared, w)
	}
	err = cas.Acked(ctx, s.conn, l.Key, s.ack, func(c driver.Conn) (err error) {
		reply, err = s.srv.Over(c).Guard(ctx, l, shared, w)
		return err
	})
	return reply, err
}

// sameSlot returns nil unless, over a Cluster client, a key of l or one of
// keys is not in the hash slot of l.Key: then an *strategy.ArgumentError
// named "keys" that names them.
func (s *single) sameSlot(l cas.Lock, keys []string) error {
	if !s.sharded {
		return nil
	}
	slot := cas.Slot(l.Key)
	var others []string
	for _, k := range slices.Concat(l.Keys, keys) {
		if cas.Slot(k) != slot {
			others = append(others, fmt.Sprintf("%q", k))
		}
	}
	if others == nil {
		return nil
	}
	return &strategy.ArgumentError{Name: "keys", Reason: fmt.Sprintf("%s not in the Cluster hash slot of the lock's key %q, "+
		"where the guard runs: give them its hash tag", strings.Join(others, ", "), l.Key)}
}
