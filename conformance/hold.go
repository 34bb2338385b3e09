package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/glob"
)

// holdTTL is the TTL of the locks the auto-refresh properties keep
// refreshed, every holdFraction of it. A loaded machine can stall a process
// for far longer than a refresh takes, and a stall past the validity
// rightly lapses a lock: the margin, 90% of the TTL, absorbs such stalls.
const (
	holdTTL      = 2 * time.Second
	holdFraction = 0.1
	holdInterval = time.Duration(holdFraction * float64(holdTTL)) // of auto-refresh
)

// refreshOften is the option of the locks that the auto-refresh properties
// keep refreshed, every holdInterval.
var refreshOften = lock.WithRefreshFraction(holdFraction)

// lossBound bounds the time from a lock's loss to its holder's context being
// cancelled: one refresh interval, plus the refresh's own time, which on a
// loaded machine can be long.
const lossBound = holdInterval + 2*time.Second

// refreshCount counts the refreshes of the locks obtained with its option,
// and notes when the last one was sent, and the longest time between two
// sends, from the time option was called on.
type refreshCount struct {
	n    atomic.Int64
	mu   sync.Mutex
	last time.Time
	gap  time.Duration
}

func (r *refreshCount) option() lock.Option {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = time.Now()
	return lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
		if e.Op == "refresh" {
			r.n.Add(1)
			r.mu.Lock()
			now := time.Now()
			if !r.last.IsZero() {
				r.gap = max(r.gap, now.Sub(r.last))
			}
			r.last = now
			r.mu.Unlock()
		}
		return next(ctx)
	}})
}

func (r *refreshCount) lastSent() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// longestGap returns the longest time without a refresh sent, from option
// until now.
func (r *refreshCount) longestGap() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.gap, time.Since(r.last))
}

// stallGap is a time without a refresh sent that only a stalled machine
// explains, when refreshes are due every holdInterval: a lock lapses after
// holdTTL without one.
const stallGap = holdTTL - 2*holdInterval

// autoRefresh: when the machine stalls for longer than the lock's margin,
// the lock rightly lapses, and the subtest skips, unless another owner
// obtained the lock within its holder's validity.
func (s suite) autoRefresh(t *testing.T, ctx context.Context) {
	key := Key(t)
	var refreshes refreshCount
	a := s.obtain(t, ctx, s.h.NewLocker(t), key, holdTTL, refreshOften, refreshes.option())
	if err := a.StartRefresh(ctx); err != nil {
		t.Fatalf("StartRefresh = %v, want nil", err)
	}
	other := s.h.NewLocker(t)
	time.Sleep(holdTTL + holdTTL/5)
	lk, err := other.Obtain(ctx, key, longTTL)
	returned := time.Now()
	stalled := func(what string) {
		t.Helper()
		if gap := refreshes.longestGap(); refreshes.n.Load() == 0 || gap < stallGap {
			t.Fatalf("%s, though refreshes were sent at most %v apart (%d in all)", what, gap, refreshes.n.Load())
		}
		t.Skipf("%s: the machine stalled, no refresh was sent for %v, and the lock rightly lapsed; auto-refresh could not be checked", what, refreshes.longestGap())
	}
	if err == nil {
		release(t, lk)
		if v := a.ValidUntil(); v.After(returned) {
			t.Fatalf("Obtain by another after 1.2 TTLs of auto-refresh = a lock, while its holder's validity runs %v more", v.Sub(returned))
		}
		stalled("Obtain by another after 1.2 TTLs of auto-refresh = a lock")
	}
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("Obtain by another after 1.2 TTLs of auto-refresh = %v, want ErrNotObtained", err)
	}
	if err := a.Err(); errors.Is(err, lock.ErrLapsed) {
		stalled("Err() after 1.2 TTLs of auto-refresh = " + err.Error())
	} else if err != nil {
		t.Fatalf("Err() after 1.2 TTLs of auto-refresh = %v, want nil", err)
	}
	if ttl, err := a.TTL(ctx); err != nil || ttl <= 0 {
		t.Errorf("TTL after 1.2 TTLs of auto-refresh = %v, %v; want held", ttl, err)
	}
	a.StopRefresh()
	n := refreshes.n.Load()
	if n < 2 {
		t.Errorf("refreshes in 1.2 TTLs = %d, want several", n)
	}
	time.Sleep(holdTTL / 5)
	if got := refreshes.n.Load(); got != n {
		t.Errorf("refreshes after StopRefresh = %d, want 0", got-n)
	}
	valid := a.ValidUntil() // before Release, which zeroes it
	err = a.Release(ctx)
	if errors.Is(err, lock.ErrNotHeld) && time.Now().After(valid) {
		// The last refresh came so late that the lock's validity ended
		// during the sleep above: it rightly expired.
		t.Skipf("Release = %v: the machine stalled, and the lock's validity ended before the release", err)
	}
	if err != nil {
		t.Errorf("Release = %v, want nil", err)
	}
}

