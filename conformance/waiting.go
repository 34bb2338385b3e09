package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/glob"
)

// The properties of notification waiting count and order what the waiters
// go through (a waitTrace), and never measure time.
const (
	// noTimer is the retry delay of waiters that must be woken by a
	// message: longer than waitBound, it never fires within a property.
	noTimer = time.Minute
	// waitBound bounds every wait of these properties: a hang detector.
	waitBound = 20 * time.Second
	// heldTTL is the TTL of the holders whose release the waiters wait for:
	// the head's timer (the holder's remaining TTL) never fires either.
	heldTTL = time.Minute
)

// Entries of a waitTrace.
const (
	held      = "attempt: held"
	obtained  = "attempt: obtained"
	released  = "holder released"
	byMessage = "woken: message"
	byTimer   = "woken: timer"
	missed    = "missed"
	enqueued  = "enqueued"
)

// waitTrace records what one Obtain that waits goes through, in order: its
// attempts (held, obtained), its Wait events ("woken: <reason>", "enqueued
// <rank>", missed), the clean-ups it leaves behind ("cleanup: <error>"),
// and the marks a property adds (released). It is safe for concurrent use.
type waitTrace struct {
	// failed, if set, runs within the Attempt hook after each attempt that
	// found the lock held, with the trace so far.
	failed func(entries []string)
	// waited, if set, runs within the Wait hook after each event, while the
	// waiter sleeps between two attempts.
	waited func(lock.Event)

	mu       sync.Mutex
	entries  []string
	ranks    chan int      // the rank of the first enqueued event
	cleanups chan struct{} // a clean-up ended
}

func newWaitTrace() *waitTrace {
	return &waitTrace{ranks: make(chan int, 1), cleanups: make(chan struct{}, 1)}
}

// add records an entry, and returns the trace so far.
func (w *waitTrace) add(e string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.entries = append(w.entries, e)
	return slices.Clone(w.entries)
}

// all returns the trace.
func (w *waitTrace) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.entries)
}

// after returns the entries after mark; none if mark was not recorded.
func (w *waitTrace) after(mark string) []string {
	all := w.all()
	i := slices.Index(all, mark)
	if i < 0 {
		return nil
	}
	return all[i+1:]
}

// count returns how many entries of the trace are e.
func count(entries []string, e string) int {
	n := 0
	for _, x := range entries {
		if x == e {
			n++
		}
	}
	return n
}

// option returns the hooks that record the trace.
func (w *waitTrace) option() lock.Option {
	return lock.WithHooks(&lock.Hooks{
		Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
			err := next(ctx)
			switch {
			case err == nil:
				w.add(obtained)
			case errors.Is(err, lock.ErrNotObtained):
				entries := w.add(held)
				if w.failed != nil {
					w.failed(entries)
				}
			default:
				w.add("attempt: " + err.Error())
			}
			return err
		},
		Wait: func(_ context.Context, e lock.Event) {
			switch e.Op {
			case "enqueued":
				w.add(fmt.Sprint(enqueued, " ", e.Rank))
				select {
				case w.ranks <- e.Rank:
				default:
				}
			case "woken":
				w.add("woken: " + e.Reason)
			default:
				w.add(e.Op)
			}
			if w.waited != nil {
				w.waited(e)
			}
		},
		Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			err := next(ctx)
			if e.Op == "cleanup" {
				w.add(fmt.Sprint("cleanup: ", err))
				select {
				case w.cleanups <- struct{}{}:
				default:
				}
			}
			return err
		},
	})
}

// listening reports whether entries show the waiter listening: woken by
// the confirmation of its subscription, which Listen sends once the
// release of a lock can reach it, and tried again after it.
func listening(entries []string) bool {
	i := slices.Index(entries, "woken: subscribed")
	return i >= 0 && slices.Contains(entries[i+1:], held)
}

// waiter is an Obtain that waits, running in the background.
type waiter struct {
	trace *waitTrace
	done  chan struct{}
	lk    *lock.Lock
	err   error
}

// wait starts an Obtain of key on l that waits as retry says, bounded by
// waitBound, with its trace recorded in tr, and opts. then, if not nil,
// runs with the lock once it is obtained.
func wait(ctx context.Context, l *lock.Locker, key string, retry lock.RetryPolicy, tr *waitTrace, then func(*lock.Lock), opts ...lock.Option) *waiter {
	w := &waiter{trace: tr, done: make(chan struct{})}
	opts = append([]lock.Option{lock.WithRetry(retry), tr.option()}, opts...)
	go func() {
		defer close(w.done)
		ctx, cancel := context.WithTimeout(ctx, waitBound)
		defer cancel()
		w.lk, w.err = l.Obtain(ctx, key, heldTTL, opts...)
		if w.err == nil && then != nil {
			then(w.lk)
		}
	}()
	return w
}

