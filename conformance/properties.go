package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
)

const longTTL = 30 * time.Second

// winnerTTL is the TTL of exactlyOneWinner's locks: longer than the
// subtest may run, so that the winner's lock cannot expire while the
// losers try. (At 30s it did, on a machine so loaded that the losers'
// attempts took 38s, and a loser then won fairly.)
const winnerTTL = 2 * subtestTimeout

// exactlyOneWinner: the losers retry, because in a quorum strategy
// simultaneous votes can split so that nobody wins an attempt; at most one
// ever does.
func (s suite) exactlyOneWinner(t *testing.T, ctx context.Context) {
	const n = 32
	key := Key(t)
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		mu    sync.Mutex
		won   []*lock.Lock
	)
	for range n {
		l := s.h.NewLocker(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			lk, err := l.Obtain(ctx, key, winnerTTL, lock.WithRetry(lock.LimitAttempts(lock.Exponential(time.Millisecond, 20*time.Millisecond), 20)))
			switch {
			case err == nil:
				mu.Lock()
				won = append(won, lk)
				mu.Unlock()
			case !errors.Is(err, lock.ErrNotObtained):
				t.Errorf("Obtain by a loser = %v, want ErrNotObtained", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	// The winners release only now: a loser that tried again after a
	// release would win fairly, and the property would count it.
	for _, lk := range won {
		release(t, lk)
	}
	if got := len(won); got != 1 {
		t.Errorf("winners among %d concurrent obtainers = %d, want 1", n, got)
	}
}

func (s suite) mutualExclusion(t *testing.T, ctx context.Context) {
	key := Key(t)
	var d Detector
	turns := newTurns(s.h.Acquisitions)
	s.contend(t, turns, func(l *lock.Locker, _ int64) error {
		lk, err := l.Obtain(ctx, key, longTTL, contentionRetry)
		if err != nil {
			return fmt.Errorf("under contention: Obtain = %w, want a lock", err)
		}
		d.Hold(50 * time.Microsecond)
		if err := lk.Release(ctx); err != nil && !excusedRelease(t, lk, err) {
			return fmt.Errorf("under contention: Release = %w, want nil", err)
		}
		return nil
	})
	t.Logf("%d goroutines, %d acquisitions, %d overlaps", s.h.Goroutines, d.Entries(), d.Overlaps())
	if got := d.Overlaps(); got != 0 {
		t.Errorf("overlaps = %d in %d acquisitions, want 0", got, d.Entries())
	}
	if t.Failed() {
		return
	}
	if got, want := d.Entries(), turns.taken(); got != want {
		t.Errorf("acquisitions = %d, want %d", got, want)
	}
	if got, want := d.Entries(), int64(s.h.Goroutines); got < want {
		t.Errorf("acquisitions in %v = %d, want at least one per goroutine, %d", contentionTime, got, want)
	}
}

// contentionTime bounds a contention run (MutualExclusion,
// MultiKeyExclusion): one that has not made its acquisitions by then stops
// short, as on a machine too busy for them, and says so, well within
// subtestTimeout. The run checks exclusion, not speed.
const contentionTime = subtestTimeout / 2

// turns hands out the n acquisitions of a contention run to its
// goroutines, until contentionTime has passed.
type turns struct {
	n     int64
	left  atomic.Int64
	until time.Time
}

func newTurns(n int) *turns {
	r := &turns{n: int64(n), until: time.Now().Add(contentionTime)}
	r.left.Store(r.n)
	return r
}

// next returns the next turn, counting down from n-1, or false when none
// is left or the time is up.
func (r *turns) next() (int64, bool) {
	if time.Now().After(r.until) {
		return 0, false
	}
	i := r.left.Add(-1)
	return i, i >= 0
}

// taken returns how many turns next handed out.
func (r *turns) taken() int64 { return r.n - max(r.left.Load(), 0) }

// logShort logs it when the run stopped short.
func (r *turns) logShort(t *testing.T) {
	if got := r.taken(); got < r.n {
		t.Logf("stopped after %d of %d acquisitions: the run's %v was up", got, r.n, contentionTime)
	}
}

// stallTries is how many times in a row expiryFreesTheLock tries, before
// it skips, when each time the machine stalled for a whole ShortTTL between
// two of its calls.
const stallTries = 3

// expiryFreesTheLock: another owner obtains the lock, never before the
// first one's validity ended.
func (s suite) expiryFreesTheLock(t *testing.T, ctx context.Context) {
	b := s.h.NewLocker(t)
	for try := 1; ; try++ {
		key := Key(t)
		a := s.obtain(t, ctx, s.h.NewLocker(t), key, s.h.ShortTTL)
		lk, err := b.Obtain(ctx, key, longTTL)
		if err == nil {
			release(t, lk)
			if time.Now().Before(a.ValidUntil()) {
				t.Fatalf("second Obtain within the first holder's validity = a lock, want ErrNotObtained")
			}
			if try < stallTries {
				continue // the first lock expired before the second attempt: start again
			}
			t.Skipf("the machine stalled past the first lock's TTL (%v) before the second attempt, %d times in a row: "+
				"whether a held lock is refused cannot be checked; raise Harness.ShortTTL if this recurs", s.h.ShortTTL, stallTries)
		}
		if !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("second Obtain while held = %v, want ErrNotObtained", err)
		}
		wctx, cancel := context.WithTimeout(ctx, s.expiryLimit())
		defer cancel()
		lk, err = b.Obtain(wctx, key, longTTL, lock.WithRetry(lock.Linear(10*time.Millisecond)))
		if err != nil {
			t.Fatalf("Obtain after the TTL of %v, retrying for %v = %v, want a lock (the lock does not expire)", s.h.ShortTTL, s.expiryLimit(), err)
		}
		release(t, lk)
		if now := time.Now(); now.Before(a.ValidUntil()) {
			t.Fatalf("second Obtain succeeded %v before the first holder's validity ended", a.ValidUntil().Sub(now))
		}
		return
	}
}

func (s suite) notHeldAfterExpiry(t *testing.T, ctx context.Context) {
	key := Key(t)
	l := s.h.NewLocker(t)
	a := s.expiredLock(t, ctx, l, key)
	if err := a.Refresh(ctx, longTTL); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh after expiry = %v, want ErrNotHeld", err)
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release after expiry = %v, want ErrNotHeld", err)
	}
	if !a.ValidUntil().IsZero() {
		t.Errorf("ValidUntil after the lock was found gone = %v, want the zero time", a.ValidUntil())
	}
	s.obtain(t, ctx, l, key, longTTL) // Refresh and Release left no key behind
}

func (s suite) nonOwnerCannotTouch(t *testing.T, ctx context.Context) {
	key := Key(t)
	a := s.expiredLock(t, ctx, s.h.NewLocker(t), key)
	b := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL)

	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release by a non-owner = %v, want ErrNotHeld", err)
	}
	if err := a.Refresh(ctx, 10*longTTL); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh by a non-owner = %v, want ErrNotHeld", err)
	}
	if _, err := a.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("TTL by a non-owner = %v, want ErrNotHeld", err)
	}
	ttl, err := b.TTL(ctx)
	if err != nil {
		t.Fatalf("owner's TTL after a non-owner's Release and Refresh = %v, want the lock still held", err)
	}
	if limit := longTTL + s.h.ExtraTTL; ttl > limit {
		t.Errorf("owner's TTL after a non-owner's Refresh = %v, want at most %v", ttl, limit)
	}
}

