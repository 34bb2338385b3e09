package notify

import (
	"context"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

// ListenLock is Listen on the channel of key's lock (cas.WakeChannel): the
// [strategy.Notifier] Listen of a strategy whose releases publish there. It
// returns nil (an interface holding nothing) when none of conns can
// subscribe, or key has no channel, and the waiter polls.
func ListenLock(conns []driver.Conn, key, id string) strategy.Listener {
	channel, ok := cas.WakeChannel(key)
	if !ok {
		return nil
	}
	if w := Listen(conns, channel, id); w != nil {
		return w
	}
	return nil
}

// DeleteWaking is cas.Delete, over c, for a strategy without a queue, whose
// release wakes every waiter of the lock: when raw, the connection under c,
// can subscribe and key has a channel, the same script publishes
// [Everyone] on it (cas.DeleteHinting), best effort.
func DeleteWaking(ctx context.Context, c, raw driver.Conn, key, value string) error {
	sub, ok := raw.(driver.Subscriber)
	channel, named := cas.WakeChannel(key)
	if !ok || !named {
		return cas.Delete(ctx, c, key, value)
	}
	return cas.DeleteHinting(ctx, c, key, value, channel, Everyone, sub.Sharded())
}