// result waits for the Obtain to return and fails t, showing the trace,
// unless it obtained the lock, which t releases when it ends.
func (w *waiter) result(t *testing.T, what string) *lock.Lock {
	t.Helper()
	<-w.done
	if w.err != nil {
		t.Fatalf("%s: Obtain = %v, want a lock; its trace: %q", what, w.err, w.trace.all())
	}
	release(t, w.lk)
	return w.lk
}

// rank waits for the waiter's enqueued event and returns its rank; it
// fails t if the Obtain returned first.
func (w *waiter) rank(t *testing.T, what string) int {
	t.Helper()
	select {
	case r := <-w.trace.ranks:
		return r
	case <-w.done:
		t.Fatalf("%s: Obtain returned (%v) before it was enqueued; its trace: %q", what, w.err, w.trace.all())
	}
	return 0
}

// waiting is how a Locker waits, as a probe found.
type waiting struct {
	notifies bool // its waiters are woken: Wait events were reported
	queues   bool // its strategy queues them: an attempt reported a rank
}

// probeWaiting finds how the Locker waits: an Obtain of a held key, with
// two attempts a short delay apart, reports a wake-up between them only if
// the Locker listens for notifications, and its enqueued event only if the
// strategy queues.
func (s suite) probeWaiting(t *testing.T, ctx context.Context) waiting {
	t.Helper()
	key := Key(t)
	s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL)
	tr := newWaitTrace()
	w := wait(ctx, s.h.NewLocker(t), key, lock.LimitAttempts(lock.Linear(10*time.Millisecond), 2), tr, nil)
	<-w.done
	if !errors.Is(w.err, lock.ErrNotObtained) {
		t.Fatalf("an Obtain of a held lock with two attempts = %v, want ErrNotObtained", w.err)
	}
	entries := tr.all()
	return waiting{
		notifies: slices.ContainsFunc(entries, func(e string) bool { return strings.HasPrefix(e, "woken: ") }),
		queues:   slices.ContainsFunc(entries, func(e string) bool { return strings.HasPrefix(e, enqueued) }),
	}
}

// needNotification skips t unless the Locker wakes its waiters, and, when
// queue is set, queues them.
func (s suite) needNotification(t *testing.T, ctx context.Context, queue bool) waiting {
	t.Helper()
	w := s.probeWaiting(t, ctx)
	if !w.notifies {
		t.Skip("the Locker does not wake its waiters: its strategy is no strategy.Notifier, its Listen returns nil " +
			"(a driver without pub/sub), or its Lockers poll (lock.WithPolling); notification waiting does not apply")
	}
	if queue && !w.queues {
		t.Skip("the strategy wakes its waiters but keeps no queue (no attempt reported a place in one, Grant.Position): " +
			"it promises no order among them, as a Redlock's hints do not")
	}
	return w
}

func (s suite) releaseWakesTheHead(t *testing.T, ctx context.Context) {
	s.needNotification(t, ctx, false)
	key := Key(t)
	h := s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL)
	tr := newWaitTrace()
	var releaseErr error
	releaseHolder := sync.OnceFunc(func() { releaseErr = h.Release(ctx); tr.add(released) })
	tr.failed = func(entries []string) {
		if listening(entries) {
			releaseHolder()
		}
	}
	wait(ctx, s.h.NewLocker(t), key, lock.Linear(noTimer), tr, nil).result(t, "the waiter behind the holder")
	if releaseErr != nil {
		t.Fatalf("the holder's Release = %v, want nil", releaseErr)
	}
	got := tr.after(released)
	if want := []string{byMessage, obtained}; !slices.Equal(got, want) {
		t.Errorf("the waiter after the holder's release: %q, want %q (its whole trace: %q)", got, want, tr.all())
	}
}

func (s suite) waitersObtainInTurn(t *testing.T, ctx context.Context) {
	s.needNotification(t, ctx, true)
	s.waitersInTurn(t, ctx, s.obtain(t, ctx, s.h.NewLocker(t), Key(t), heldTTL), 5)
}

