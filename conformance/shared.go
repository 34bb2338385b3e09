package conformance

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// needShared skips t unless the Locker shares locks, as needSupport finds
// from an Obtain of a free key with lock.WithPermits(2).
func (s suite) needShared(t *testing.T, ctx context.Context) {
	t.Helper()
	lk, err := s.h.NewLocker(t).Obtain(ctx, Key(t), longTTL, lock.WithPermits(2))
	needSupport(t, ctx, "Obtain of a free key WithPermits(2)", lk, err, "permits",
		"the Locker does not share locks (%v): the shared-lock properties do not apply")
}

// holders counts the holders inside a shared lock, and the entries that
// broke its rule: more than limit holders (a semaphore), or a writer with
// anyone else (a read-write lock, limit 0).
type holders struct {
	limit int

	mu               sync.Mutex
	readers, writers int
	crashed          []time.Time // the ValidUntil of each holder that crashed
	most             int         // the most holders inside at once
	entries, broken  int
}

// enter records a holder entering: a writer, or a reader (or a permit). A
// holder that crashed counts as inside while its ValidUntil is ahead:
// until then, its lease cannot have ended on the server. (Read when a
// holder enters, never by a timer, which a busy machine may run late.)
func (h *holders) enter(write bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries++
	now, crashed := time.Now(), 0
	for _, until := range h.crashed {
		if now.Before(until) {
			crashed++
		}
	}
	inside := h.readers + crashed
	switch {
	case h.limit > 0 && inside+1 > h.limit,
		h.writers > 0,
		write && inside > 0:
		h.broken++
	}
	if write {
		h.writers++
	} else {
		h.readers++
	}
	h.most = max(h.most, inside+h.writers+1)
}

// crash records a holder that entered and will never leave: its lease ends
// on the server at the earliest at validUntil.
func (h *holders) crash(write bool, validUntil time.Time) {
	h.exit(write)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.crashed = append(h.crashed, validUntil)
}

// exit records a holder leaving.
func (h *holders) exit(write bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if write {
		h.writers--
	} else {
		h.readers--
	}
}

// downgrade records a writer becoming a reader.
func (h *holders) downgrade() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writers--
	h.readers++
}

// check fails t if an entry broke the rule.
func (h *holders) check(t *testing.T, what string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("%d entries, at most %d holders inside at once", h.entries, h.most)
	rule := "a writer inside with another holder"
	if h.limit > 0 {
		rule = "more holders than permits"
	}
	if h.broken > 0 {
		t.Errorf("%d of %d entries into the %s broke its rule (%s), want none", h.broken, h.entries, what, rule)
	}
}