// loss is a way a lock is lost while its holder is not looking, with the
// cause the holder must report.
type loss struct {
	name string
	act  func(ctx context.Context, c driver.Conn, key string) error
	want error
}

// behindTheBack are the ways a lock is lost.
var behindTheBack = []loss{
	{"deleted", func(ctx context.Context, c driver.Conn, key string) error {
		_, err := c.Del(ctx, key)
		return err
	}, lock.ErrExpired},
	{"overwritten", func(ctx context.Context, c driver.Conn, key string) error {
		_, _, err := c.GetSet(ctx, key, "another owner's value")
		return err
	}, lock.ErrTaken},
}

// loseBehindTheBack loses key as act says, on each of conns, once the key
// is there, and deletes whatever act wrote when the test ends. An acquire
// may land on a server after Obtain returned (Redlock's returns once a
// quorum took the lock), and one that landed after act would hold the key
// there again.
func loseBehindTheBack(t *testing.T, ctx context.Context, conns []driver.Conn, key string, act func(context.Context, driver.Conn, string) error) {
	t.Helper()
	for _, c := range conns {
		t.Cleanup(func() { _, _ = c.Del(context.Background(), key) })
		for deadline := time.Now().Add(waitBound); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, ok, err := c.Get(ctx, key); ok || err != nil {
				break // the key is there, or c cannot tell
			}
		}
		if err := act(ctx, c, key); err != nil {
			t.Fatalf("changing the key behind the holder's back: %v", err)
		}
	}
}

// loseWhileRefreshed starts refreshing lk, loses key, one of its keys, as c
// says at a random point between two refreshes, and returns the holder's
// context once it is cancelled, and how long after the loss that was; it
// fails t if that takes longer than lossBound.
func loseWhileRefreshed(t *testing.T, ctx context.Context, lk *lock.Lock, conns []driver.Conn, key string, c loss) (context.Context, time.Duration) {
	t.Helper()
	hctx, cancel := lk.Context(ctx)
	t.Cleanup(cancel)
	if err := lk.StartRefresh(ctx); err != nil {
		t.Fatalf("StartRefresh = %v, want nil", err)
	}
	time.Sleep(rand.N(holdInterval))
	loseBehindTheBack(t, ctx, conns, key, c.act)
	lost := time.Now()
	select {
	case <-hctx.Done():
	case <-time.After(lossBound):
		t.Fatalf("holder's context not cancelled %v after key %s was %s, want within %v", lossBound, key, c.name, lossBound)
	}
	return hctx, time.Since(lost)
}

// skipIfUnanswered skips t when cause, the cause of a lock lost behind
// its holder's back, is a lapse whose last refresh got no answer: the
// refresh that would have found the loss was not answered before the
// validity ended, as on a machine that stalled, and the holder rightly
// says so, and cannot know more.
func skipIfUnanswered(t *testing.T, cause error) {
	t.Helper()
	if errors.Is(cause, lock.ErrLapsed) && errors.Is(cause, lock.ErrNoAnswer) {
		t.Skipf("the machine stalled: the lock lapsed before a refresh was answered: %v", cause)
	}
}

// lossCancelsTheHolder: the loss comes at a random point between two
// refreshes, and must cancel the holder within lossBound. The subtest logs
// the time it took, and the part of it from the refresh that found the
// loss.
func (s suite) lossCancelsTheHolder(t *testing.T, ctx context.Context) {
	conns := s.h.Conns(t)

	for _, c := range behindTheBack {
		t.Run(c.name, func(t *testing.T) {
			key := Key(t)
			var refreshes refreshCount
			a := s.obtain(t, ctx, s.h.NewLocker(t), key, holdTTL, refreshOften, refreshes.option())
			hctx, took := loseWhileRefreshed(t, ctx, a, conns, key, c)
			t.Logf("loss->cancel: %v (key %s behind the holder's back; refresh interval %v; %v of it from the send of the refresh that found the loss)",
				took.Round(10*time.Microsecond), c.name, holdInterval, time.Since(refreshes.lastSent()).Round(10*time.Microsecond))
			cause := context.Cause(hctx)
			skipIfUnanswered(t, cause)
			if !errors.Is(cause, c.want) {
				t.Errorf("context.Cause = %v, want %v", cause, c.want)
			}
			if err := a.Err(); !errors.Is(err, c.want) {
				t.Errorf("Err() = %v, want %v", err, c.want)
			}
		})
	}
}