// waitersInTurn starts n waiters for h's key, with opts, each once the one
// before is enqueued, and checks that they get ranks 1, 2, 3…, and that
// once h is released they obtain the lock in that order, each releasing
// it at once.
func (s suite) waitersInTurn(t *testing.T, ctx context.Context, h *lock.Lock, n int, opts ...lock.Option) {
	var (
		mu    sync.Mutex
		order []int
		want  []int
	)
	waiters := make([]*waiter, n)
	for i := range waiters {
		want = append(want, i+1)
		waiters[i] = wait(ctx, s.h.NewLocker(t), h.Key(), lock.Linear(noTimer), newWaitTrace(), func(lk *lock.Lock) {
			mu.Lock()
			order = append(order, i+1)
			mu.Unlock()
			if err := lk.Release(ctx); err != nil {
				t.Errorf("waiter %d's Release = %v, want nil", i+1, err)
			}
		}, opts...)
		if r := waiters[i].rank(t, fmt.Sprintf("waiter %d", i+1)); r != i+1 {
			t.Errorf("waiter %d, enqueued after %d others: rank %d, want %d", i+1, i, r, i+1)
		}
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("the holder's Release = %v, want nil", err)
	}
	for i, w := range waiters {
		w.result(t, fmt.Sprintf("waiter %d", i+1))
	}
	if !slices.Equal(order, want) {
		t.Errorf("the waiters obtained the lock in the order %v, want %v, the order they queued in", order, want)
	}
}

// lostMessageCostsOnePoll: the key deleted behind the holder's back sends
// no message. A strategy that queues tells the waiter the holder's TTL
// (Grant.HolderTTL), as its head's timer needs, so the Locker also reports
// the lost message.
func (s suite) lostMessageCostsOnePoll(t *testing.T, ctx context.Context) {
	queues := s.needNotification(t, ctx, false).queues
	const d = 200 * time.Millisecond // the waiter's timer
	key := Key(t)
	s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL)
	conns := s.h.Conns(t)
	tr := newWaitTrace()
	var lossErr error
	lose := sync.OnceFunc(func() {
		for _, c := range conns {
			if _, err := c.Del(ctx, key); err != nil {
				lossErr = err
			}
		}
		tr.add(released)
	})
	tr.failed = func(entries []string) {
		if listening(entries) {
			lose()
		}
	}
	wait(ctx, s.h.NewLocker(t), key, lock.Linear(d), tr, nil).result(t, "the waiter whose message was lost")
	if lossErr != nil {
		t.Fatalf("deleting the key behind the holder's back: %v", lossErr)
	}
	want := []string{byTimer, obtained}
	if queues {
		want = append(want, missed)
	}
	if got := tr.after(released); !slices.Equal(got, want) {
		t.Errorf("the waiter after a release that sent no message: %q, want %q (its whole trace: %q)", got, want, tr.all())
	}
}

// deadWaiterDoesNotStall: the dead waiter's patience is its deadline, two
// seconds; the live one obtains within ceil(patience/d) + 3 attempts (its
// timer wake-ups until the head's patience ends, one after, and a wake-up
// by message and one by its subscription).
func (s suite) deadWaiterDoesNotStall(t *testing.T, ctx context.Context) {
	s.needNotification(t, ctx, true)
	const (
		patience = 2 * time.Second        // the dead waiter's deadline
		d        = 250 * time.Millisecond // the live waiter's timer
		bound    = int((patience+d-1)/d) + 3
	)
	key := Key(t)
	h := s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL)

	dead, stalled := newWaitTrace(), make(chan struct{})
	dead.waited = func(e lock.Event) {
		if e.Op == "enqueued" {
			<-stalled // never comes back, until the property ends
		}
	}
	dctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	dw := wait(dctx, s.h.NewLocker(t), key, lock.Linear(noTimer), dead, nil)
	defer func() { close(stalled); <-dw.done }()
	select {
	case r := <-dead.ranks:
		if r != 1 {
			t.Fatalf("the dead waiter, queued behind the holder: rank %d, want 1", r)
		}
	case <-dw.done:
		if errors.Is(dw.err, context.DeadlineExceeded) {
			t.Skipf("the dead waiter's first attempt did not come back within its deadline, %v: the machine stalled, and the property could not be checked", patience)
		}
		t.Fatalf("the dead waiter: Obtain returned (%v) before it was enqueued; its trace: %q", dw.err, dead.all())
	}

	live := newWaitTrace()
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		releaseErr error
		past       atomic.Bool
	)
	releaseHolder := sync.OnceFunc(func() { releaseErr = h.Release(ctx); live.add(released) })
	live.failed = func([]string) {
		releaseHolder()
		if count(live.after(released), held)+1 > bound {
			past.Store(true)
			stop() // no need to wait longer: the count is past its bound
		}
	}
	lk, err := s.h.NewLocker(t).Obtain(lctx, key, heldTTL, lock.WithRetry(lock.Linear(d)), live.option())
	if past.Load() {
		t.Fatalf("the waiter behind a dead one: more than %d attempts after the release without the lock, want it within %d; its trace: %q", bound, bound, live.all())
	}
	if err != nil {
		t.Fatalf("the waiter behind a dead one: Obtain = %v, want a lock; its trace: %q", err, live.all())
	}
	release(t, lk)
	if releaseErr != nil {
		t.Fatalf("the holder's Release = %v, want nil", releaseErr)
	}
	after := live.after(released)
	if n := count(after, held) + count(after, obtained); n > bound {
		t.Errorf("attempts of the waiter behind a dead one, after the release: %d, want at most %d (its trace: %q)", n, bound, live.all())
	}
}