// contend runs the Harness's goroutines, each on a Locker of its own, each
// taking turns at one until turns are spent; turn reports an error to stop
// its goroutine.
func (s suite) contend(t *testing.T, turns *turns, turn func(l *lock.Locker, n int64) error) {
	t.Helper()
	var wg sync.WaitGroup
	for range s.h.Goroutines {
		l := s.h.NewLocker(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n, ok := turns.next(); ok; n, ok = turns.next() {
				if err := turn(l, n); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	turns.logShort(t)
}

// contentionRetry is the retry policy of the contention properties.
var contentionRetry = lock.WithRetry(lock.Exponential(time.Millisecond, 8*time.Millisecond))

// semaphoreNeverMoreThanN: first, a fourth Obtain while 3 permits are held
// is refused, which catches a semaphore that admits too many however the
// goroutines are scheduled. A crashed holder counts as inside while its
// ValidUntil is ahead, before which its lease cannot end.
func (s suite) semaphoreNeverMoreThanN(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	const n = 3
	key := Key(t)
	var held []*lock.Lock
	for range n {
		held = append(held, s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL, lock.WithPermits(n)))
	}
	refused(t, ctx, s.h.NewLocker(t), key, "Obtain while all the permits are held", lock.WithPermits(n))
	for _, lk := range held {
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release of a permit = %v, want nil", err)
		}
	}
	h := &holders{limit: n}
	s.contend(t, newTurns(max(s.h.Acquisitions/4, 4*s.h.Goroutines)), func(l *lock.Locker, turn int64) error {
		crash := turn%8 == 7
		ttl := longTTL
		if crash {
			ttl = s.h.ShortTTL
		}
		lk, err := l.Obtain(ctx, key, ttl, lock.WithPermits(n), contentionRetry)
		if err != nil {
			return errors.New("Obtain of a permit under contention = " + err.Error() + ", want a lock")
		}
		h.enter(false)
		if crash {
			h.crash(false, lk.ValidUntil())
			return nil
		}
		time.Sleep(200 * time.Microsecond) // long enough for an overlap to be caught
		h.exit(false)
		if err := lk.Release(ctx); err != nil && !excusedRelease(t, lk, err) {
			return errors.New("Release of a permit under contention = " + err.Error() + ", want nil")
		}
		return nil
	})
	h.check(t, "semaphore of 3 permits")
}

func (s suite) semaphoreCrashedHolderReturns(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	key := Key(t)
	l := s.h.NewLocker(t)
	permits := lock.WithPermits(2)
	crashed := s.obtain(t, ctx, l, key, s.h.ShortTTL, permits)
	s.obtain(t, ctx, l, key, longTTL, permits)
	refused(t, ctx, l, key, "Obtain while both permits are held", permits)
	wctx, cancel := context.WithTimeout(ctx, s.expiryLimit())
	defer cancel()
	lk, err := l.Obtain(wctx, key, longTTL, permits, lock.WithRetry(lock.Linear(s.h.ShortTTL/10)))
	if err != nil {
		t.Fatalf("Obtain that waits for the crashed holder's lease to end = %v, want a lock", err)
	}
	release(t, lk)
	if valid := crashed.ValidUntil(); time.Now().Before(valid) {
		t.Errorf("the crashed holder's permit was taken before its ValidUntil, %v, want after its lease", valid)
	}
	was, _ := crashed.Permit()
	if got, ok := lk.Permit(); !ok || got != was {
		t.Errorf("the permit after the crash: %d, %v, want %d, true: the crashed holder's", got, ok, was)
	}
	if err := crashed.Refresh(ctx, longTTL); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("the crashed holder's Refresh after its lease = %v, want ErrNotHeld", err)
	}
}

func (s suite) semaphoreLimitMismatch(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	key := Key(t)
	l := s.h.NewLocker(t)
	h := s.obtain(t, ctx, l, key, longTTL, lock.WithPermits(3))
	for _, c := range []struct {
		name string
		opt  lock.Option
	}{
		{"more permits", lock.WithPermits(4)},
		{"fewer permits", lock.WithPermits(2)},
		{"read side", lock.WithRead()},
		{"write side", lock.WithWrite()},
	} {
		t.Run(c.name, func(t *testing.T) {
			lk, err := l.Obtain(ctx, key, longTTL, c.opt)
			if !errors.Is(err, lock.ErrMismatch) || errors.Is(err, lock.ErrNotObtained) {
				release(t, lk)
				t.Errorf("Obtain of a semaphore of 3 permits, %s = %v, want ErrMismatch, not ErrNotObtained", c.name, err)
			}
		})
	}
	t.Run("plain lock", func(t *testing.T) {
		plain := Key(t)
		s.obtain(t, ctx, l, plain, longTTL)
		lk, err := l.Obtain(ctx, plain, longTTL, lock.WithPermits(3))
		if !errors.Is(err, lock.ErrMismatch) {
			release(t, lk)
			t.Errorf("Obtain WithPermits(3) of a plain lock's key = %v, want ErrMismatch", err)
		}
	})
	t.Run("nothing written", func(t *testing.T) {
		st, err := l.Inspect(ctx, key)
		if err != nil || st.Permits != 3 || len(st.Holders) != 1 {
			t.Errorf("Inspect after the refusals = %d permits, %d holders, %v, want 3, 1, nil", st.Permits, len(st.Holders), err)
		}
	})
	t.Run("new limit once free", func(t *testing.T) {
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		s.obtain(t, ctx, l, key, longTTL, lock.WithPermits(2))
	})
}

