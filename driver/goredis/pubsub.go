package goredis

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver"
)

var _ driver.Subscriber = (*Conn)(nil)

// pingEvery is how long a session's connection may stay silent before the
// session pings it; one that stays silent twice as long again is dead.
var pingEvery atomic.Int64 // a time.Duration, which tests shorten

func init() { pingEvery.Store(int64(5 * time.Second)) }

// errNoPong ends a session whose server did not answer a PING.
var errNoPong = errors.New("goredis: subscriber connection: no reply to PING")

// errSessionClosed is returned by a closed session's methods.
var errSessionClosed = errors.New("goredis: subscriber session closed")

// Sharded implements [driver.Subscriber]: channels are shard channels on a
// *redis.ClusterClient.
func (c *Conn) Sharded() bool {
	_, ok := c.c.(*redis.ClusterClient)
	return ok
}

// Listen implements [driver.Subscriber] with go-redis PubSubs, outside the
// client's pool: one per server that owns a subscribed channel (one for a
// *redis.Client or a failover client, with SUBSCRIBE; the shard of each
// channel for a *redis.Ring, with SUBSCRIBE; the master of each channel's
// slot for a *redis.ClusterClient, with SSUBSCRIBE, Redis 7 or later,
// following a slot that moves). go-redis would reconnect a failed PubSub
// by itself; a session ends instead, whole, with an event of kind Closed,
// and the caller opens another, so that it knows messages may have been
// lost. A session pings a connection that stayed silent for a few seconds,
// and ends when no reply comes in twice as long again: a dead server is
// noticed within about fifteen seconds.
//
// For a *redis.Client (a failover client too), Listen dials within ctx;
// other sessions dial in Subscribe, within its ctx.
func (c *Conn) Listen(ctx context.Context, on func(driver.Event)) (driver.Session, error) {
	if c.err != nil {
		return nil, c.err
	}
	s := &session{client: c.c, sharded: c.Sharded(), events: driver.NewRelay(on), every: time.Duration(pingEvery.Load()), shards: map[*redis.Client]*redis.PubSub{}, where: map[string]*redis.PubSub{}, leaving: map[string]bool{}}
	switch c.c.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return s, nil
	}
	// One PubSub for every channel, dialled now.
	ps := c.c.Subscribe(ctx)
	if err := ps.Ping(ctx); err != nil {
		_ = ps.Close()
		return nil, err
	}
	s.single = ps
	go s.read(ps)
	return s, nil
}

// session is a driver.Session over one go-redis PubSub per server.
type session struct {
	client  redis.UniversalClient
	sharded bool          // SSUBSCRIBE, on a ClusterClient
	every   time.Duration // pingEvery when the session opened

	mu      sync.Mutex
	single  *redis.PubSub                   // the one PubSub of a client that is neither Cluster nor Ring
	shards  map[*redis.Client]*redis.PubSub // the PubSub of each server, by its client
	where   map[string]*redis.PubSub        // the PubSub each channel was subscribed on
	leaving map[string]bool                 // channels asked to unsubscribe, not yet confirmed
	stale   bool                            // a slot moved: reload the slots before routing a channel
	closed  bool                            // Close was called, or the session ended

	events *driver.Relay // what Listen's on gets
}

// end closes every PubSub of the session and reports Closed with err (nil
// for Close, and once Close was called).
func (s *session) end(err error) {
	s.mu.Lock()
	if s.closed {
		err = nil
	}
	s.closed = true
	shards := slices.Collect(maps.Values(s.shards))
	if s.single != nil {
		shards = append(shards, s.single)
	}
	s.mu.Unlock()
	for _, sh := range shards {
		_ = sh.Close()
	}
	s.events.Emit(driver.Event{Kind: driver.Closed, Err: err})
}

