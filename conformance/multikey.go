package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
)

// keySet returns n keys unique to t and to this call, in their sorted
// order, that share one hash tag.
func keySet(t testing.TB, n int) []string {
	tag := Key(t)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("{%s}:%03d", tag, i)
	}
	return keys
}

// needMultiKey skips t unless the Locker locks several keys as one, as
// needSupport finds from an ObtainMany of two free keys.
func (s suite) needMultiKey(t *testing.T, ctx context.Context) {
	t.Helper()
	lk, err := s.h.NewLocker(t).ObtainMany(ctx, keySet(t, 2), longTTL)
	needSupport(t, ctx, "ObtainMany of two free keys", lk, err, "keys",
		"the Locker does not lock several keys as one (%v): its strategy is no strategy.Multi; the multi-key properties do not apply")
}

// needSupport checks lk, err, what call returned, to find whether the
// Locker has an optional capability: it has when call obtained lk, which
// needSupport releases; it has not when err is an *ArgumentError named arg
// that matches errors.ErrUnsupported, and then t skips, saying why (skip,
// a format of err). Any other answer fails t, so that a Locker that has the
// capability never skips its properties.
func needSupport(t *testing.T, ctx context.Context, call string, lk *lock.Lock, err error, arg, skip string) {
	t.Helper()
	switch {
	case err == nil:
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release after %s = %v, want nil", call, err)
		}
	case argumentError(err, arg) && errors.Is(err, errors.ErrUnsupported):
		t.Skipf(skip, err)
	default:
		t.Fatalf("%s = %v, want a lock, or an *ArgumentError named %s matching errors.ErrUnsupported", call, err, arg)
	}
}

// obtainMany obtains keys on l as one lock, failing t on error; t releases
// it when it ends.
func (s suite) obtainMany(t *testing.T, ctx context.Context, l *lock.Locker, keys []string, ttl time.Duration, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := l.ObtainMany(ctx, keys, ttl, opts...)
	if err != nil {
		t.Fatalf("ObtainMany(%q, %v) = %v, want a lock", keys, ttl, err)
	}
	release(t, lk)
	return lk
}

// checkKeyError fails t unless err matches want and is a *lock.KeyError
// that names key.
func checkKeyError(t *testing.T, what string, err, want error, key string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s = %v, want %v", what, err, want)
	}
	var ke *lock.KeyError
	if !errors.As(err, &ke) || ke.Key != key {
		t.Errorf("%s = %v, want a *KeyError that names %q", what, err, key)
	}
}

// except returns keys without key.
func except(keys []string, key string) []string {
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == key })
}

// multiKeyExclusion: the first part catches a Locker that takes a held key
// whatever the timing; the contention, only when two holds happen to
// overlap.
func (s suite) multiKeyExclusion(t *testing.T, ctx context.Context) {
	s.needMultiKey(t, ctx)
	keys := keySet(t, 3)
	holder, other := s.h.NewLocker(t), s.h.NewLocker(t)
	for _, k := range keys {
		held, err := holder.Obtain(ctx, k, longTTL)
		if err != nil {
			t.Fatalf("Obtain(%q) = %v, want a lock", k, err)
		}
		try, cancel := context.WithTimeout(ctx, 2*time.Second) // a Locker's default retry policy waits at most that
		lk, err := other.ObtainMany(try, keys, longTTL)
		cancel()
		if !errors.Is(err, lock.ErrNotObtained) {
			_ = lk.Release(ctx) // a nil lk's too
			t.Errorf("ObtainMany(%q) while %q is held = %v, want ErrNotObtained", keys, k, err)
		}
		if err := held.Release(ctx); err != nil {
			t.Errorf("Release of %q by its holder after another's ObtainMany = %v, want nil: its key was taken", k, err)
		}
	}
	a, b, c := keys[0], keys[1], keys[2]
	sets := [][]string{{a, b}, {b, c}, {c, a}, {a}, {b}, {c}}
	detectors := map[string]*Detector{a: new(Detector), b: new(Detector), c: new(Detector)}
	s.contend(t, newTurns(max(s.h.Acquisitions/4, 2*len(sets))), func(l *lock.Locker, n int64) error {
		set := sets[n%int64(len(sets))]
		var lk *lock.Lock
		var err error
		if len(set) == 1 {
			lk, err = l.Obtain(ctx, set[0], longTTL, contentionRetry)
		} else {
			lk, err = l.ObtainMany(ctx, set, longTTL, contentionRetry)
		}
		if err != nil {
			return fmt.Errorf("obtaining %q under contention = %w, want a lock", set, err)
		}
		for _, k := range set {
			detectors[k].Enter()
		}
		time.Sleep(200 * time.Microsecond) // long enough for an overlap to be caught
		for _, k := range set {
			detectors[k].Exit()
		}
		if err := lk.Release(ctx); err != nil && !excusedRelease(t, lk, err) {
			return fmt.Errorf("under contention: Release of %q = %w, want nil", set, err)
		}
		return nil
	})
	for _, k := range keys {
		d := detectors[k]
		t.Logf("key %s: %d holders, %d overlaps", k, d.Entries(), d.Overlaps())
		if got := d.Overlaps(); got != 0 {
			t.Errorf("overlaps on key %s = %d in %d holders, want 0", k, got, d.Entries())
		}
	}
}