// semaphorePermits: a strategy may refuse WithFencing, as FencingTokens
// allows; the permits alone are checked then.
func (s suite) semaphorePermits(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	key := Key(t)
	l := s.h.NewLocker(t)
	opts := []lock.Option{lock.WithPermits(3), lock.WithFencing()}
	if lk, err := l.Obtain(ctx, Key(t), longTTL, opts...); errors.As(err, new(*lock.ArgumentError)) {
		t.Logf("WithFencing refused (%v): the permits alone are checked", err)
		opts = opts[:1]
	} else {
		release(t, lk)
	}
	var held [3]*lock.Lock
	for range held {
		lk := s.obtain(t, ctx, l, key, longTTL, opts...)
		p, ok := lk.Permit()
		if !ok || p < 0 || p >= len(held) || held[p] != nil {
			t.Fatalf("Permit() = %d, %v, want a free permit from 0 to 2, true", p, ok)
		}
		held[p] = lk
	}
	if err := held[1].Release(ctx); err != nil {
		t.Fatalf("Release of permit 1 = %v, want nil", err)
	}
	next := s.obtain(t, ctx, l, key, longTTL, opts...)
	if p, ok := next.Permit(); !ok || p != 1 {
		t.Errorf("Permit() after permit 1 was released = %d, %v, want 1, true: the lowest free", p, ok)
	}
	if len(opts) == 1 {
		return
	}
	before, _ := held[1].Fence()
	after, ok := next.Fence()
	if !ok || before <= 0 || after <= before {
		t.Errorf("permit 1's fencing tokens: %d, then %d (%v), want positive and increasing", before, after, ok)
	}
}

func (s suite) semaphoreWaitersInTurn(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	s.needNotification(t, ctx, true)
	key, permits := Key(t), lock.WithPermits(2)
	first := s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL, permits)
	s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL, permits)
	s.waitersInTurn(t, ctx, first, 4, permits)
}

// readWriteExclusion: half the turns read, a quarter write, and a quarter
// write and then downgrade.
func (s suite) readWriteExclusion(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	key := Key(t)
	h := &holders{}
	// At least 16 turns a goroutine: with fewer (50 in the quick run),
	// the mutant readers-apart-from-writers once found no reader beside a
	// writer on a loaded embedded server.
	s.contend(t, newTurns(max(s.h.Acquisitions/4, 16*s.h.Goroutines)), func(l *lock.Locker, turn int64) error {
		write, downgrade := turn%4 < 2, turn%4 == 1
		side := lock.WithRead()
		if write {
			side = lock.WithWrite()
		}
		lk, err := l.Obtain(ctx, key, longTTL, side, contentionRetry)
		if err != nil {
			return errors.New("Obtain of a read-write lock under contention = " + err.Error() + ", want a lock")
		}
		h.enter(write)
		time.Sleep(200 * time.Microsecond) // long enough for an overlap to be caught
		if downgrade {
			h.downgrade() // first: a reader may enter as soon as the server has it
			if err := lk.Downgrade(ctx); err != nil {
				return errors.New("Downgrade under contention = " + err.Error() + ", want nil")
			}
			write = false
			time.Sleep(200 * time.Microsecond)
		}
		h.exit(write)
		if err := lk.Release(ctx); err != nil && !excusedRelease(t, lk, err) {
			return errors.New("Release of a read-write lock under contention = " + err.Error() + ", want nil")
		}
		return nil
	})
	h.check(t, "read-write lock")
}

// readWriteNoStarvation: a reader that comes while a writer waits behind
// readers is refused (else a stream of readers would keep the writer out
// forever), and so is a writer that comes once a writer released, while a
// reader queued behind it is held back in its Wait hook.
func (s suite) readWriteNoStarvation(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	s.needNotification(t, ctx, true)
	t.Run("readers do not pass a waiting writer", func(t *testing.T) {
		key := Key(t)
		reader := s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL, lock.WithRead())
		w := wait(ctx, s.h.NewLocker(t), key, lock.Linear(noTimer), newWaitTrace(), nil, lock.WithWrite())
		w.rank(t, "the writer")
		refused(t, ctx, s.h.NewLocker(t), key, "a reader that came while a writer waits (else a stream of readers starves the writer)", lock.WithRead())
		if err := reader.Release(ctx); err != nil {
			t.Fatalf("the reader's Release = %v, want nil", err)
		}
		w.result(t, "the writer")
	})
	t.Run("writers do not pass a waiting reader", func(t *testing.T) {
		key := Key(t)
		writer := s.obtain(t, ctx, s.h.NewLocker(t), key, heldTTL, lock.WithWrite())
		tried := make(chan struct{})
		tr := newWaitTrace()
		tr.waited = func(e lock.Event) {
			if e.Op == "woken" {
				<-tried
			}
		}
		r := wait(ctx, s.h.NewLocker(t), key, lock.Linear(noTimer), tr, nil, lock.WithRead())
		r.rank(t, "the reader")
		if err := writer.Release(ctx); err != nil {
			close(tried)
			t.Fatalf("the writer's Release = %v, want nil", err)
		}
		lk, err := s.h.NewLocker(t).Obtain(ctx, key, longTTL, lock.WithWrite())
		close(tried)
		if !errors.Is(err, lock.ErrNotObtained) {
			release(t, lk)
			t.Errorf("a writer that came after a reader queued = %v, want ErrNotObtained: a stream of writers would starve the reader", err)
		}
		r.result(t, "the reader")
	})
}

