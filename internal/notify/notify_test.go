package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// hang bounds every wait of these tests: a hang detector, not a timing.
const hang = 10 * time.Second

// counted is a driver.Conn that can subscribe, and counts the sessions its
// hub opens.
type counted struct {
	driver.Conn
	listens atomic.Int32
}

func (c *counted) Listen(ctx context.Context, on func(driver.Event)) (driver.Session, error) {
	c.listens.Add(1)
	return c.Conn.(driver.Subscriber).Listen(ctx, on)
}

func (c *counted) Sharded() bool { return c.Conn.(driver.Subscriber).Sharded() }

// fixture is a hub over one driver, against a server of its own.
type fixture struct {
	srv  *redistest.Server
	conn *counted
}

// TestHub checks the hub against a real server, over every driver.
func TestHub(t *testing.T) {
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				f    func(*testing.T, fixture)
			}{
				{"ManyWaitersOnManyChannelsShareOneSession", hubOneSession},
				{"MessageWakesOnlyItsWaiter", hubMessageWakesItsWaiter},
				{"EveryoneWakesEveryWaiterOfTheChannel", hubEveryone},
				{"MessageJustBeforeItsWaiterJoinsIsDelivered", hubRecent},
				{"KilledConnectionReopensAndWakesEveryWaiter", hubKilled},
				{"LeaveAndLingerDropTheSubscription", hubLinger},
			} {
				t.Run(tc.name, func(t *testing.T) {
					srv := redistest.Start(t, 1)[0]
					tc.f(t, fixture{srv: srv, conn: &counted{Conn: d.Conn(t, srv.Addr)}})
				})
			}
		})
	}
}

// join makes the waiter id listen to channel, closed when t ends.
func (f fixture) join(t *testing.T, channel, id string) *Waiter {
	t.Helper()
	w := Listen([]driver.Conn{f.conn}, channel, id)
	if w == nil {
		t.Fatalf("Listen(%q, %q) = nil, want a waiter", channel, id)
	}
	t.Cleanup(w.Close)
	return w
}

