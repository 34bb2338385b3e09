package goredis

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver"
)

var _ driver.Subscriber = (*Conn)(nil)

// Sharded implements [driver.Subscriber]: channels are shard channels on a
// *redis.ClusterClient.
func (c *Conn) Sharded() bool {
	_, ok := c.c.(*redis.ClusterClient)
	return ok
}

// Listen implements [driver.Subscriber] with a go-redis PubSub. go-redis
// would reconnect a failed PubSub by itself; this one ends instead, with an
// event of kind Closed, and the caller opens another, so that it knows
// messages may have been lost.
func (c *Conn) Listen(ctx context.Context, on func(driver.Event)) (driver.Session, error) {
	if c.err != nil {
		return nil, c.err
	}
	s := &session{sharded: c.Sharded()}
	if s.sharded {
		s.ps = c.c.SSubscribe(ctx)
	} else {
		s.ps = c.c.Subscribe(ctx)
	}
	go s.read(on)
	return s, nil
}

// session is a driver.Session over one go-redis PubSub.
type session struct {
	ps      *redis.PubSub
	sharded bool
	closed  atomic.Bool
}

func (s *session) read(on func(driver.Event)) {
	for {
		msg, err := s.ps.Receive(context.Background())
		if err != nil {
			_ = s.ps.Close()
			if s.closed.Load() {
				err = nil
			}
			on(driver.Event{Kind: driver.Closed, Err: err})
			return
		}
		switch m := msg.(type) {
		case *redis.Message:
			on(driver.Event{Kind: driver.Message, Channel: m.Channel, Payload: m.Payload})
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				on(driver.Event{Kind: driver.Subscribed, Channel: m.Channel})
			case "unsubscribe", "sunsubscribe":
				on(driver.Event{Kind: driver.Unsubscribed, Channel: m.Channel})
			}
		}
	}
}

func (s *session) Subscribe(ctx context.Context, channels ...string) error {
	if s.sharded {
		return s.ps.SSubscribe(ctx, channels...)
	}
	return s.ps.Subscribe(ctx, channels...)
}

func (s *session) Unsubscribe(ctx context.Context, channels ...string) error {
	if s.sharded {
		return s.ps.SUnsubscribe(ctx, channels...)
	}
	return s.ps.Unsubscribe(ctx, channels...)
}

func (s *session) Close() error {
	s.closed.Store(true)
	return s.ps.Close()
}