func (s suite) readWriteDowngrade(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	l := s.h.NewLocker(t)
	t.Run("readers in, writers out", func(t *testing.T) {
		key := Key(t)
		w := s.obtain(t, ctx, l, key, longTTL, lock.WithWrite())
		if err := w.Downgrade(ctx); err != nil {
			t.Fatalf("Downgrade = %v, want nil", err)
		}
		s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL, lock.WithRead())
		refused(t, ctx, s.h.NewLocker(t), key, "a writer's Obtain after Downgrade", lock.WithWrite())
		if err := w.Refresh(ctx, longTTL); err != nil {
			t.Errorf("Refresh after Downgrade = %v, want nil", err)
		}
		if ttl, err := w.TTL(ctx); err != nil || ttl <= 0 {
			t.Errorf("TTL after Downgrade = %v, %v, want positive, nil", ttl, err)
		}
		if err := w.Release(ctx); err != nil {
			t.Errorf("Release after Downgrade = %v, want nil", err)
		}
	})
	t.Run("a waiting writer does not come between", func(t *testing.T) {
		if !s.probeWaiting(t, ctx).queues {
			t.Skip("the strategy keeps no queue: a writer that polls may come between, as it may between any release and the next Obtain")
		}
		key := Key(t)
		w := s.obtain(t, ctx, l, key, heldTTL, lock.WithWrite())
		next := wait(ctx, s.h.NewLocker(t), key, lock.Linear(noTimer), newWaitTrace(), nil, lock.WithWrite())
		next.rank(t, "the waiting writer")
		if err := w.Downgrade(ctx); err != nil {
			t.Fatalf("Downgrade with a writer waiting = %v, want nil", err)
		}
		st, err := l.Inspect(ctx, key)
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Write || st.Holders[0].Fingerprint != strategy.Fingerprint(w.Token()) {
			t.Errorf("Inspect after Downgrade = %+v, %v, want the downgraded writer alone, reading", st.Holders, err)
		}
		if err := w.Release(ctx); err != nil {
			t.Fatalf("Release after Downgrade = %v, want nil", err)
		}
		next.result(t, "the waiting writer")
	})
	t.Run("only a writer downgrades", func(t *testing.T) {
		r := s.obtain(t, ctx, l, Key(t), longTTL, lock.WithRead())
		if err := r.Downgrade(ctx); !argumentError(err, "lock") {
			t.Errorf("Downgrade of a read lock = %v, want an *ArgumentError named lock", err)
		}
		p := s.obtain(t, ctx, l, Key(t), longTTL)
		if err := p.Downgrade(ctx); !argumentError(err, "lock") {
			t.Errorf("Downgrade of a plain lock = %v, want an *ArgumentError named lock", err)
		}
	})
}