// multiKeyOppositeOrders: each caller's first attempt waits, in its Attempt
// hook, until the other's has returned, so that a Locker that took the keys
// one by one, in the caller's order, would have each caller hold one key
// that the other waits for.
func (s suite) multiKeyOppositeOrders(t *testing.T, ctx context.Context) {
	s.needMultiKey(t, ctx)
	for round := range 3 {
		keys := keySet(t, 3)
		orders := [][]string{keys, {keys[2], keys[1], keys[0]}}
		tried := []chan struct{}{make(chan struct{}), make(chan struct{})}
		var wg sync.WaitGroup
		for i, order := range orders {
			l := s.h.NewLocker(t)
			first := sync.OnceFunc(func() { close(tried[i]) })
			other := tried[1-i]
			barrier := lock.WithHooks(&lock.Hooks{Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
				err := next(ctx)
				first()
				select { // until the other caller's first attempt has returned
				case <-other:
				case <-ctx.Done():
				}
				return err
			}})
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer first() // should no attempt run, the other caller does not wait for it
				wctx, cancel := context.WithTimeout(ctx, waitBound)
				defer cancel()
				lk, err := l.ObtainMany(wctx, order, longTTL, lock.WithRetry(lock.Exponential(time.Millisecond, 8*time.Millisecond)), barrier)
				if err != nil {
					t.Errorf("round %d: ObtainMany(%q) = %v, want a lock: callers that name the keys in opposite orders blocked each other", round, order, err)
					return
				}
				if err := lk.Release(ctx); err != nil {
					t.Errorf("round %d: Release of %q = %v, want nil", round, order, err)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}

func (s suite) multiKeyAllOrNothing(t *testing.T, ctx context.Context) {
	s.needMultiKey(t, ctx)
	for i, name := range []string{"first", "middle", "last"} {
		t.Run(name+" key held", func(t *testing.T) {
			keys := keySet(t, 3)
			held := keys[i]
			s.obtain(t, ctx, s.h.NewLocker(t), held, longTTL)
			lk, err := s.h.NewLocker(t).ObtainMany(ctx, keys, longTTL)
			if err == nil {
				release(t, lk)
				t.Fatalf("ObtainMany with key %q held = a lock, want ErrNotObtained", held)
			}
			checkKeyError(t, "ObtainMany with one key held", err, lock.ErrNotObtained, held)
			if left := s.keysLeft(t, ctx, except(keys, held)...); len(left) > 0 {
				t.Errorf("keys left after ObtainMany failed on key %q: %q, want none", held, left)
			}
		})
	}
}

func (s suite) multiKeyLeavesNothing(t *testing.T, ctx context.Context) {
	s.needMultiKey(t, ctx)
	keys := keySet(t, 3)
	lk := s.obtainMany(t, ctx, s.h.NewLocker(t), keys, longTTL)
	if got := lk.Keys(); !slices.Equal(got, keys) {
		t.Errorf("Keys() = %q, want %q", got, keys)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	if left := s.keysLeft(t, ctx, keys...); len(left) > 0 {
		t.Errorf("keys left after Release: %q, want none", left)
	}
	if err := lk.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Release = %v, want ErrNotHeld", err)
	}
}

// keyLoss runs f as a subtest for each way a key is lost behind its
// holder's back (c), after needMultiKey, with lk, a lock of three keys
// obtained for ttl with opts, of which f is to lose lost, keys[i]. The keys
// are deleted when the subtest ends: a lock that found the loss no longer
// deletes them.
func (s suite) keyLoss(t *testing.T, ctx context.Context, i int, ttl time.Duration, opts []lock.Option, f func(t *testing.T, conns []driver.Conn, lk *lock.Lock, lost string, c loss)) {
	s.needMultiKey(t, ctx)
	conns := s.h.Conns(t)
	for _, c := range behindTheBack {
		t.Run(c.name, func(t *testing.T) {
			keys := keySet(t, 3)
			lk := s.obtainMany(t, ctx, s.h.NewLocker(t), keys, ttl, opts...)
			t.Cleanup(func() {
				for _, conn := range conns {
					for _, k := range keys {
						_, _ = conn.Del(context.Background(), k)
					}
				}
			})
			f(t, conns, lk, keys[i], c)
		})
	}
}

func (s suite) multiKeyRefreshAllOrNothing(t *testing.T, ctx context.Context) {
	s.keyLoss(t, ctx, 1, longTTL, nil, func(t *testing.T, conns []driver.Conn, lk *lock.Lock, lost string, c loss) {
		loseBehindTheBack(t, ctx, conns, lost, c.act)
		err := lk.Refresh(ctx, 10*longTTL)
		checkKeyError(t, "Refresh with key "+c.name, err, c.want, lost)
		for _, k := range except(lk.Keys(), lost) {
			found := 0
			for _, conn := range conns {
				ttl, ok, err := conn.PTTL(ctx, k)
				if err != nil {
					t.Fatalf("PTTL %s: %v", k, err)
				}
				if !ok {
					continue
				}
				found++
				if limit := longTTL + s.h.ExtraTTL; ttl > limit {
					t.Errorf("PTTL of key %s after a Refresh(%v) that failed = %v, want at most %v (it was extended)", k, 10*longTTL, ttl, limit)
				}
			}
			if found == 0 {
				t.Errorf("key %s after a Refresh that failed: gone from every server, want it left as it was", k)
			}
		}
	})
}

func (s suite) multiKeyReleaseReportsEachKey(t *testing.T, ctx context.Context) {
	s.keyLoss(t, ctx, 1, longTTL, nil, func(t *testing.T, conns []driver.Conn, lk *lock.Lock, lost string, c loss) {
		loseBehindTheBack(t, ctx, conns, lost, c.act)
		err := lk.Release(ctx)
		checkKeyError(t, "Release with key "+c.name, err, c.want, lost)
		if left := s.keysLeft(t, ctx, except(lk.Keys(), lost)...); len(left) > 0 {
			t.Errorf("keys left after Release: %q, want none", left)
		}
		if !errors.Is(c.want, lock.ErrTaken) {
			return
		}
		for _, conn := range conns {
			if v, ok, err := conn.Get(ctx, lost); err != nil || !ok || v != "another owner's value" {
				t.Errorf("GET of the taken key after Release = %q, %v, %v; want its new owner's value", v, ok, err)
			}
		}
	})
}

func (s suite) multiKeyLossEndsTheLock(t *testing.T, ctx context.Context) {
	s.keyLoss(t, ctx, 2, holdTTL, []lock.Option{refreshOften}, func(t *testing.T, conns []driver.Conn, lk *lock.Lock, lost string, c loss) {
		hctx, _ := loseWhileRefreshed(t, ctx, lk, conns, lost, c)
		checkKeyError(t, "context.Cause", context.Cause(hctx), c.want, lost)
		checkKeyError(t, "Err()", lk.Err(), c.want, lost)
	})
}

func (s suite) multiKeyInvalidArguments(t *testing.T, ctx context.Context) {
	s.needMultiKey(t, ctx)
	l := s.h.NewLocker(t)
	keys := keySet(t, lock.MaxKeys+1)
	var attempts atomic.Int64
	counted := lock.WithHooks(&lock.Hooks{Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
		attempts.Add(1)
		return next(ctx)
	}})
	for _, c := range []struct {
		name string
		keys []string
	}{
		{"nil", nil},
		{"empty", []string{}},
		{"an empty key", []string{keys[0], "", keys[1]}},
		{"more than MaxKeys", keys},
	} {
		t.Run(c.name, func(t *testing.T) {
			lk, err := l.ObtainMany(ctx, c.keys, longTTL, counted)
			release(t, lk)
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) {
				t.Fatalf("ObtainMany = %v, want an *ArgumentError", err)
			}
			if ae.Name != "keys" {
				t.Errorf("ArgumentError.Name = %q, want %q", ae.Name, "keys")
			}
			if n := attempts.Load(); n != 0 {
				t.Errorf("attempts = %d, want 0: nothing is sent", n)
			}
		})
	}
	s.obtainMany(t, ctx, l, keys[:2], longTTL) // nothing was written
}