// read relays what sh reads, pinging a silent connection, until it fails;
// then it ends the session.
func (s *session) read(sh *redis.PubSub) {
	ctx := context.Background()
	pinged := false
	for {
		wait := s.every
		if pinged {
			wait = 2 * s.every
		}
		msg, err := sh.ReceiveTimeout(ctx, wait)
		switch {
		case err == nil:
			pinged = false
		case !timeout(err):
			s.fail(err)
			return
		case pinged:
			s.fail(errNoPong)
			return
		default:
			pinged = true
			if err := sh.Ping(ctx); err != nil {
				s.fail(err)
				return
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Message:
			s.events.Emit(driver.Event{Kind: driver.Message, Channel: m.Channel, Payload: m.Payload})
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				s.events.Emit(driver.Event{Kind: driver.Subscribed, Channel: m.Channel})
			case "unsubscribe", "sunsubscribe":
				s.unsubscribed(sh, m.Channel)
			}
		}
	}
}

// timeout reports whether err is a read that timed out.
func timeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// fail ends the session after a PubSub failed. A MOVED reply means that
// the slots the client routes by are out of date: they are reloaded first,
// so that the next session subscribes on the right masters.
func (s *session) fail(err error) {
	if cc, ok := s.client.(*redis.ClusterClient); ok && strings.HasPrefix(err.Error(), "MOVED ") {
		ctx, cancel := context.WithTimeout(context.Background(), reloadTimeout)
		_ = reload(ctx, cc)
		cancel()
	}
	s.end(err)
}

// reloadTimeout bounds a reload of the slots after a MOVED reply.
const reloadTimeout = 5 * time.Second

// reload reloads the slots of c before it returns (ClusterClient.ReloadState
// only schedules a reload; ForEachMaster reloads first).
func reload(ctx context.Context, c *redis.ClusterClient) error {
	return c.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil })
}

// unsubscribed reports the end of a subscription. One that was not asked
// for is the server's: the channel's slot moved to another master, and the
// session reloads the slots before it subscribes again.
func (s *session) unsubscribed(sh *redis.PubSub, channel string) {
	s.mu.Lock()
	if s.leaving[channel] {
		delete(s.leaving, channel)
	} else if s.sharded {
		s.stale = true
	}
	if s.where[channel] == sh {
		delete(s.where, channel)
	}
	s.mu.Unlock()
	s.events.Emit(driver.Event{Kind: driver.Unsubscribed, Channel: channel})
}

// Subscribe implements [driver.Session].
func (s *session) Subscribe(ctx context.Context, channels ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range channels {
		if s.closed {
			return errSessionClosed
		}
		sh, err := s.route(ctx, ch)
		if err != nil {
			return err
		}
		delete(s.leaving, ch)
		s.where[ch] = sh
		if s.sharded {
			err = sh.SSubscribe(ctx, ch)
		} else {
			err = sh.Subscribe(ctx, ch)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// route returns the PubSub of the server that owns channel, opening it if
// need be. s.mu is held.
func (s *session) route(ctx context.Context, channel string) (*redis.PubSub, error) {
	if s.single != nil {
		return s.single, nil
	}
	var (
		server *redis.Client
		err    error
	)
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		if s.stale {
			if err := reload(ctx, c); err != nil {
				return nil, err
			}
			s.stale = false
		}
		server, err = c.MasterForKey(ctx, channel)
	case *redis.Ring:
		server, err = c.GetShardClientForKey(channel)
	}
	if err != nil {
		return nil, err
	}
	sh := s.shards[server]
	if sh == nil {
		if s.sharded {
			sh = server.SSubscribe(ctx)
		} else {
			sh = server.Subscribe(ctx)
		}
		if err := sh.Ping(ctx); err != nil { // dial now, within ctx
			_ = sh.Close()
			return nil, err
		}
		s.shards[server] = sh
		go s.read(sh)
	}
	return sh, nil
}

// Unsubscribe implements [driver.Session]: it sends each channel's end to
// the server it was subscribed on.
func (s *session) Unsubscribe(ctx context.Context, channels ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range channels {
		if s.closed {
			return errSessionClosed
		}
		sh := s.where[ch]
		if sh == nil {
			continue // not subscribed: the server dropped it already
		}
		s.leaving[ch] = true
		var err error
		if s.sharded {
			err = sh.SUnsubscribe(ctx, ch)
		} else {
			err = sh.Unsubscribe(ctx, ch)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Close implements [driver.Session]. It reports Closed before it returns,
// unless the session had ended already: do not call it from on.
func (s *session) Close() error {
	s.end(nil)
	return nil
}