func (s suite) expiredAndTakenDiffer(t *testing.T, ctx context.Context) {
	key := Key(t)
	l := s.h.NewLocker(t)
	a := s.expiredLock(t, ctx, l, key)
	if err := a.Refresh(ctx, longTTL); !errors.Is(err, lock.ErrExpired) {
		t.Errorf("Refresh of an expired lock = %v, want ErrExpired", err)
	}
	s.obtain(t, ctx, l, key, longTTL)
	if err := a.Release(ctx); !errors.Is(err, lock.ErrTaken) {
		t.Errorf("Release of a lock taken by another owner = %v, want ErrTaken", err)
	}
}

func (s suite) releaseFreesTheLock(t *testing.T, ctx context.Context) {
	key := Key(t)
	l := s.h.NewLocker(t)
	a := s.obtain(t, ctx, l, key, longTTL)
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	if !a.ValidUntil().IsZero() {
		t.Errorf("ValidUntil after Release = %v, want the zero time", a.ValidUntil())
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Release = %v, want ErrNotHeld", err)
	}
	if err := a.Refresh(ctx, longTTL); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh after Release = %v, want ErrNotHeld", err)
	}
	s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL)
	var nilLock *lock.Lock
	if err := nilLock.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release of a nil *Lock = %v, want ErrNotHeld", err)
	}
}