// confirmed waits until the server confirmed the subscription to every
// channel, then drops the wake-ups that confirmation sent.
func (f fixture) confirmed(t *testing.T, channels []string, waiters ...*Waiter) {
	t.Helper()
	h := hubOf(f.conn)
	deadline := time.Now().Add(hang)
	for !h.confirmedAll(channels) {
		if time.Now().After(deadline) {
			t.Fatalf("subscriptions to %q not confirmed within %v", channels, hang)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, w := range waiters {
		select {
		case <-w.Wakes():
		default:
		}
	}
}

// confirmedAll reports whether every channel is confirmed on the current
// session.
func (h *hub) confirmedAll(channels []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range channels {
		if ch := h.chans[name]; ch == nil || !ch.confirmed {
			return false
		}
	}
	return true
}

// publish publishes payload on channel, as a release does.
func (f fixture) publish(t *testing.T, channel, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if _, err := driver.NewScript("return redis.call('PUBLISH', KEYS[1], ARGV[1])").Run(ctx, f.conn.Conn, []string{channel}, payload); err != nil {
		t.Fatalf("PUBLISH %q: %v", channel, err)
	}
}

// wantWake fails t unless w wakes, for reason want.
func wantWake(t *testing.T, w *Waiter, want strategy.Wake) {
	t.Helper()
	select {
	case got := <-w.Wakes():
		if got != want {
			t.Errorf("wake-up of waiter %s = %v, want %v", w.id, got, want)
		}
	case <-time.After(hang):
		t.Errorf("waiter %s not woken within %v, want %v", w.id, hang, want)
	}
}

// wantIdle fails t if w has a wake-up pending.
func wantIdle(t *testing.T, w *Waiter) {
	t.Helper()
	select {
	case got := <-w.Wakes():
		t.Errorf("waiter %s woken (%v), want no wake-up", w.id, got)
	default:
	}
}

// channelName returns a channel name unique to t.
func channelName(t *testing.T, i int) string {
	return fmt.Sprintf("{%s}:wake:%d", strings.ReplaceAll(t.Name(), "/", "."), i)
}

func hubOneSession(t *testing.T, f fixture) {
	var channels []string
	var first []*Waiter // each channel's first waiter, which joined before its subscription was sent
	for i := range 5 {
		channels = append(channels, channelName(t, i))
		for j := range 4 {
			w := f.join(t, channels[i], fmt.Sprintf("w%d.%d", i, j))
			if j == 0 {
				first = append(first, w)
			}
		}
	}
	// The others may join after the confirmation came, and then hear none:
	// they need none, since the channel was subscribed before they listened.
	for _, w := range first {
		wantWake(t, w, strategy.WakeSubscribed)
	}
	f.confirmed(t, channels)
	if n := f.conn.listens.Load(); n != 1 {
		t.Errorf("sessions opened for 20 waiters on 5 channels = %d, want 1", n)
	}
}

func hubMessageWakesItsWaiter(t *testing.T, f fixture) {
	ch := channelName(t, 0)
	a, b, c := f.join(t, ch, "a"), f.join(t, ch, "b"), f.join(t, ch, "c")
	f.confirmed(t, []string{ch}, a, b, c)
	f.publish(t, ch, "a")
	wantWake(t, a, strategy.WakeMessage)
	f.publish(t, ch, "c") // handled after a's: once c woke, a's was handled
	wantWake(t, c, strategy.WakeMessage)
	wantIdle(t, b)
}

func hubEveryone(t *testing.T, f fixture) {
	ch, other := channelName(t, 0), channelName(t, 1)
	a, b := f.join(t, ch, "a"), f.join(t, ch, "b")
	d, e := f.join(t, other, "d"), f.join(t, other, "e")
	f.confirmed(t, []string{ch, other}, a, b, d, e)
	f.publish(t, ch, Everyone)
	wantWake(t, a, strategy.WakeMessage)
	wantWake(t, b, strategy.WakeMessage)
	f.publish(t, other, "e") // handled after the first
	wantWake(t, e, strategy.WakeMessage)
	wantIdle(t, d)
}

func hubRecent(t *testing.T, f fixture) {
	ch := channelName(t, 0)
	a := f.join(t, ch, "a")
	f.confirmed(t, []string{ch}, a)
	f.publish(t, ch, "late")
	f.publish(t, ch, "a") // handled after the first
	wantWake(t, a, strategy.WakeMessage)
	late := f.join(t, ch, "late")
	select {
	case got := <-late.Wakes():
		if got != strategy.WakeMessage {
			t.Errorf("wake-up of a waiter that joins just after its message = %v, want %v", got, strategy.WakeMessage)
		}
	default:
		t.Errorf("a waiter that joins just after its message has no wake-up pending, want %v", strategy.WakeMessage)
	}
}

func hubKilled(t *testing.T, f fixture) {
	ch, other := channelName(t, 0), channelName(t, 1)
	waiters := []*Waiter{f.join(t, ch, "a"), f.join(t, ch, "b"), f.join(t, other, "c")}
	f.confirmed(t, []string{ch, other}, waiters...)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if _, err := f.srv.Command(ctx, "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
		t.Fatalf("CLIENT KILL TYPE pubsub: %v", err)
	}
	for _, w := range waiters {
		wantWake(t, w, strategy.WakeResubscribed)
	}
	if n := f.conn.listens.Load(); n != 2 {
		t.Errorf("sessions opened = %d, want 2 (the first, and one after the kill)", n)
	}
	f.publish(t, ch, "a")
	wantWake(t, waiters[0], strategy.WakeMessage)
}

func hubLinger(t *testing.T, f fixture) {
	shorten(t, 100*time.Millisecond)
	ch := channelName(t, 0)
	w := Listen([]driver.Conn{f.conn}, ch, "a")
	f.confirmed(t, []string{ch}, w)
	w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	for {
		n, err := f.srv.Command(ctx, "PUBSUB", "NUMSUB", ch)
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB: %v", err)
		}
		if n == ch+" 0" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := hubs.Load(driver.Conn(f.conn)); ok {
		t.Errorf("the hub of a connection whose last channel lingered out is still in use, want it gone")
	}
}

// shorten sets linger to d until t ends.
func shorten(t *testing.T, d time.Duration) {
	old := linger
	linger = d
	t.Cleanup(func() { linger = old })
}

// failing is a driver.Conn whose sessions fail: Listen fails, or the
// session ends at once.
type failing struct {
	driver.Conn
	listens atomic.Int32
	open    bool // Listen succeeds, and the session ends at once
}

var errDown = errors.New("down")

func (c *failing) Listen(_ context.Context, on func(driver.Event)) (driver.Session, error) {
	c.listens.Add(1)
	if !c.open {
		return nil, errDown
	}
	go on(driver.Event{Kind: driver.Closed, Err: errDown})
	return nopSession{}, nil
}

func (c *failing) Sharded() bool { return false }

type nopSession struct{}

func (nopSession) Subscribe(context.Context, ...string) error   { return nil }
func (nopSession) Unsubscribe(context.Context, ...string) error { return nil }
func (nopSession) Close() error                                 { return nil }

// TestHubBacksOffWhenSessionsKeepFailing: a hub whose sessions keep failing
// tries again with a growing backoff, not in a tight loop.
func TestHubBacksOffWhenSessionsKeepFailing(t *testing.T) {
	for _, tc := range []struct {
		name string
		open bool
	}{
		{"ListenFails", false},
		{"SessionEndsAtOnce", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shorten(t, 10*time.Millisecond)
			c := &failing{open: tc.open}
			w := Listen([]driver.Conn{c}, "{k}:wake", "a")
			const window = 2 * time.Second
			time.Sleep(window)
			w.Close()
			// With backoffs of 0, 50 ms, 100 ms, … up to 1 s, about 6 in 2 s;
			// a loop with no backoff would make thousands.
			n := c.listens.Load()
			t.Logf("sessions opened in %v: %d", window, n)
			if n < 2 || n > 20 {
				t.Errorf("sessions opened in %v while each fails = %d, want between 2 and 20", window, n)
			}
		})
	}
}