func (s suite) doHoldsAndReleases(t *testing.T, ctx context.Context) {
	for _, c := range []struct {
		name string
		f    func(suite, *testing.T, context.Context)
	}{
		{"holds the lock while fn runs, and releases it after", suite.doHolds},
		{"returns fn's error as it is", suite.doReturnsFnsError},
		{"reports the loss of the lock", suite.doReportsLoss},
		{"cancelling its context stops refreshing and releases the lock", suite.doCancelled},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(s, t, ctx) })
	}
}

func (s suite) doHolds(t *testing.T, ctx context.Context) {
	key := Key(t)
	other := s.h.NewLocker(t)
	err := lock.Do(ctx, s.h.NewLocker(t), key, holdTTL, func(fctx context.Context) error {
		refused(t, ctx, other, key, "Obtain by another while fn runs")
		if lk, ok := lock.FromContext(fctx); !ok || lk.Key() != key {
			t.Errorf("FromContext(fn's context) = %v, %v; want the lock on the key", lk, ok)
		}
		return nil
	}, refreshOften)
	if err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
	s.obtain(t, ctx, other, key, longTTL)
}

func (s suite) doReturnsFnsError(t *testing.T, ctx context.Context) {
	key := Key(t)
	errFn := errors.New("fn failed")
	err := lock.Do(ctx, s.h.NewLocker(t), key, holdTTL, func(context.Context) error { return errFn }, refreshOften)
	if err != errFn {
		t.Errorf("Do = %v, want fn's error as it is", err)
	}
	s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL)
}

func (s suite) doReportsLoss(t *testing.T, ctx context.Context) {
	conns := s.h.Conns(t)
	key := Key(t)
	err := lock.Do(ctx, s.h.NewLocker(t), key, holdTTL, func(fctx context.Context) error {
		loseBehindTheBack(t, ctx, conns, key, behindTheBack[0].act)
		select {
		case <-fctx.Done():
			return context.Cause(fctx)
		case <-time.After(lossBound):
			return errors.New("fn's context was not cancelled")
		}
	}, refreshOften)
	if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrExpired) {
		t.Errorf("Do = %v, want ErrLost and ErrExpired", err)
	}
}

// doCancelled: Do returns context.Canceled (not ErrLost), and no refresh is
// sent after it returned.
func (s suite) doCancelled(t *testing.T, ctx context.Context) {
	key := Key(t)
	var refreshes refreshCount
	parent, cancel := context.WithCancel(ctx)
	err := lock.Do(parent, s.h.NewLocker(t), key, holdTTL, func(fctx context.Context) error {
		cancel()
		<-fctx.Done()
		return fctx.Err()
	}, refreshOften, refreshes.option())
	if !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrLost) {
		t.Errorf("Do = %v, want context.Canceled, and not ErrLost", err)
	}
	s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL)
	n := refreshes.n.Load()
	time.Sleep(2 * holdInterval)
	if got := refreshes.n.Load(); got != n {
		t.Errorf("refreshes after Do returned = %d, want 0", got-n)
	}
}

// fencingTokens: the tokens increase across releases, past a holder that
// crashed and let its lock expire, and under contention.
func (s suite) fencingTokens(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	plain := s.obtain(t, ctx, l, Key(t), longTTL)
	if n, ok := plain.Fence(); ok || n != 0 {
		t.Errorf("Fence() without WithFencing = %d, %v; want 0, false", n, ok)
	}

	key := Key(t)
	first, err := l.Obtain(ctx, key, s.h.ShortTTL, lock.WithFencing())
	if err != nil {
		if !argumentError(err, "fencing") {
			t.Fatalf("Obtain WithFencing = %v, want a lock, or an *ArgumentError named fencing", err)
		}
		s.obtain(t, ctx, l, key, longTTL) // nothing was written
		t.Logf("the strategy refuses WithFencing: %v", err)
		return
	}
	s.fencesIncreaseInTurn(t, ctx, l, first)
	s.fencesIncreaseUnderContention(t, ctx)
}

