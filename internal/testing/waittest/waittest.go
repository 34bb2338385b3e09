// Package waittest helps the tests of waiting by notification: it counts
// what waiters report through lock.Hooks.Wait, tells when a channel's
// subscription has reached a server, can hide the wake-ups of a
// subscription's confirmation, so that a test knows why a waiter woke,
// and runs waiters that contend for one key.
package waittest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/glob"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// Recorder counts the Wait events of the Obtains it is installed in. It is
// safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	counts map[string]int
	last   string
}

// Option installs r in an Obtain.
func (r *Recorder) Option() lock.Option {
	return lock.WithHooks(&lock.Hooks{Wait: func(_ context.Context, e lock.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.counts == nil {
			r.counts = map[string]int{}
		}
		name := e.Op
		if e.Op == "woken" {
			name += ":" + e.Reason
			r.last = e.Reason
		}
		r.counts[name]++
	}})
}

// Count returns how many events named what were reported: "enqueued",
// "missed", or "woken:" followed by a reason ("woken:message",
// "woken:timer", ...).
func (r *Recorder) Count(what string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[what]
}

// Last returns the reason of the last wake-up, "" if there was none.
func (r *Recorder) Last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// String returns the counts, for failure messages and logs.
func (r *Recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var counts []string
	for _, k := range []string{"enqueued", "woken:message", "woken:subscribed", "woken:resubscribed", "woken:timer", "missed"} {
		if n := r.counts[k]; n > 0 {
			counts = append(counts, k+"="+strconv.Itoa(n))
		}
	}
	return "{" + strings.Join(counts, " ") + "}"
}

// Contender is a waiter that [Contend] runs: it obtains the lock with L
// and Opts, its Rec installed, and counts the locks it got in Got; Err is
// the error that stopped it. An Obtain whose error matches Again (when
// set) is made once more.
type Contender struct {
	L     *lock.Locker
	Rec   Recorder
	Opts  []lock.Option
	Again func(error) bool
	Got   int
	Err   error
}

// Contend runs the contenders at once, each until it obtained key times,
// holding the lock inside det for a millisecond each time, and waits for
// them. It fails t for a contender that got fewer, and for holders that
// overlapped in det.
func Contend(t testing.TB, ctx context.Context, key string, det *conformance.Detector, times int, cs ...*Contender) {
	t.Helper()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.Got < times {
				lk, err := c.L.Obtain(ctx, key, 10*time.Second, append(c.Opts, c.Rec.Option())...)
				if err != nil && c.Again != nil && c.Again(err) && ctx.Err() == nil {
					continue
				}
				if err != nil {
					c.Err = err
					return
				}
				det.Hold(time.Millisecond)
				if err := lk.Release(ctx); err != nil {
					c.Err = fmt.Errorf("release: %w", err)
					return
				}
				c.Got++
			}
		}()
	}
	wg.Wait()
	for i, c := range cs {
		if c.Err != nil || c.Got != times {
			t.Errorf("waiter %d: obtained %d of %d (%v), want all", i, c.Got, times, c.Err)
		}
	}
	if n := det.Overlaps(); n != 0 {
		t.Errorf("overlaps = %d, want 0", n)
	}
}

// Subscribers waits until n clients subscribe to channel, or, in all, to
// the channels whose names start with channel followed by ":" (the
// channels of single's Strategies, one each: {K}:wake:<id>).
func Subscribers(t testing.TB, ctx context.Context, srv *redistest.Server, channel string, n int) {
	t.Helper()
	pattern := glob.Escape(channel) + "*"
	for {
		got, err := subscribers(ctx, srv, channel, pattern)
		if err == nil && got == n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("subscribers of %s on %s = %d, %v; want %d before the deadline", pattern, srv.Addr, got, err, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// subscribers counts the subscribers of channel and of its ":" suffixed
// channels, which pattern matches.
func subscribers(ctx context.Context, srv *redistest.Server, channel, pattern string) (int, error) {
	reply, err := srv.Command(ctx, "PUBSUB", "CHANNELS", pattern)
	if err != nil {
		return 0, err
	}
	numsub := []string{"PUBSUB", "NUMSUB"}
	for _, c := range strings.Fields(reply) {
		if c == channel || strings.HasPrefix(c, channel+":") {
			numsub = append(numsub, c)
		}
	}
	if reply, err = srv.Command(ctx, numsub...); err != nil {
		return 0, err
	}
	f, total := strings.Fields(reply), 0
	for i := 1; i < len(f); i += 2 {
		n, err := strconv.Atoi(f[i])
		if err != nil {
			return 0, fmt.Errorf("PUBSUB NUMSUB reply %q: %w", reply, err)
		}
		total += n
	}
	return total, nil
}

// MessagesOnly returns s, a strategy.Notifier, with listeners that drop
// the wake-ups of a subscription's confirmation (strategy.WakeSubscribed):
// a test that publishes once the subscription reached the server (see
// Subscribers) then knows that a waiter woken before its timer was woken by
// that message.
func MessagesOnly(s strategy.Strategy) strategy.Strategy {
	return messagesOnly{s, s.(strategy.Notifier)}
}

type messagesOnly struct {
	strategy.Strategy
	strategy.Notifier // Leave as it is
}

func (m messagesOnly) Listen(key, id string) strategy.Listener {
	l := m.Notifier.Listen(key, id)
	if l == nil {
		return nil
	}
	f := &filtered{l: l, c: make(chan strategy.Wake, 1), done: make(chan struct{})}
	go f.relay()
	return f
}

// filtered relays a listener's wake-ups but WakeSubscribed.
type filtered struct {
	l    strategy.Listener
	c    chan strategy.Wake
	once sync.Once
	done chan struct{}
}

func (f *filtered) relay() {
	for {
		select {
		case w := <-f.l.Wakes():
			if w == strategy.WakeSubscribed {
				continue
			}
			select {
			case f.c <- w:
			default:
			}
		case <-f.done:
			return
		}
	}
}

func (f *filtered) Wakes() <-chan strategy.Wake { return f.c }

func (f *filtered) Close() {
	f.once.Do(func() { close(f.done); f.l.Close() })
}
