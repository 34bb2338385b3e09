// Package notify delivers the wake-ups of a process's waiters. For each
// [driver.Subscriber] it keeps one hub: one subscriber session (one
// connection per shard) that multiplexes the channels of every lock the
// process waits for. A channel stays subscribed for [Linger] after its last
// waiter leaves, so a lock waited for again and again costs one SUBSCRIBE.
//
// A hub whose session fails reconnects with a backoff and subscribes again
// to every channel; each channel's new confirmation wakes all its waiters
// (WakeResubscribed), since messages in between were lost. A channel the
// server drops (its Cluster slot moved) is subscribed again the same way.
//
// A message's payload is the id of the waiter it wakes, that id followed by
// [Promoted] for a waiter that became the head of its queue, or
// [Everyone]. A message for an id with no waiter here is remembered
// briefly, so a waiter that joins just after it hears it at once.
package notify

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// Everyone is the payload of a message that wakes every waiter of the
// channel: a release of a strategy without a queue.
const Everyone = "*"

// Promoted ends the payload of a message that tells a waiter it is now the
// head of its queue (strategy.WakePromoted).
const Promoted = "+"

// Timings of a hub.
const (
	// Linger is how long a channel stays subscribed after its last waiter
	// left, and a hub's session open after its last channel went.
	Linger = 30 * time.Second
	// dialTimeout bounds the opening of a session.
	dialTimeout = 5 * time.Second
	// opTimeout bounds the sending of a subscription.
	opTimeout = 5 * time.Second
	// minBackoff and maxBackoff bound the wait between two attempts to
	// reopen a failed session.
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
	// remembered is how many ids of unclaimed messages a channel keeps.
	remembered = 8
)

// linger is Linger, which tests shorten.
var linger = Linger

// SetLinger sets how long a channel stays subscribed after its last
// waiter, for the tests of other packages that wait for a process's
// subscriptions to go (the election suite's): call it before any waiter
// subscribes, as from a TestMain.
func SetLinger(d time.Duration) { linger = d }

// Lingers returns how long a channel stays subscribed after its last
// waiter: Linger, unless SetLinger changed it.
func Lingers() time.Duration { return linger }

// hubs holds the hub of each driver connection: driver.Conn → *hub.
var hubs sync.Map

// Waiter is one waiter's subscription to the wake-ups of a channel, over
// one or several connections. It implements strategy.Listener.
type Waiter struct {
	c       chan strategy.Wake
	channel string
	id      string
	hubs    []*hub
}

var _ strategy.Listener = (*Waiter)(nil)

// Listen subscribes the waiter id to channel on each of conns that can
// subscribe, and returns its wake-ups; nil when none of conns can. It does
// not block.
func Listen(conns []driver.Conn, channel, id string) *Waiter {
	// Room for two: a promotion and the wake-up that follows it.
	w := &Waiter{c: make(chan strategy.Wake, 2), channel: channel, id: id}
	for _, c := range conns {
		if h := hubOf(c); h != nil {
			w.hubs = append(w.hubs, h)
		}
	}
	if len(w.hubs) == 0 {
		return nil
	}
	for i, h := range w.hubs {
		for !h.join(channel, id, w.c) { // the hub closed meanwhile: take a new one
			hubs.CompareAndDelete(h.key, h)
			h = hubOf(h.key)
			w.hubs[i] = h
		}
	}
	return w
}

// hubOf returns the hub of c, or nil if c cannot subscribe.
func hubOf(c driver.Conn) *hub {
	sub, ok := c.(driver.Subscriber)
	if !ok || !reflect.TypeOf(c).Comparable() {
		return nil
	}
	if h, ok := hubs.Load(c); ok {
		return h.(*hub)
	}
	h, _ := hubs.LoadOrStore(c, &hub{key: c, sub: sub, chans: map[string]*channel{}})
	return h.(*hub)
}

// Wakes implements strategy.Listener.
func (w *Waiter) Wakes() <-chan strategy.Wake { return w.c }

// Close implements strategy.Listener.
func (w *Waiter) Close() {
	for _, h := range w.hubs {
		h.leave(w.channel, w.id)
	}
}

// reason returns the wake-up of a message's payload.
func reason(payload string) strategy.Wake {
	if strings.HasSuffix(payload, Promoted) {
		return strategy.WakePromoted
	}
	return strategy.WakeMessage
}

// wake sends r to c unless a wake-up is already pending there.
func wake(c chan<- strategy.Wake, r strategy.Wake) {
	select {
	case c <- r:
	default:
	}
}

// hub multiplexes the channels of one driver connection over one session.
type hub struct {
	key driver.Conn
	sub driver.Subscriber

	mu      sync.Mutex
	cur     *session // the session being opened or open; nil when none is
	chans   map[string]*channel
	closed  bool          // the hub went idle and left hubs
	backoff time.Duration // the wait before the next session opens
}

// session is one subscriber session of a hub; events of a session that is
// no longer the hub's current one are ignored.
type session struct {
	driver.Session           // nil until it is open
	opened         time.Time // when it opened
}