// refreshExtends: also, Refresh(0) renews the TTL last asked for, and a
// negative TTL is an *ArgumentError.
func (s suite) refreshExtends(t *testing.T, ctx context.Context) {
	a := s.obtain(t, ctx, s.h.NewLocker(t), Key(t), s.h.ShortTTL)
	before := a.ValidUntil()
	if err := a.Refresh(ctx, longTTL); err != nil {
		t.Fatalf("Refresh = %v, want nil", err)
	}
	ttl, err := a.TTL(ctx)
	if err != nil {
		t.Fatalf("TTL after Refresh = %v, want the lock held", err)
	}
	if limit := longTTL + s.h.ExtraTTL; ttl <= s.h.ShortTTL+s.h.ExtraTTL || ttl > limit {
		t.Errorf("TTL after Refresh(%v) = %v, want in (%v, %v]", longTTL, ttl, s.h.ShortTTL+s.h.ExtraTTL, limit)
	}
	if after := a.ValidUntil(); !after.After(before) {
		t.Errorf("ValidUntil after Refresh = %v, want later than %v", after, before)
	}
	if err := a.Refresh(ctx, 0); err != nil {
		t.Errorf("Refresh(0) = %v, want nil: it renews the TTL of the last refresh", err)
	}
	if ttl, err := a.TTL(ctx); err != nil || ttl <= s.h.ShortTTL+s.h.ExtraTTL {
		t.Errorf("TTL after Refresh(0) = %v, %v; want more than %v: the TTL of the last refresh, %v", ttl, err, s.h.ShortTTL+s.h.ExtraTTL, longTTL)
	}
	if err := a.Refresh(ctx, -time.Second); !errors.As(err, new(*lock.ArgumentError)) {
		t.Errorf("Refresh(-1s) = %v, want an *ArgumentError", err)
	}
}

// ttlReportsRemaining: also, ValidUntil is after Obtain was called and no
// later than its return plus the TTL.
func (s suite) ttlReportsRemaining(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	sent := time.Now()
	a := s.obtain(t, ctx, l, Key(t), longTTL)
	returned := time.Now()
	ttl, err := a.TTL(ctx)
	if err != nil {
		t.Fatalf("TTL = %v, want the lock held", err)
	}
	if limit := longTTL + s.h.ExtraTTL; ttl <= 0 || ttl > limit {
		t.Errorf("TTL = %v, want in (0, %v]", ttl, limit)
	}
	if v := a.ValidUntil(); !v.After(sent) || v.After(returned.Add(longTTL)) {
		t.Errorf("ValidUntil = call%+v, want after the call and at most %v after it returned (%v)", v.Sub(sent), longTTL, returned.Sub(sent))
	}
}

// contextEndsTheWait: on a loaded machine, the first attempt may not have
// answered when the context ends: then the error matches ErrNoAnswer, not
// ErrNotObtained.
func (s suite) contextEndsTheWait(t *testing.T, ctx context.Context) {
	key := Key(t)
	l := s.h.NewLocker(t)
	holder := s.obtain(t, ctx, l, key, longTTL)
	retry := lock.WithRetry(lock.Linear(5 * time.Millisecond))
	// check checks the error of an Obtain whose wait the end of ctx (want)
	// ends, according to whether an attempt found the lock held.
	check := func(t *testing.T, ctx context.Context, want error) {
		t.Helper()
		tr := newWaitTrace()
		_, err := l.Obtain(ctx, key, longTTL, retry, tr.option())
		found := slices.Contains(tr.all(), held)
		if !errors.Is(err, want) {
			t.Errorf("Obtain = %v, want an error matching %v", err, want)
		}
		notObtained, noAnswer := errors.Is(err, lock.ErrNotObtained), errors.Is(err, lock.ErrNoAnswer)
		if notObtained != found || !found && !noAnswer {
			t.Errorf("Obtain = %v (an attempt found the lock held: %v), want ErrNotObtained exactly when one did, and ErrNoAnswer when none did", err, found)
		}
	}

	t.Run("deadline", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		check(t, dctx, context.DeadlineExceeded)
	})
	t.Run("cancel with cause", func(t *testing.T) {
		cause := errors.New("shutting down")
		cctx, cancel := context.WithCancelCause(ctx)
		time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
		check(t, cctx, cause)
	})
	t.Run("already cancelled", func(t *testing.T) {
		free := Key(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.Obtain(cctx, free, longTTL); !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain with a cancelled context = %v, want context.Canceled, and not ErrNotObtained: nothing found the lock held", err)
		}
		s.obtain(t, ctx, l, free, longTTL) // nothing was written
	})

	if err := holder.Release(ctx); err != nil {
		t.Fatalf("holder's Release = %v, want nil", err)
	}
	s.obtain(t, ctx, l, key, longTTL) // the waiters left no key behind
}

// counting counts the attempts a policy is asked about.
type counting struct {
	p lock.RetryPolicy
	n *atomic.Int64
}

