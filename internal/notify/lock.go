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
// [Everyone] on it (cas.Lock.Hint), best effort; without scripts, a
// PUBLISH follows the delete.
func DeleteWaking(ctx context.Context, srv cas.Server, raw driver.Conn, key, value string) error {
	_, err := srv.Run(ctx, DeleteWakingCall(Waking(raw), key, nil, value))
	return err
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
// wake waiters by w, of the lock of key alone (keys nil) or of keys (key is
// the first): when w is not NoWake, the script publishes [Everyone] on the
// channel of each key it deletes that has one.
func DeleteWakingCall(w Wake, key string, keys []string, value string) cas.Call {
	l := cas.Lock{Key: key, Keys: keys, Value: value}
	if w != NoWake {
		l.Hint, l.Sharded = Everyone, w == SPublish
	}
	return cas.Delete(l)
}