// cancelledWaiterLeavesNothing: with a strategy that queues, the next waiter
// is the head once the one that gave up ended its clean-up.
func (s suite) cancelledWaiterLeavesNothing(t *testing.T, ctx context.Context) {
	queues := s.needNotification(t, ctx, false).queues
	for _, c := range []struct {
		name    string
		timeout time.Duration // of its context; 0: none, and it is cancelled while it first sleeps
		want    error
	}{
		{"at its deadline", time.Second, context.DeadlineExceeded},
		// Without a deadline, its patience is three timers: three minutes.
		{"cancelled", 0, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := Key(t)
			h := s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if c.timeout > 0 {
				wctx, cancel = context.WithTimeout(wctx, c.timeout)
				defer cancel()
			}
			tr := newWaitTrace()
			if c.timeout == 0 {
				// Cancelled while it sleeps, with no attempt on its way.
				tr.waited = func(lock.Event) { cancel() }
			}
			w := wait(wctx, s.h.NewLocker(t), key, lock.Linear(noTimer), tr, nil)
			<-w.done
			if !errors.Is(w.err, lock.ErrNotObtained) || !errors.Is(w.err, c.want) {
				t.Fatalf("Obtain of a held lock, %s = %v, want ErrNotObtained and %v", c.name, w.err, c.want)
			}
			if queues {
				select {
				case <-tr.cleanups:
				case <-time.After(waitBound):
					t.Fatalf("the waiter that gave up: no clean-up ended within %v; its trace: %q", waitBound, tr.all())
				}
				next := wait(ctx, s.h.NewLocker(t), key, lock.Linear(noTimer), newWaitTrace(), nil)
				if r := next.rank(t, "the next waiter"); r != 1 {
					t.Fatalf("the next waiter, once the one before left: rank %d, want 1 (the waiter that gave up is still queued; its trace: %q)", r, tr.all())
				}
				if err := h.Release(ctx); err != nil {
					t.Fatalf("the holder's Release = %v, want nil", err)
				}
				if err := next.result(t, "the next waiter").Release(ctx); err != nil {
					t.Fatalf("the next waiter's Release = %v, want nil", err)
				}
			} else if err := h.Release(ctx); err != nil {
				t.Fatalf("the holder's Release = %v, want nil", err)
			}
			if left := s.keysLeft(t, ctx, key); len(left) > 0 {
				t.Errorf("keys left %v after the lock was released: %q, want none", waitBound, left)
			}
		})
	}
}

// keysScript lists the keys that match a pattern, on the server of KEYS[1]
// (in a Cluster, the master of its slot, where its companion keys live).
var keysScript = driver.NewScript(`return redis.call('KEYS', ARGV[1])`)

// keysLeft returns the keys whose names contain any of keys, on every
// server, once there are none, or waitBound has passed: a release may
// finish in the background (Redlock's returns once a quorum of nodes
// confirmed it, and its deletes on the others go on, bounded by its node
// timeout), and a strategy without scripts deletes in more round trips.
func (s suite) keysLeft(t *testing.T, ctx context.Context, keys ...string) []string {
	t.Helper()
	conns := s.h.Conns(t)
	for deadline := time.Now().Add(waitBound); ; time.Sleep(10 * time.Millisecond) {
		var left []string
		for _, key := range keys {
			for _, c := range conns {
				v, err := keysScript.Run(ctx, c, []string{key}, "*"+glob.Escape(key)+"*")
				if err != nil {
					t.Fatalf("KEYS *%s*: %v", key, err)
				}
				found, _ := v.([]any)
				for _, f := range found {
					left = append(left, fmt.Sprint(f))
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}