// fencesSurviveCounterLoss loses the lock's companion keys (all but the
// key, which is free) on every server between two fenced acquisitions: by
// DEL, then by an expiry of 1ms, waited for.
func (s suite) fencesSurviveCounterLoss(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	key := Key(t)
	fenced := func(what string) int64 {
		t.Helper()
		lk := s.obtain(t, ctx, l, key, longTTL, lock.WithFencing())
		n, _ := lk.Fence()
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release %s = %v, want nil", what, err)
		}
		return n
	}
	first, err := l.Obtain(ctx, key, longTTL, lock.WithFencing())
	if err != nil {
		if !argumentError(err, "fencing") {
			t.Fatalf("Obtain WithFencing = %v, want a lock, or an *ArgumentError named fencing", err)
		}
		t.Logf("the strategy refuses WithFencing: %v", err)
		return
	}
	last, _ := first.Fence()
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	for _, loss := range []struct {
		name string
		args []any // the command, before the key
		wait bool  // until the keys are gone
	}{
		{"after its companion keys were deleted", []any{"DEL"}, false},
		{"after its companion keys expired", []any{"PEXPIRE"}, true},
	} {
		for _, c := range s.h.Conns(t) {
			for _, k := range s.companions(t, ctx, c, key) {
				args := append(append([]any{}, loss.args...), k)
				if loss.wait {
					args = append(args, 1)
				}
				if _, err := driver.Do(ctx, c, args...); err != nil {
					t.Fatalf("%v %s: %v", loss.args[0], k, err)
				}
			}
			if loss.wait {
				for deadline := time.Now().Add(waitBound); len(s.companions(t, ctx, c, key)) > 0; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("companion keys of %s still there %v after PEXPIRE 1: %q", key, waitBound, s.companions(t, ctx, c, key))
					}
				}
			}
		}
		if n := fenced(loss.name); n <= last {
			t.Errorf("token %s = %d, want more than %d, the last", loss.name, n, last)
		} else {
			last = n
		}
	}
}

// companions returns the keys on c whose names contain key but are not
// key: its fencing counter, its queue, and the like.
func (s suite) companions(t *testing.T, ctx context.Context, c driver.Conn, key string) []string {
	t.Helper()
	v, err := keysScript.Run(ctx, c, []string{key}, "*"+glob.Escape(key)+"*")
	if err != nil {
		t.Fatalf("KEYS *%s*: %v", key, err)
	}
	found, _ := v.([]any)
	var names []string
	for _, f := range found {
		if name := fmt.Sprint(f); name != key {
			names = append(names, name)
		}
	}
	return names
}

func (s suite) fencesIncreaseInTurn(t *testing.T, ctx context.Context, l *lock.Locker, first *lock.Lock) {
	last, ok := first.Fence()
	if !ok || last <= 0 {
		t.Fatalf("Fence() = %d, %v; want a positive token", last, ok)
	}
	next := func(what string) *lock.Lock {
		t.Helper()
		lk := s.obtain(t, ctx, l, first.Key(), longTTL, lock.WithFencing(), lock.WithRetry(lock.Linear(10*time.Millisecond)))
		n, _ := lk.Fence()
		if n <= last {
			t.Errorf("token %s = %d, want more than the last, %d", what, n, last)
		}
		last = n
		return lk
	}
	s.waitExpired(t, ctx, first) // the first holder crashed
	crashed := next("after a crashed holder's lock expired")
	if err := crashed.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	next("after a release")
}

func (s suite) fencesIncreaseUnderContention(t *testing.T, ctx context.Context) {
	key := Key(t)
	var (
		mu     sync.Mutex
		inside int64 // the token of the last holder inside
	)
	s.contend(t, newTurns(40), func(l *lock.Locker, _ int64) error {
		lk, err := l.Obtain(ctx, key, longTTL, lock.WithFencing(), contentionRetry)
		if err != nil {
			return fmt.Errorf("under contention: Obtain WithFencing = %w, want a lock", err)
		}
		n, _ := lk.Fence()
		mu.Lock()
		if n <= inside {
			t.Errorf("token under contention = %d, want more than the previous holder's, %d", n, inside)
		}
		inside = n
		mu.Unlock()
		if err := lk.Release(ctx); err != nil && !excusedRelease(t, lk, err) {
			return fmt.Errorf("under contention: Release = %w, want nil", err)
		}
		return nil
	})
}
