package rueidis

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock/driver"
)

var _ driver.Subscriber = (*Conn)(nil)

// errSessionClosed is returned by a closed session's methods.
var errSessionClosed = errors.New("rueidis: subscriber session closed")

// errConnClosed ends a session whose connection rueidis closed without
// saying why.
var errConnClosed = errors.New("rueidis: subscriber connection closed")

// Sharded implements [driver.Subscriber]: channels are shard channels on a
// Cluster client.
func (c *Conn) Sharded() bool {
	return c.err == nil && c.c.Mode() == rueidis.ClientModeCluster
}

// Listen implements [driver.Subscriber] with rueidis's dedicated
// connections and their PubSubHooks: one connection for a standalone or
// Sentinel client, dialled within ctx; on a Cluster client one per slot of
// a subscribed channel, taken in Subscribe, with SSUBSCRIBE (Redis 7 or
// later). A session never reconnects: when a connection fails it ends,
// whole, with an event of kind Closed, and the caller opens another.
//
// rueidis pings every connection, a subscribed one too, every
// ClientOption.Dialer.KeepAlive (1 s by default), and closes one that
// does not answer within ConnWriteTimeout (10 s by default): a dead server
// ends the session within that.
func (c *Conn) Listen(ctx context.Context, on func(driver.Event)) (driver.Session, error) {
	if c.err != nil {
		return nil, c.err
	}
	s := &session{client: c.c, sharded: c.Sharded(), events: driver.NewRelay(on), conns: map[uint16]*dedicated{}, where: map[string]*dedicated{}, leaving: map[string]bool{}}
	if s.sharded {
		return s, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.open()
	if err := d.c.Do(ctx, d.c.B().Ping().Build()).Error(); err != nil { // dial now, within ctx
		d.retired = true // no session to end: Listen fails
		d.c.Close()
		return nil, err
	}
	s.conns[0] = d
	return s, nil
}

// dedicated is one connection of a session, and the channels subscribed
// on it.
type dedicated struct {
	c        rueidis.DedicatedClient
	channels int  // subscribed or asked for, not yet unsubscribed
	retired  bool // closed because the server dropped its channels, or Listen failed: its end ends no session
}

// session is a driver.Session over one dedicated rueidis connection per
// server (per slot, on a Cluster).
type session struct {
	client  rueidis.Client
	sharded bool // SSUBSCRIBE, on a Cluster client

	mu      sync.Mutex
	conns   map[uint16]*dedicated // by slot; 0 for a client that is not a Cluster
	where   map[string]*dedicated // the connection each channel was subscribed on
	leaving map[string]bool       // channels asked to unsubscribe, not yet confirmed
	closed  bool                  // Close was called, or the session ended

	events *driver.Relay // what Listen's on gets
}

// open takes a dedicated connection whose hooks relay its events, and
// watches it: when it ends, so does the session. s.mu is held.
func (s *session) open() *dedicated {
	c, _ := s.client.Dedicate() // Close gives the connection back
	d := &dedicated{c: c}
	ended := c.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			s.events.Emit(driver.Event{Kind: driver.Message, Channel: m.Channel, Payload: m.Message})
		},
		OnSubscription: func(m rueidis.PubSubSubscription) {
			switch m.Kind {
			case "subscribe", "ssubscribe":
				s.events.Emit(driver.Event{Kind: driver.Subscribed, Channel: m.Channel})
			case "unsubscribe", "sunsubscribe":
				s.unsubscribed(d, m.Channel)
			}
		},
	})
	go func() {
		err := errConnClosed
		for e := range ended {
			if e != nil {
				err = e
			}
		}
		s.mu.Lock()
		retired := d.retired
		s.mu.Unlock()
		if !retired {
			s.end(err)
		}
	}()
	return d
}

// end closes every connection of the session and reports Closed with err
// (nil for Close, and once Close was called).
func (s *session) end(err error) {
	s.mu.Lock()
	if s.closed {
		err = nil
	}
	s.closed = true
	conns := slices.Collect(maps.Values(s.conns))
	s.mu.Unlock()
	for _, d := range conns {
		d.c.Close()
	}
	s.events.Emit(driver.Event{Kind: driver.Closed, Err: err})
}

// unsubscribed reports the end of a subscription. One that was not asked
// for is the server's: on a Cluster, the channel's slot moved to another
// master. A connection left with no channel by the server is retired, so
// that the next subscription in its slot takes a new one, routed by
// rueidis's slots of then.
func (s *session) unsubscribed(d *dedicated, channel string) {
	s.mu.Lock()
	asked := s.leaving[channel]
	delete(s.leaving, channel)
	if s.where[channel] == d {
		delete(s.where, channel)
		d.channels--
	}
	if !asked && s.sharded && d.channels == 0 && !d.retired {
		d.retired = true
		maps.DeleteFunc(s.conns, func(_ uint16, o *dedicated) bool { return o == d })
		go d.c.Close() // not from rueidis's goroutine that runs the hooks
	}
	s.mu.Unlock()
	s.events.Emit(driver.Event{Kind: driver.Unsubscribed, Channel: channel})
}

// Subscribe implements [driver.Session].
func (s *session) Subscribe(ctx context.Context, channels ...string) error {
	for _, ch := range channels {
		d, err := s.claim(ch)
		if err != nil {
			return err
		}
		var cmd rueidis.Completed
		if s.sharded {
			cmd = d.c.B().Ssubscribe().Channel(ch).Build()
		} else {
			cmd = d.c.B().Subscribe().Channel(ch).Build()
		}
		if err := d.c.Do(ctx, cmd).Error(); err != nil {
			return err
		}
	}
	return nil
}

// claim returns the connection to subscribe to channel on, and records
// the subscription, unless the session is closed.
func (s *session) claim(channel string) (*dedicated, error) {
	s.mu.Lock()
	defer s.mu.Unlock() // route calls rueidis
	if s.closed {
		return nil, errSessionClosed
	}
	d := s.route(channel)
	delete(s.leaving, channel)
	if s.where[channel] != d {
		s.where[channel] = d
		d.channels++
	}
	return d, nil
}

// route returns the connection for channel, taking one for its slot if
// need be. s.mu is held.
func (s *session) route(channel string) *dedicated {
	var slot uint16
	if s.sharded {
		cmd := s.client.B().Ssubscribe().Channel(channel).Build()
		slot = cmd.Slot()
	}
	d := s.conns[slot]
	if d == nil {
		d = s.open()
		s.conns[slot] = d
	}
	return d
}

// Unsubscribe implements [driver.Session]: it sends each channel's end on
// the connection it was subscribed on.
func (s *session) Unsubscribe(ctx context.Context, channels ...string) error {
	for _, ch := range channels {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return errSessionClosed
		}
		d := s.where[ch]
		if d != nil {
			s.leaving[ch] = true
		}
		s.mu.Unlock()
		if d == nil {
			continue // not subscribed: the server dropped it already
		}
		var cmd rueidis.Completed
		if s.sharded {
			cmd = d.c.B().Sunsubscribe().Channel(ch).Build()
		} else {
			cmd = d.c.B().Unsubscribe().Channel(ch).Build()
		}
		if err := d.c.Do(ctx, cmd).Error(); err != nil {
			return err
		}
	}
	return nil
}

// Close implements [driver.Session]: it closes the session's connections
// and reports Closed before it returns, unless the session had ended
// already: do not call it from on.
func (s *session) Close() error {
	s.end(nil)
	return nil
}