// channel is one subscribed channel of a hub.
type channel struct {
	waiters   map[string]chan<- strategy.Wake
	confirmed bool     // confirmed on the current session
	ever      bool     // confirmed before: a new confirmation follows a gap
	recent    []string // ids of recent messages that no waiter here claimed
	idle      *time.Timer
}

// join adds a waiter to the hub; false if the hub has closed.
func (h *hub) join(name, id string, c chan<- strategy.Wake) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	ch := h.chans[name]
	if ch == nil {
		ch = &channel{waiters: map[string]chan<- strategy.Wake{}}
		h.chans[name] = ch
		h.subscribe(name)
	}
	if ch.idle != nil {
		ch.idle.Stop()
		ch.idle = nil
	}
	ch.waiters[id] = c
	for _, p := range [...]string{id + Promoted, id} {
		if i := slices.Index(ch.recent, p); i >= 0 {
			ch.recent = slices.Delete(ch.recent, i, i+1)
			wake(c, reason(p))
		}
	}
	return true
}

// leave removes a waiter; its channel stays subscribed for Linger.
func (h *hub) leave(name, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.chans[name]
	if ch == nil {
		return
	}
	delete(ch.waiters, id)
	if len(ch.waiters) == 0 && ch.idle == nil {
		ch.idle = time.AfterFunc(linger, func() { h.drop(name, ch) })
	}
}

// drop unsubscribes from a channel that stayed idle, and closes the session
// when it was the last.
func (h *hub) drop(name string, ch *channel) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.chans[name] != ch || len(ch.waiters) > 0 {
		return
	}
	delete(h.chans, name)
	s := h.cur
	if len(h.chans) == 0 {
		h.cur, h.closed = nil, true
		hubs.CompareAndDelete(h.key, h)
		if s != nil && s.Session != nil {
			go s.Close()
		}
		return
	}
	if s != nil && s.Session != nil {
		go send(s, s.Unsubscribe, name)
	}
}

// subscribe subscribes to a new channel: on the open session, or on the one
// being opened, which subscribes to every channel when it opens. h.mu is
// held.
func (h *hub) subscribe(name string) {
	switch s := h.cur; {
	case s == nil:
		h.connect()
	case s.Session != nil:
		go send(s, s.Subscribe, name)
	}
}

// send sends a subscription change; a failure closes the session, which the
// hub then opens again, subscribing to every channel.
func send(s *session, op func(context.Context, ...string) error, channels ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := op(ctx, channels...); err != nil {
		_ = s.Close()
	}
}

// connect opens a new session in the background, after h.backoff, trying
// again with a growing backoff while the hub has channels. h.mu is held,
// and h.cur is nil.
func (h *hub) connect() {
	s := &session{}
	h.cur = s
	backoff := h.backoff
	go func() {
		for {
			time.Sleep(backoff)
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
			sess, err := h.sub.Listen(ctx, func(e driver.Event) { h.on(s, e) })
			cancel()
			h.mu.Lock()
			if h.cur != s { // it failed already, or the hub closed
				h.mu.Unlock()
				if err == nil {
					_ = sess.Close()
				}
				return
			}
			if err == nil {
				s.Session, s.opened = sess, time.Now()
				names := slices.Collect(maps.Keys(h.chans))
				h.mu.Unlock()
				if len(names) > 0 {
					send(s, sess.Subscribe, names...)
				}
				return
			}
			if len(h.chans) == 0 {
				h.cur = nil
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
		}
	}()
}

// on handles an event of session s.
func (h *hub) on(s *session, e driver.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur != s {
		return
	}
	switch e.Kind {
	case driver.Message:
		ch := h.chans[e.Channel]
		if ch == nil {
			return
		}
		if e.Payload == Everyone {
			for _, c := range ch.waiters {
				wake(c, strategy.WakeMessage)
			}
			return
		}
		if c, ok := ch.waiters[strings.TrimSuffix(e.Payload, Promoted)]; ok {
			wake(c, reason(e.Payload))
			return
		}
		if len(ch.recent) == remembered {
			ch.recent = slices.Delete(ch.recent, 0, 1)
		}
		ch.recent = append(ch.recent, e.Payload)
	case driver.Subscribed:
		ch := h.chans[e.Channel]
		if ch == nil || ch.confirmed {
			return
		}
		r := strategy.WakeSubscribed
		if ch.ever {
			r = strategy.WakeResubscribed
		}
		ch.confirmed, ch.ever = true, true
		for _, c := range ch.waiters {
			wake(c, r)
		}
	case driver.Unsubscribed:
		// A channel the hub dropped is no longer in h.chans; one that is
		// was dropped by the server: subscribe to it again.
		if ch := h.chans[e.Channel]; ch != nil && ch.confirmed && s.Session != nil {
			ch.confirmed = false
			go send(s, s.Subscribe, e.Channel)
		}
	case driver.Closed:
		// A session that fails soon after it opened (a subscription the
		// server refuses, say) is not reopened at once, again and again.
		if s.Session == nil || time.Since(s.opened) < maxBackoff {
			h.backoff = min(max(2*h.backoff, minBackoff), maxBackoff)
		} else {
			h.backoff = 0
		}
		h.cur = nil
		for _, ch := range h.chans {
			ch.confirmed = false
		}
		if len(h.chans) > 0 && !h.closed {
			h.connect()
		}
	}
}
