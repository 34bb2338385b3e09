package redigo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locksmith-go/lock/driver"
)

var _ driver.Subscriber = (*Conn)(nil)

// pingEvery is how often a session pings its server. A session whose
// connection stays silent for three times as long ends: its server is
// dead.
var pingEvery atomic.Int64 // a time.Duration, which tests shorten

func init() { pingEvery.Store(int64(5 * time.Second)) }

// errNoTimeout is Listen's error for a pool whose connections cannot read
// with a timeout of the session's own.
var errNoTimeout = errors.New("redigo: a subscriber session needs a connection that implements redis.ConnWithTimeout")

// errSessionClosed is returned by a closed session's methods.
var errSessionClosed = errors.New("redigo: subscriber session closed")

// Sharded implements [driver.Subscriber]: false, since redigo has no
// Cluster client; channels are classic channels (SUBSCRIBE and PUBLISH).
func (c *Conn) Sharded() bool { return false }

// Listen implements [driver.Subscriber]. A session is one connection taken
// from the pool (within ctx, and checked with a PING) and kept for as long
// as the session lasts: while the process waits for locks, and for the
// hub's linger (30 s) after the last wait. It counts against the pool's
// MaxActive.
//
// The session reads with a timeout of its own, whatever the pool's read
// timeout, and pings every 5 s: a connection silent for three times that
// long ends the session, so a dead server is noticed within about fifteen
// seconds. (redigo's ReceiveContext would cut every read at the pool's read
// timeout, which a quiet subscription outlasts.) A session never
// reconnects: it ends with an event of kind Closed, and the caller opens
// another. Close unsubscribes from everything and the session then gives
// the connection back, out of the subscribed state (a *redis.Pool closes
// one that failed).
func (c *Conn) Listen(ctx context.Context, on func(driver.Event)) (driver.Session, error) {
	if c.err != nil {
		return nil, c.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := c.p.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := conn.(redis.ConnWithTimeout); !ok {
		_ = conn.Close()
		return nil, errNoTimeout
	}
	if _, err := doContext(conn, ctx, "PING"); err != nil {
		_ = conn.Close()
		return nil, err
	}
	s := &session{psc: redis.PubSubConn{Conn: conn}, on: on, every: time.Duration(pingEvery.Load()), done: make(chan struct{})}
	go s.read()
	go s.ping()
	return s, nil
}

// session is a driver.Session over one pooled connection: one goroutine
// reads it, and the others send on it, one at a time.
type session struct {
	psc     redis.PubSubConn
	on      func(driver.Event)
	every   time.Duration // pingEvery when the session opened
	closing atomic.Bool   // Close sent the final UNSUBSCRIBE
	done    chan struct{} // closed when the reader has stopped

	mu      sync.Mutex // serialises sends
	stopped bool       // nothing is sent any more
}

// send sends a command with op, unless the session is closing or over.
func (s *session) send(op func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.closing.Load() {
		return errSessionClosed
	}
	return op()
}

// read relays what the connection reads until it fails, or the session's
// final UNSUBSCRIBE is confirmed; then it gives the connection back and
// reports Closed.
func (s *session) read() {
	err := s.receive()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	close(s.done)
	_ = s.psc.Conn.Close()
	if s.closing.Load() {
		err = nil
	}
	s.on(driver.Event{Kind: driver.Closed, Err: err})
}

// receive relays the events the connection reads. It returns the error
// that ends the connection, or nil once the final UNSUBSCRIBE of Close is
// confirmed (its last reply counts no channel left).
func (s *session) receive() error {
	for {
		switch m := s.psc.ReceiveWithTimeout(3 * s.every).(type) {
		case error:
			return m
		case redis.Message:
			s.relay(driver.Event{Kind: driver.Message, Channel: m.Channel, Payload: string(m.Data)})
		case redis.Subscription:
			switch {
			case m.Kind == "unsubscribe" && s.closing.Load():
				if m.Count == 0 {
					return nil
				}
			case m.Kind == "subscribe":
				s.relay(driver.Event{Kind: driver.Subscribed, Channel: m.Channel})
			case m.Kind == "unsubscribe" && m.Channel != "":
				s.relay(driver.Event{Kind: driver.Unsubscribed, Channel: m.Channel})
			}
		}
	}
}

// relay reports e unless the session is closing.
func (s *session) relay(e driver.Event) {
	if !s.closing.Load() {
		s.on(e)
	}
}

// ping pings the server every s.every until the reader stops.
func (s *session) ping() {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if s.send(func() error { return s.psc.Ping("") }) != nil {
				return
			}
		}
	}
}

// Subscribe implements [driver.Session]. redigo's writes take no context:
// ctx is checked before, and the write is bounded by the connection's
// write timeout.
func (s *session) Subscribe(ctx context.Context, channels ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.send(func() error { return s.psc.Subscribe(args(channels)...) })
}

// Unsubscribe implements [driver.Session], as Subscribe.
func (s *session) Unsubscribe(ctx context.Context, channels ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.send(func() error { return s.psc.Unsubscribe(args(channels)...) })
}

// Close implements [driver.Session]: it unsubscribes from every channel and
// returns; the session reports Closed once the server confirmed, or once
// the connection failed.
func (s *session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.closing.Swap(true) {
		return nil
	}
	_ = s.psc.Unsubscribe() // if it fails, so does the reader's next read
	return nil
}

// args returns channels as redigo's variadic arguments.
func args(channels []string) []any {
	a := make([]any, len(channels))
	for i, c := range channels {
		a[i] = c
	}
	return a
}
