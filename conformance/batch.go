package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
)

// The batch properties wait on timers more than they work, on keys of their
// own, so they run side by side (t.Parallel), after the suite's other
// properties.

// manyLocks is how many locks the batch properties hold at once, each
// refreshed every manyInterval: enough to share batches, and few enough
// for a strategy that refreshes each on its own, over several nodes and
// without scripts, on a loaded machine.
const (
	manyLocks    = 40
	manyTTL      = holdTTL
	manyFraction = 0.25
	manyInterval = time.Duration(manyFraction * float64(manyTTL))
)

// refreshMany is the option of the locks the batch properties hold.
var refreshMany = lock.WithRefreshFraction(manyFraction)

// obtainEach obtains n locks through l, each on a key of its own from
// keyOf, for ttl with opts, and starts refreshing each; they are released
// when the test ends.
func (s suite) obtainEach(t *testing.T, ctx context.Context, l *lock.Locker, n int, keyOf func(int) string, ttl time.Duration, opts ...lock.Option) []*lock.Lock {
	t.Helper()
	locks := make([]*lock.Lock, n)
	for i := range locks {
		locks[i] = s.obtain(t, ctx, l, keyOf(i), ttl, opts...)
		if err := locks[i].StartRefresh(ctx); err != nil {
			t.Fatalf("StartRefresh = %v, want nil", err)
		}
	}
	return locks
}

// lapsed returns how many of locks lapsed, and fails t for each that was
// lost otherwise.
func lapsed(t *testing.T, what string, locks []*lock.Lock) int {
	t.Helper()
	n := 0
	for i, lk := range locks {
		switch err := lk.Err(); {
		case errors.Is(err, lock.ErrLapsed):
			n++
		case err != nil:
			t.Errorf("%s: lock %d: Err() = %v, want nil", what, i, err)
		}
	}
	return n
}

// manyHeldLocksStayHeld: half the locks have hooks, which see their own
// refreshes. Lapses are a stalled machine's, as in AutoRefresh, when the
// refreshes came too far apart.
func (s suite) manyHeldLocksStayHeld(t *testing.T, ctx context.Context) {
	t.Parallel()
	l := s.h.NewLocker(t)
	prefix := Key(t)
	counts := make([]refreshCount, manyLocks)
	locks := make([]*lock.Lock, manyLocks)
	for i := range locks {
		opts := []lock.Option{refreshMany}
		if i%2 == 0 {
			opts = append(opts, counts[i].option())
		}
		locks[i] = s.obtainEach(t, ctx, l, 1, func(int) string { return fmt.Sprintf("%s:%d", prefix, i) }, manyTTL, opts...)[0]
	}
	time.Sleep(manyTTL + manyTTL/5)
	// A lock can lapse while the TTLs are read, one round trip after
	// another: that is a stall too.
	n := 0
	for i, lk := range locks {
		before, until := lk.Err(), lk.ValidUntil()
		ttl, err := lk.TTL(ctx)
		switch {
		case errors.Is(before, lock.ErrLapsed), err != nil && !time.Now().Before(until):
			n++
		case before != nil:
			t.Errorf("lock %d: Err() after 1.2 TTLs of auto-refresh = %v, want nil", i, before)
		case err != nil || ttl <= 0:
			t.Errorf("lock %d: TTL after 1.2 TTLs of auto-refresh = %v, %v; want held", i, ttl, err)
		}
	}
	if n > 0 {
		var gap time.Duration
		for i := 0; i < manyLocks; i += 2 { // the hooked ones
			gap = max(gap, counts[i].longestGap())
		}
		if gap < manyTTL-2*manyInterval {
			t.Fatalf("after 1.2 TTLs of auto-refresh, %d of %d locks lapsed, though the hooked ones were refreshed at most %v apart", n, manyLocks, gap)
		}
		t.Skipf("%d of %d locks lapsed: the machine stalled, with no refresh sent for %v; auto-refresh could not be checked", n, manyLocks, gap)
	}
	for i := 0; i < manyLocks; i += 2 {
		if n := counts[i].n.Load(); n < 2 {
			t.Errorf("lock %d: refreshes seen by its hooks in 1.2 TTLs = %d, want several", i, n)
		}
	}
}