func (c counting) Delay(attempt int) (time.Duration, bool) {
	c.n.Add(1)
	return c.p.Delay(attempt)
}

func (s suite) retryPolicies(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	holder := s.obtain(t, ctx, l, Key(t), longTTL)
	for _, c := range []struct {
		name  string
		p     lock.RetryPolicy
		gives int64 // the attempts after which it gives up; 0: it waits
	}{
		{"NoRetry", lock.NoRetry(), 1},
		{"LimitAttempts", lock.LimitAttempts(lock.Linear(time.Millisecond), 3), 3},
		{"LimitAttempts of Exponential", lock.LimitAttempts(lock.Exponential(time.Millisecond, 4*time.Millisecond), 4), 4},
		{"Linear", lock.Linear(2 * time.Millisecond), 0},
		{"Exponential", lock.Exponential(time.Millisecond, 16*time.Millisecond), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.gives > 0 {
				givesUp(t, ctx, l, holder.Key(), c.p, c.gives)
			} else {
				holder = waitsForRelease(t, ctx, l, holder, c.p)
			}
		})
	}
	release(t, holder)
}

// givesUp: an Obtain of the held key with policy p fails with
// ErrNotObtained after want attempts.
func givesUp(t *testing.T, ctx context.Context, l *lock.Locker, key string, p lock.RetryPolicy, want int64) {
	var n atomic.Int64
	_, err := l.Obtain(ctx, key, longTTL, lock.WithRetry(counting{p, &n}))
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("Obtain of a held lock = %v, want ErrNotObtained", err)
	}
	if got := n.Load(); got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
}

// waitsForRelease: an Obtain of holder's key with policy p waits through
// a few attempts while holder holds it, and obtains it once holder
// releases it. It returns the new holder.
func waitsForRelease(t *testing.T, ctx context.Context, l *lock.Locker, holder *lock.Lock, p lock.RetryPolicy) *lock.Lock {
	t.Helper()
	var n atomic.Int64
	w := wait(ctx, l, holder.Key(), counting{p, &n}, newWaitTrace(), nil)
	for n.Load() < 3 { // let it wait through a few attempts
		select {
		case <-w.done:
			release(t, w.lk)
			t.Fatalf("waiting Obtain returned (%v) after %d attempts while the lock was held, want it to wait", w.err, n.Load())
		case <-time.After(time.Millisecond):
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("holder's Release = %v, want nil", err)
	}
	<-w.done
	if w.err != nil {
		t.Fatalf("waiting Obtain after the holder released = %v, want a lock", w.err)
	}
	return w.lk
}

func (s suite) tokensAreUnique(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		lk := s.obtain(t, ctx, l, Key(t), longTTL)
		tok := lk.Token()
		if len(tok) < 22 {
			t.Errorf("token length = %d, want at least 22 (128 bits in base64url)", len(tok))
		}
		if seen[tok] {
			t.Fatalf("token repeated after %d locks", i)
		}
		seen[tok] = true
	}
}

func (s suite) metadataRoundTrips(t *testing.T, ctx context.Context) {
	const meta = "host=web-3 pid=4242"
	lk := s.obtain(t, ctx, s.h.NewLocker(t), Key(t), longTTL, lock.WithMetadata(meta))
	if got := lk.Metadata(); got != meta {
		t.Errorf("Metadata() = %q, want %q", got, meta)
	}
	if _, err := lk.TTL(ctx); err != nil {
		t.Errorf("TTL of a lock with metadata = %v, want it held", err)
	}
	stored := 0
	for _, c := range s.h.Conns(t) {
		v, ok, err := c.Get(ctx, lk.Key())
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		if ok {
			stored++
			if !strings.HasSuffix(v, meta) {
				t.Errorf("a stored value ends with the metadata = false, want true")
			}
		}
	}
	if stored == 0 {
		t.Errorf("servers storing the lock = 0, want at least 1")
	}
}

func (s suite) callerChosenToken(t *testing.T, ctx context.Context) {
	key := Key(t)
	const tok = "handover-token-0123456"
	l := s.h.NewLocker(t)
	a := s.obtain(t, ctx, l, key, longTTL, lock.WithToken(tok))
	if a.Token() != tok {
		t.Errorf("Token() differs from the token given with WithToken")
	}
	refused(t, ctx, l, key, "Obtain with another token")
	refused(t, ctx, l, key, "Obtain with the token but other metadata", lock.WithToken(tok), lock.WithMetadata("other"))
	b := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL, lock.WithToken(tok))
	if err := b.Release(ctx); err != nil {
		t.Errorf("Release by the new holder of the handed-over lock = %v, want nil", err)
	}
}

