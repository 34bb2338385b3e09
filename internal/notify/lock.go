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

// DeleteWaking is cas.Delete, on srv, for a strategy without a queue, whose
// release wakes every waiter of the lock: when raw, the connection under
// srv's, can subscribe and key has a channel, the same script publishes
// [Everyone] on it (cas.DeleteHintingCall), best effort; without scripts,
// a PUBLISH follows the delete.
func DeleteWaking(ctx context.Context, srv cas.Server, raw driver.Conn, key, value string) error {
	return srv.Run(ctx, DeleteWakingCall(Waking(raw), key, value))
}

// Wake says how a release over a connection wakes the lock's waiters.
type Wake int

// The ways a release wakes waiters.
const (
	NoWake   Wake = iota // the connection cannot subscribe: waiters poll
	Publish              // PUBLISH on the lock's channel
	SPublish             // SPUBLISH: the connection's channels are shard channels

	Wakes = iota // how many ways there are
)

// Waking returns how a release over raw wakes waiters.
func Waking(raw driver.Conn) Wake {
	switch sub, ok := raw.(driver.Subscriber); {
	case !ok:
		return NoWake
	case sub.Sharded():
		return SPublish
	}
	return Publish
}

// DeleteWakingCall is [DeleteWaking], built once, for connections that
// wake waiters by w.
func DeleteWakingCall(w Wake, key, value string) cas.Call {
	channel, named := cas.WakeChannel(key)
	if w == NoWake || !named {
		return cas.DeleteCall(key, value)
	}
	return cas.DeleteHintingCall(key, value, channel, Everyone, w == SPublish)
}

// DeleteKeysWaking is cas.DeleteKeys, over c, for a strategy without a
// queue: when its connection wakes waiters by w (not NoWake), the same
// script publishes [Everyone] on the channel of each key it deletes that
// has one (cas.DeleteKeysHinting), best effort, as DeleteWaking does for
// one key.
func DeleteKeysWaking(ctx context.Context, c driver.Conn, w Wake, keys []string, value string) error {
	if w == NoWake {
		return cas.DeleteKeys(ctx, c, keys, value)
	}
	channels := make([]string, len(keys))
	for i, k := range keys {
		channels[i], _ = cas.WakeChannel(k)
	}
	return cas.DeleteKeysHinting(ctx, c, keys, channels, value, Everyone, w == SPublish)
}