func (s suite) batchReportsEachLoss(t *testing.T, ctx context.Context) {
	t.Parallel()
	conns := s.h.Conns(t)
	for _, c := range behindTheBack {
		t.Run(c.name, func(t *testing.T) {
			prefix := Key(t)
			locks := s.obtainEach(t, ctx, s.h.NewLocker(t), 10, func(i int) string { return fmt.Sprintf("%s:%d", prefix, i) }, holdTTL, refreshOften)
			victim := rand.N(len(locks))
			time.Sleep(rand.N(holdInterval))
			loseBehindTheBack(t, ctx, conns, locks[victim].Key(), c.act)
			select {
			case <-locks[victim].Done():
			case <-time.After(lossBound):
				t.Fatalf("lock %d: Done not closed %v after its key was %s, want within %v", victim, lossBound, c.name, lossBound)
			}
			err := locks[victim].Err()
			skipIfUnanswered(t, err)
			if !errors.Is(err, c.want) {
				t.Errorf("lock %d, %s: Err() = %v, want %v", victim, c.name, err, c.want)
			}
			time.Sleep(2 * holdInterval)
			others := append(locks[:victim:victim], locks[victim+1:]...)
			if n := lapsed(t, "the others, 2 refresh intervals on", others); n > 0 {
				t.Logf("%d of the others lapsed: a stalled machine", n)
			}
		})
	}
}

// batchReleaseLeavesNothing: the locks' TTL outlasts the wait for their keys
// to go, so that a key left behind is found, not expired.
func (s suite) batchReleaseLeavesNothing(t *testing.T, ctx context.Context) {
	t.Parallel()
	tag := Key(t)
	const ttl = waitBound + 10*time.Second
	locks := s.obtainEach(t, ctx, s.h.NewLocker(t), manyLocks/4, func(i int) string { return fmt.Sprintf("{%s}:%d", tag, i) },
		ttl, lock.WithRefreshFraction(float64(manyInterval)/float64(ttl)))
	var wg sync.WaitGroup
	for i, lk := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(rand.N(4 * manyInterval))
			if err := lk.Release(ctx); err != nil && !excusedRelease(t, lk, err) {
				t.Errorf("lock %d: Release during auto-refresh = %v, want nil", i, err)
			}
		}()
	}
	wg.Wait()
	if left := s.keysLeft(t, ctx, tag); len(left) > 0 {
		t.Errorf("keys left %v after every lock was released: %q, want none", waitBound, left)
	}
}

func (s suite) batchMutualExclusion(t *testing.T, ctx context.Context) {
	t.Parallel()
	l := s.h.NewLocker(t)
	prefix := Key(t)
	s.obtainEach(t, ctx, l, manyLocks/2, func(i int) string { return fmt.Sprintf("%s:held:%d", prefix, i) }, manyTTL, refreshMany)
	const keys, goroutines, turnsEach = 3, 4, 3
	var ds [keys]Detector
	var wg sync.WaitGroup
	retry := lock.WithRetry(lock.Linear(5 * time.Millisecond))
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range turnsEach {
				k := rand.N(keys)
				lk, err := l.Obtain(ctx, fmt.Sprintf("%s:turn:%d", prefix, k), manyTTL, refreshMany, retry)
				if err != nil {
					t.Errorf("goroutine %d: Obtain under contention = %v, want a lock", g, err)
					return
				}
				if err := lk.StartRefresh(ctx); err != nil {
					t.Errorf("StartRefresh = %v, want nil", err)
				}
				ds[k].Hold(manyInterval/2 + rand.N(manyInterval/2))
				if err := lk.Release(ctx); err != nil && !excusedRelease(t, lk, err) {
					t.Errorf("goroutine %d: Release = %v, want nil", g, err)
				}
			}
		}()
	}
	wg.Wait()
	for k := range ds {
		if n := ds[k].Overlaps(); n != 0 {
			t.Errorf("key %d: overlaps = %d in %d acquisitions, want 0", k, n, ds[k].Entries())
		}
	}
}