func (s suite) tokenStaysSecret(t *testing.T, ctx context.Context) {
	key := Key(t)
	l := s.h.NewLocker(t)
	a := s.obtain(t, ctx, l, key, s.h.ShortTTL)
	tok := a.Token()
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("held", "lock", a)
	s.waitExpired(t, ctx, a)
	b := s.obtain(t, ctx, l, key, longTTL)
	errs := []error{a.Release(ctx), a.Refresh(ctx, longTTL)}
	_, ttlErr := a.TTL(ctx)
	_, obtainErr := l.Obtain(ctx, key, longTTL)
	errs = append(errs, ttlErr, obtainErr)
	texts := []string{fmt.Sprint(a), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", a), logged.String()}
	for _, err := range errs {
		if err != nil {
			texts = append(texts, err.Error())
		}
	}
	for _, text := range texts {
		if strings.Contains(text, tok) || strings.Contains(text, b.Token()) {
			t.Errorf("%q contains a token", text)
		}
	}
}

func (s suite) invalidArguments(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	key := Key(t)
	for _, c := range []struct {
		name string
		key  string
		ttl  time.Duration
		opts []lock.Option
		arg  string
	}{
		{"empty key", "", time.Second, nil, "key"},
		{"zero TTL and WithTTL(0)", key, 0, []lock.Option{lock.WithTTL(0)}, "ttl"}, // a Locker may have a default TTL, but not 0
		{"negative TTL", key, -time.Second, nil, "ttl"},
		{"sub-millisecond TTL", key, 500 * time.Microsecond, nil, "ttl"},
		{"short token", key, time.Second, []lock.Option{lock.WithToken("short")}, "token"},
		{"nil retry policy", key, time.Second, []lock.Option{lock.WithRetry(nil)}, "retry"},
		{"bad Linear", key, time.Second, []lock.Option{lock.WithRetry(lock.Linear(0))}, "retry"},
		{"bad Exponential", key, time.Second, []lock.Option{lock.WithRetry(lock.Exponential(time.Second, time.Millisecond))}, "retry"},
		{"bad LimitAttempts", key, time.Second, []lock.Option{lock.WithRetry(lock.LimitAttempts(lock.NoRetry(), 0))}, "retry"},
		{"nil option", key, time.Second, []lock.Option{nil}, "option"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lk, err := l.Obtain(ctx, c.key, c.ttl, c.opts...)
			release(t, lk)
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || !errors.As(err, new(*lock.ArgumentError)) {
				t.Fatalf("Obtain = %v, want an *ArgumentError", err)
			}
			if ae.Name != c.arg {
				t.Errorf("ArgumentError.Name = %q, want %q", ae.Name, c.arg)
			}
		})
	}
	s.obtain(t, ctx, l, key, time.Second) // the invalid calls left no key behind
}

func (s suite) nilDriver(t *testing.T, _ context.Context) {
	l, err := s.h.NewWithNilConn()
	if l != nil || !errors.As(err, new(*lock.ArgumentError)) {
		t.Errorf("constructor with a nil driver = %v, %v; want nil, an *ArgumentError", l, err)
	}
}

func (s suite) keyOfAnotherType(t *testing.T, ctx context.Context) {
	conns := s.h.Conns(t)
	key := Key(t)
	hset := driver.NewScript(`return redis.call('HSET', KEYS[1], 'field', 'value')`)
	hlen := driver.NewScript(`return redis.call('HLEN', KEYS[1])`)
	for _, c := range conns {
		if _, err := hset.Run(ctx, c, []string{key}); err != nil {
			t.Fatalf("HSET: %v", err)
		}
		t.Cleanup(func() { _, _ = c.Del(context.Background(), key) })
	}
	_, err := s.h.NewLocker(t).Obtain(ctx, key, longTTL)
	if err == nil || errors.Is(err, lock.ErrNotObtained) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Obtain of a hash key = %v, want a WRONGTYPE error", err)
	}
	for _, c := range conns {
		if n, err := hlen.Int(ctx, c, []string{key}); err != nil || n != 1 {
			t.Errorf("HLEN after Obtain = %d, %v; want 1, nil", n, err)
		}
	}
}

func (s suite) unreachable(t *testing.T, ctx context.Context) {
	l := s.h.NewUnreachable(t)
	_, err := l.Obtain(ctx, Key(t), longTTL)
	if err == nil {
		t.Fatalf("Obtain with Redis unreachable = nil error, want an error")
	}
	if ctx.Err() != nil {
		t.Fatalf("Obtain with Redis unreachable returned only when the test's context ended: %v", err)
	}
}