func (s suite) sharedInspectAndBreak(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	key := Key(t)
	l, other := s.h.NewLocker(t), s.h.NewLocker(t)
	permits := lock.WithPermits(2)
	a := s.obtain(t, ctx, l, key, longTTL, permits, lock.WithMetadata("holder a"))
	b := s.obtain(t, ctx, l, key, longTTL, permits)
	fa, fb := strategy.Fingerprint(a.Token()), strategy.Fingerprint(b.Token())
	st, err := other.Inspect(ctx, key)
	if err != nil || !st.Held || st.Permits != 2 || len(st.Holders) != 2 {
		t.Fatalf("Inspect of a semaphore of 2 with 2 holders = held %v, %d permits, %d holders, %v, want true, 2, 2, nil", st.Held, st.Permits, len(st.Holders), err)
	}
	for _, h := range st.Holders {
		switch {
		case h.Fingerprint == fa && h.Metadata != "holder a":
			t.Errorf("holder a's metadata: %q, want %q", h.Metadata, "holder a")
		case h.Fingerprint != fa && h.Fingerprint != fb:
			t.Errorf("a holder's fingerprint: %q, want %q or %q", h.Fingerprint, fa, fb)
		case h.TTL <= 0 || h.TTL > longTTL+s.h.ExtraTTL:
			t.Errorf("a holder's TTL: %v, want in (0, %v]", h.TTL, longTTL)
		}
	}
	if _, err := other.Break(ctx, key, fa); err != nil {
		t.Fatalf("Break of holder a = %v, want nil", err)
	}
	if _, err := a.TTL(ctx); !errors.Is(err, lock.ErrBroken) {
		t.Errorf("holder a's TTL after its Break = %v, want ErrBroken", err)
	}
	if _, err := b.TTL(ctx); err != nil {
		t.Errorf("holder b's TTL after a's Break = %v, want nil", err)
	}
	if _, err := other.Break(ctx, key, fa); !errors.Is(err, lock.ErrTaken) {
		t.Errorf("Break of a fingerprint that names no holder = %v, want ErrTaken", err)
	}
	if _, err := other.Break(ctx, key, ""); err != nil {
		t.Errorf(`Break of "" = %v, want nil`, err)
	}
	if _, err := b.TTL(ctx); !errors.Is(err, lock.ErrBroken) {
		t.Errorf(`holder b's TTL after Break of "" = %v, want ErrBroken`, err)
	}
	w := s.obtain(t, ctx, l, Key(t)+":rw", longTTL, lock.WithWrite(), lock.WithMetadata("writer"))
	st, err = other.Inspect(ctx, w.Key())
	if err != nil || !st.ReadWrite || st.Fingerprint != strategy.Fingerprint(w.Token()) || st.Metadata != "writer" ||
		len(st.Holders) != 1 || !st.Holders[0].Write {
		t.Errorf("Inspect of a read-write lock's writer = %+v, %v, want ReadWrite, the writer's fingerprint and metadata, one Holder writing", st, err)
	}
}

func (s suite) sharedLeavesNothing(t *testing.T, ctx context.Context) {
	s.needShared(t, ctx)
	for _, c := range []struct {
		name            string
		holder, another lock.Option
	}{
		{"semaphore", lock.WithPermits(1), lock.WithPermits(1)},
		{"read-write lock", lock.WithRead(), lock.WithWrite()},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := Key(t)
			l := s.h.NewLocker(t)
			h := s.obtain(t, ctx, l, key, longTTL, c.holder)
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			lk, err := l.Obtain(wctx, key, longTTL, c.another, lock.WithRetry(lock.Linear(10*time.Millisecond)))
			cancel()
			if !errors.Is(err, lock.ErrNotObtained) {
				release(t, lk)
				t.Fatalf("a waiter that gives up = %v, want ErrNotObtained", err)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil", err)
			}
			if left := s.keysLeft(t, ctx, key); len(left) > 0 {
				t.Errorf("keys left %v after the lock was released: %q, want none", waitBound, left)
			}
		})
	}
}

func (s suite) sharedInvalidArguments(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	key := Key(t)
	for _, n := range []int{0, -1, lock.MaxPermits + 1} {
		if lk, err := l.Obtain(ctx, key, longTTL, lock.WithPermits(n)); !argumentError(err, "permits") {
			release(t, lk)
			t.Errorf("Obtain WithPermits(%d) = %v, want an *ArgumentError named permits", n, err)
		}
	}
	if lk, err := l.ObtainMany(ctx, keySet(t, 2), longTTL, lock.WithPermits(2)); !argumentError(err, "keys") {
		release(t, lk)
		t.Errorf("ObtainMany WithPermits(2) = %v, want an *ArgumentError named keys", err)
	}
	if st, err := l.Inspect(ctx, key); err != nil || st.Held {
		t.Errorf("Inspect after the refusals = held %v, %v, want false, nil: nothing sent", st.Held, err)
	}
}
