package lock_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// fakeStrategy is an in-memory strategy.Strategy: a map of key to value guarded
// by a mutex, with the documented semantics. It records every call, and can
// be told to fail an operation.
type fakeStrategy struct {
	mu      sync.Mutex
	entries map[string]fakeEntry
	calls   []fakeCall

	// grant and refreshGrant are returned by successful Acquire and
	// Refresh calls; a Grant.Value becomes the stored value.
	grant, refreshGrant strategy.Grant
	// acquireErr, refreshErr, releaseErr and ttlErr, when set, are returned
	// by the operation instead of its normal result.
	acquireErr, refreshErr, releaseErr, ttlErr error
	// onAcquire, when set, is called at the start of every Acquire, outside
	// the mutex.
	onAcquire func(ctx context.Context)
	// refreshErrs are returned, in turn, by the next refreshes (see
	// failRefreshes).
	refreshErrs []error
	// afterRefresh, when set, is called at the end of every successful
	// Refresh, outside the mutex: the new value is stored, and the reply
	// is still on its way.
	afterRefresh func()
}

type fakeEntry struct {
	value   string
	expires time.Time
}

type fakeCall struct {
	op, key, value string
	ctxErr         error // the context's error when the call was made
	hasDeadline    bool
}

var _ strategy.Strategy = (*fakeStrategy)(nil)

// Inspect reads key's entry: held, its TTL, and its value's fingerprint and
// metadata.
func (f *fakeStrategy) Inspect(ctx context.Context, key string) (strategy.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "inspect", key, "")
	if !ok {
		return strategy.State{Verdict: "free"}, nil
	}
	token, meta := strategy.SplitValue(e.value)
	return strategy.State{Held: true, TTL: time.Until(e.expires), Fingerprint: strategy.Fingerprint(token), Metadata: meta, Verdict: "held"}, nil
}

func newFake() *fakeStrategy {
	return &fakeStrategy{entries: make(map[string]fakeEntry)}
}

// record logs a call and returns the live entry of key, if any. f.mu must be
// held.
func (f *fakeStrategy) record(ctx context.Context, op, key, value string) (fakeEntry, bool) {
	_, hasDeadline := ctx.Deadline()
	f.calls = append(f.calls, fakeCall{op: op, key: key, value: value, ctxErr: ctx.Err(), hasDeadline: hasDeadline})
	e, ok := f.entries[key]
	if ok && !time.Now().Before(e.expires) {
		delete(f.entries, key)
		return fakeEntry{}, false
	}
	return e, ok
}

// owned returns nil when key holds value, and ErrExpired or ErrTaken
// otherwise. f.mu must be held.
func owned(e fakeEntry, ok bool, value string) error {
	switch {
	case !ok:
		return lock.ErrExpired
	case e.value != value:
		return lock.ErrTaken
	}
	return nil
}

func (f *fakeStrategy) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	key, value, ttl := r.Key, r.Value(), r.TTL
	if f.onAcquire != nil {
		f.onAcquire(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "acquire", key, value)
	if f.acquireErr != nil {
		return f.grant, f.acquireErr
	}
	if ok && e.value != value {
		return strategy.Grant{}, lock.ErrNotObtained
	}
	stored := value
	if f.grant.Value != "" {
		stored = f.grant.Value
	}
	f.entries[key] = fakeEntry{value: stored, expires: time.Now().Add(ttl)}
	return f.grant, nil
}

func (f *fakeStrategy) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "refresh", key, value)
	if len(f.refreshErrs) > 0 {
		err := f.refreshErrs[0]
		f.refreshErrs = f.refreshErrs[1:]
		return strategy.Grant{}, err
	}
	if f.refreshErr != nil {
		return strategy.Grant{}, f.refreshErr
	}
	if err := owned(e, ok, value); err != nil {
		return strategy.Grant{}, err
	}
	if f.refreshGrant.Value != "" {
		e.value = f.refreshGrant.Value
	}
	e.expires = time.Now().Add(ttl)
	f.entries[key] = e
	if f.afterRefresh != nil {
		f.mu.Unlock()
		f.afterRefresh()
		f.mu.Lock()
	}
	return f.refreshGrant, nil
}

func (f *fakeStrategy) Release(ctx context.Context, key, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "release", key, value)
	if f.releaseErr != nil {
		return f.releaseErr
	}
	if err := owned(e, ok, value); err != nil {
		return err
	}
	delete(f.entries, key)
	return nil
}

func (f *fakeStrategy) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "ttl", key, value)
	if f.ttlErr != nil {
		return 0, f.ttlErr
	}
	if err := owned(e, ok, value); err != nil {
		return 0, err
	}
	return time.Until(e.expires), nil
}

// hold makes value the holder of key for an hour, as another owner would.
func (f *fakeStrategy) hold(key, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries[key] = fakeEntry{value: value, expires: time.Now().Add(time.Hour)}
}

// failRefreshes makes the next refreshes fail with errs, one each, and
// every one after them with always (nil: succeed). It is safe while a
// refresher runs.
func (f *fakeStrategy) failRefreshes(always error, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshErrs, f.refreshErr = errs, always
}

// drop deletes key, as if it had expired.
func (f *fakeStrategy) drop(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.entries, key)
}

// callsTo returns the recorded calls of op, in order.
func (f *fakeStrategy) callsTo(op string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var cs []fakeCall
	for _, c := range f.calls {
		if c.op == op {
			cs = append(cs, c)
		}
	}
	return cs
}

// values returns the values of calls.
func values(calls []fakeCall) []string {
	vs := make([]string, len(calls))
	for i, c := range calls {
		vs[i] = c.value
	}
	return vs
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// obtain obtains key on f for a minute, failing the test on error.
func obtain(t *testing.T, f *fakeStrategy, key string, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := lock.New(f).Obtain(context.Background(), key, time.Minute, opts...)
	if err != nil {
		t.Fatalf("Obtain(%q) = %v, want a lock", key, err)
	}
	return lk
}

var errBoom = errors.New("boom: connection reset")

// timeout bounds the tests that wait, so that a hang fails the test instead
// of the binary.
const timeout = time.Minute

func TestRetryPolicies(t *testing.T) {
	t.Run("NoRetry stops after the first attempt", func(t *testing.T) {
		p := lock.NoRetry()
		for _, attempt := range []int{1, 2, 100} {
			if d, ok := p.Delay(attempt); ok {
				t.Errorf("NoRetry().Delay(%d) = %v, true, want false", attempt, d)
			}
		}
	})

	t.Run("Linear returns its interval for any attempt", func(t *testing.T) {
		const interval = 250 * time.Millisecond
		p := lock.Linear(interval)
		for _, attempt := range []int{1, 2, 3, 62, 63, 64, 1000, math.MaxInt32, math.MaxInt} {
			if d, ok := p.Delay(attempt); d != interval || !ok {
				t.Errorf("Linear(%v).Delay(%d) = %v, %v, want %v, true", interval, attempt, d, ok, interval)
			}
		}
	})

	t.Run("Exponential's delay lies in [0, min(max, base·2^(attempt-1)))", func(t *testing.T) {
		for _, c := range []struct{ base, max time.Duration }{
			{time.Nanosecond, time.Nanosecond},
			{time.Nanosecond, 1 << 62},
			{3 * time.Nanosecond, time.Hour},
			{10 * time.Millisecond, time.Second},
			{time.Second, time.Second},
			{time.Second, time.Minute},
			{1 << 40, math.MaxInt64},
			{math.MaxInt64 / 3, math.MaxInt64},
			{math.MaxInt64, math.MaxInt64},
		} {
			p := lock.Exponential(c.base, c.max)
			for attempt := 1; attempt <= 70; attempt++ {
				ceiling := exponentialCeiling(c.base, c.max, attempt)
				for range 50 {
					d, ok := p.Delay(attempt)
					if !ok {
						t.Fatalf("Exponential(%v, %v).Delay(%d) = %v, false, want true", c.base, c.max, attempt, d)
					}
					if d < 0 || d >= ceiling {
						t.Fatalf("Exponential(%v, %v).Delay(%d) = %v, want in [0, %v)", c.base, c.max, attempt, d, ceiling)
					}
				}
			}
		}
	})

	t.Run("Exponential(1ns, max) caps attempt 63 at 2^62ns when max is larger", func(t *testing.T) {
		// base·2^62 = 2^62ns fits in a Duration, so for max above it the
		// ceiling of attempt 63 is 2^62ns, not max.
		const base, max = time.Nanosecond, time.Duration(math.MaxInt64)
		p := lock.Exponential(base, max)
		for range 50 {
			if d, _ := p.Delay(63); d >= 1<<62 {
				t.Fatalf("Exponential(%v, %v).Delay(63) = %v, want in [0, %v)", base, max, d, time.Duration(1<<62))
			}
		}
	})

	t.Run("Exponential never overflows at large attempts", func(t *testing.T) {
		const base, max = time.Millisecond, 30 * time.Second
		p := lock.Exponential(base, max)
		for _, attempt := range []int{61, 62, 63, 64, 65, 100, 1 << 20, math.MaxInt32, math.MaxInt} {
			for range 50 {
				d, ok := p.Delay(attempt)
				if d < 0 || d >= max || !ok {
					t.Fatalf("Exponential(%v, %v).Delay(%d) = %v, %v, want in [0, %v), true", base, max, attempt, d, ok, max)
				}
			}
		}
	})

	t.Run("LimitAttempts(p, n) allows exactly n attempts in all", func(t *testing.T) {
		const interval = 7 * time.Millisecond
		for n := 1; n <= 5; n++ {
			p := lock.LimitAttempts(lock.Linear(interval), n)
			for attempt := 1; attempt < n; attempt++ {
				if d, ok := p.Delay(attempt); d != interval || !ok {
					t.Errorf("LimitAttempts(Linear(%v), %d).Delay(%d) = %v, %v, want %v, true", interval, n, attempt, d, ok, interval)
				}
			}
			for _, attempt := range []int{n, n + 1, math.MaxInt} {
				if d, ok := p.Delay(attempt); ok {
					t.Errorf("LimitAttempts(Linear(%v), %d).Delay(%d) = %v, true, want false", interval, n, attempt, d)
				}
			}
		}
	})

	t.Run("LimitAttempts stops early when the policy it wraps stops", func(t *testing.T) {
		p := lock.LimitAttempts(lock.NoRetry(), 5)
		if d, ok := p.Delay(1); ok {
			t.Errorf("LimitAttempts(NoRetry(), 5).Delay(1) = %v, true, want false", d)
		}
	})

	t.Run("a shared policy is safe for concurrent use", func(t *testing.T) {
		const base, max, n = time.Millisecond, time.Second, 10
		policies := []lock.RetryPolicy{
			lock.NoRetry(),
			lock.Linear(time.Millisecond),
			lock.Exponential(base, max),
			lock.LimitAttempts(lock.Exponential(base, max), n),
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16*len(policies))
		for _, p := range policies {
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 1000 {
						attempt := i%20 + 1
						d, ok := p.Delay(attempt)
						if d < 0 || d > max {
							errs <- fmt.Errorf("%T.Delay(%d) = %v, %v, want a delay in [0, %v]", p, attempt, d, ok, max)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("Obtain makes as many attempts as the policy allows", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			policy lock.RetryPolicy
			want   int
		}{
			{"default", nil, 1},
			{"NoRetry", lock.NoRetry(), 1},
			{"LimitAttempts(Linear, 1)", lock.LimitAttempts(lock.Linear(time.Nanosecond), 1), 1},
			{"LimitAttempts(Linear, 4)", lock.LimitAttempts(lock.Linear(time.Nanosecond), 4), 4},
			{"LimitAttempts(Exponential, 6)", lock.LimitAttempts(lock.Exponential(time.Nanosecond, time.Microsecond), 6), 6},
		} {
			f := newFake()
			f.hold("k", "another owner")
			var opts []lock.Option
			if c.policy != nil {
				opts = append(opts, lock.WithRetry(c.policy))
			}
			_, err := lock.New(f).Obtain(context.Background(), "k", time.Minute, opts...)
			if !errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("%s: Obtain of a held key = %v, want an error matching ErrNotObtained", c.name, err)
			}
			if got := len(f.callsTo("acquire")); got != c.want {
				t.Errorf("%s: Obtain of a held key made %d attempts, want %d", c.name, got, c.want)
			}
			if got := len(f.callsTo("release")); got != 0 {
				t.Errorf("%s: Obtain of a held key called Release %d times, want 0", c.name, got)
			}
		}
	})

	t.Run("invalid policies are rejected as the retry argument", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			policy lock.RetryPolicy
		}{
			{"nil", nil},
			{"Linear(0)", lock.Linear(0)},
			{"Linear(-1s)", lock.Linear(-time.Second)},
			{"Exponential(0, 1s)", lock.Exponential(0, time.Second)},
			{"Exponential(2s, 1s)", lock.Exponential(2*time.Second, time.Second)},
			{"LimitAttempts(Linear(1ms), 0)", lock.LimitAttempts(lock.Linear(time.Millisecond), 0)},
			{"LimitAttempts(Linear(0), 3)", lock.LimitAttempts(lock.Linear(0), 3)},
			{"LimitAttempts(nil, 3)", lock.LimitAttempts(nil, 3)},
		} {
			f := newFake()
			_, err := lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(c.policy))
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "retry" {
				t.Errorf("Obtain(WithRetry(%s)) = %v, want an *ArgumentError named retry", c.name, err)
			}
			if got := len(f.calls); got != 0 {
				t.Errorf("Obtain(WithRetry(%s)) called the strategy %d times, want 0", c.name, got)
			}
		}
	})
}

// exponentialCeiling returns min(max, base·2^(attempt-1)) without overflow.
func exponentialCeiling(base, max time.Duration, attempt int) time.Duration {
	c := base
	for i := 1; i < attempt && c < max; i++ {
		if c > max/2 {
			return max
		}
		c *= 2
	}
	return min(c, max)
}

func TestErrors(t *testing.T) {
	// The errors are wrapped the way callers receive them.
	expired := fmt.Errorf("release: %w", lock.ErrExpired)
	taken := fmt.Errorf("release: %w", lock.ErrTaken)

	t.Run("ErrExpired matches ErrNotHeld", func(t *testing.T) {
		if !errors.Is(expired, lock.ErrNotHeld) {
			t.Error("errors.Is(ErrExpired, ErrNotHeld) = false, want true")
		}
	})

	t.Run("ErrTaken matches ErrNotHeld", func(t *testing.T) {
		if !errors.Is(taken, lock.ErrNotHeld) {
			t.Error("errors.Is(ErrTaken, ErrNotHeld) = false, want true")
		}
	})

	t.Run("ErrExpired and ErrTaken are distinct", func(t *testing.T) {
		if errors.Is(expired, lock.ErrTaken) {
			t.Error("errors.Is(ErrExpired, ErrTaken) = true, want false")
		}
		if errors.Is(taken, lock.ErrExpired) {
			t.Error("errors.Is(ErrTaken, ErrExpired) = true, want false")
		}
		if lock.ErrExpired.Error() == lock.ErrTaken.Error() {
			t.Errorf("ErrExpired and ErrTaken both read %q, want different messages", lock.ErrExpired)
		}
	})

	t.Run("ErrNotHeld matches neither of its causes", func(t *testing.T) {
		notHeld := fmt.Errorf("release: %w", lock.ErrNotHeld)
		for _, target := range []error{lock.ErrExpired, lock.ErrTaken} {
			if errors.Is(notHeld, target) {
				t.Errorf("errors.Is(ErrNotHeld, %v) = true, want false", target)
			}
		}
	})

	t.Run("the sentinel families are disjoint", func(t *testing.T) {
		families := []error{lock.ErrNotObtained, lock.ErrNotHeld, lock.ErrRefreshLimit, lock.ErrLost}
		for _, err := range families {
			for _, target := range families {
				if err != target && errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = true, want false", err, target)
				}
			}
		}
	})

	t.Run("the errors of the strategy package are the lock package's", func(t *testing.T) {
		pairs := []struct{ lock, strategy error }{
			{lock.ErrNotObtained, strategy.ErrNotObtained},
			{lock.ErrNotHeld, strategy.ErrNotHeld},
			{lock.ErrExpired, strategy.ErrExpired},
			{lock.ErrTaken, strategy.ErrTaken},
		}
		for _, p := range pairs {
			if !errors.Is(p.strategy, p.lock) || !errors.Is(p.lock, p.strategy) {
				t.Errorf("errors.Is between %v and strategy's %v: got false, want true both ways", p.lock, p.strategy)
			}
		}
		var ae *lock.ArgumentError
		if err := error(&strategy.ArgumentError{Name: "ttl"}); !errors.As(err, &ae) {
			t.Errorf("errors.As(%v, *lock.ArgumentError): got false, want true", err)
		}
	})

	t.Run("an *ArgumentError is found with errors.As and names the argument", func(t *testing.T) {
		err := fmt.Errorf("setting up: %w", &lock.ArgumentError{Name: "ttl", Reason: "must be at least 1ms"})
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) {
			t.Fatalf("errors.As(%v, *ArgumentError) = false, want true", err)
		}
		if ae.Name != "ttl" {
			t.Errorf("ArgumentError.Name = %q, want %q", ae.Name, "ttl")
		}
		if msg := ae.Error(); !strings.Contains(msg, "ttl") || !strings.Contains(msg, "must be at least 1ms") {
			t.Errorf("ArgumentError.Error() = %q, want it to contain the name %q and the reason", msg, "ttl")
		}
	})

	t.Run("invalid arguments to Obtain are *ArgumentErrors naming the argument", func(t *testing.T) {
		for _, c := range []struct {
			name string
			key  string
			ttl  time.Duration
			opts []lock.Option
			want string
		}{
			{"empty key", "", time.Minute, nil, "key"},
			{"zero ttl", "k", 0, nil, "ttl"},
			{"negative ttl", "k", -time.Second, nil, "ttl"},
			{"ttl below a millisecond", "k", time.Millisecond - 1, nil, "ttl"},
			{"nil option", "k", time.Minute, []lock.Option{nil}, "option"},
			{"short token", "k", time.Minute, []lock.Option{lock.WithToken(strings.Repeat("t", 21))}, "token"},
			{"nil retry policy", "k", time.Minute, []lock.Option{lock.WithRetry(nil)}, "retry"},
		} {
			f := newFake()
			lk, err := lock.New(f).Obtain(context.Background(), c.key, c.ttl, c.opts...)
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) {
				t.Errorf("%s: Obtain(%q, %v) = %v, %v, want an *ArgumentError", c.name, c.key, c.ttl, lk, err)
				continue
			}
			if !errors.As(err, new(*lock.ArgumentError)) {
				t.Errorf("%s: got %v, want an *ArgumentError", c.name, err)
			}
			if ae.Name != c.want {
				t.Errorf("%s: ArgumentError.Name = %q, want %q", c.name, ae.Name, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %q does not name the argument %q", c.name, err, c.want)
			}
			if got := len(f.calls); got != 0 {
				t.Errorf("%s: Obtain called the strategy %d times, want 0", c.name, got)
			}
		}
	})

	t.Run("a token of exactly MinTokenLen bytes is accepted", func(t *testing.T) {
		token := strings.Repeat("t", 22)
		lk := obtain(t, newFake(), "k", lock.WithToken(token))
		if lk.Token() != token {
			t.Errorf("Token() = %q, want %q", lk.Token(), token)
		}
	})
}

func TestObtain(t *testing.T) {
	t.Run("a strategy error that is not ErrNotObtained is returned wrapped", func(t *testing.T) {
		f := newFake()
		f.acquireErr = errBoom
		lk, err := lock.New(f).Obtain(context.Background(), "k", time.Minute)
		if lk != nil {
			t.Errorf("Obtain returned lock %v with error %v, want a nil lock", lk, err)
		}
		if !errors.Is(err, errBoom) {
			t.Errorf("errors.Is(%v, errBoom) = false, want true", err)
		}
		if err == errBoom {
			t.Errorf("Obtain returned the strategy error %v unwrapped, want it wrapped with the operation", err)
		}
		if errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("errors.Is(%v, ErrNotObtained) = true, want false", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "obtain") || !strings.Contains(msg, `"k"`) {
			t.Errorf("Obtain error = %q, want it to name the operation and the key", msg)
		}
	})

	t.Run("a strategy error is not retried", func(t *testing.T) {
		f := newFake()
		f.acquireErr = errBoom
		_, err := lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.Linear(time.Nanosecond)))
		if !errors.Is(err, errBoom) {
			t.Errorf("errors.Is(%v, errBoom) = false, want true", err)
		}
		if got := len(f.callsTo("acquire")); got != 1 {
			t.Errorf("Obtain made %d attempts after a strategy error, want 1", got)
		}
	})

	t.Run("after a strategy error the attempted value is released", func(t *testing.T) {
		f := newFake()
		f.acquireErr = errBoom
		_, _ = lock.New(f).Obtain(context.Background(), "k", time.Minute)
		acquired, released := f.callsTo("acquire"), f.callsTo("release")
		if len(acquired) != 1 {
			t.Fatalf("Obtain made %d attempts, want 1", len(acquired))
		}
		if want := []string{acquired[0].value, acquired[0].value}; !equal(values(released), want) {
			t.Errorf("Release values = %q, want %q (the value of the failed attempt, until the server answered twice)", values(released), want)
		}
		if len(released) == 1 && released[0].key != "k" {
			t.Errorf("Release key = %q, want %q", released[0].key, "k")
		}
	})

	t.Run("a strategy that cleaned up after itself is not cleaned up after", func(t *testing.T) {
		f := newFake()
		f.acquireErr, f.grant = errBoom, strategy.Grant{Undone: true}
		_, _ = lock.New(f).Obtain(context.Background(), "k", time.Minute)
		if got := len(f.callsTo("release")); got != 0 {
			t.Errorf("Release calls after an error with Grant.Clean = %d, want 0", got)
		}
	})

	t.Run("the clean-up releases the value the strategy reports it wrote", func(t *testing.T) {
		f := newFake()
		f.acquireErr, f.grant = errBoom, strategy.Grant{Value: "1700000000123"}
		_, _ = lock.New(f).Obtain(context.Background(), "k", time.Minute)
		if got, want := values(f.callsTo("release")), []string{"1700000000123", "1700000000123"}; !equal(got, want) {
			t.Errorf("Release values = %q, want %q (Grant.Value)", got, want)
		}
	})

	t.Run("every attempt gets a fresh token unless the caller chose one", func(t *testing.T) {
		f := newFake()
		f.entries["k"] = fakeEntry{value: "held-by-another", expires: time.Now().Add(time.Hour)}
		_, _ = lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 3)))
		got := values(f.callsTo("acquire"))
		if len(got) != 3 || got[0] == got[1] || got[1] == got[2] || got[0] == got[2] {
			t.Errorf("values of 3 attempts = %q, want 3 different tokens", got)
		}
		f2 := newFake()
		f2.entries["k"] = f.entries["k"]
		const tok = "caller-chosen-token-01"
		_, _ = lock.New(f2).Obtain(context.Background(), "k", time.Minute, lock.WithToken(tok), lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 2)))
		if got := values(f2.callsTo("acquire")); !equal(got, []string{tok, tok}) {
			t.Errorf("values of 2 attempts with a chosen token = %q, want the token twice", got)
		}
	})

	t.Run("the clean-up runs on a live, bounded context after the caller's is cancelled", func(t *testing.T) {
		f := newFake()
		f.acquireErr = context.Canceled
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f.onAcquire = func(context.Context) { cancel() } // the reply is lost as the caller gives up
		_, err := lock.New(f).Obtain(ctx, "k", time.Minute)
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Errorf("Obtain = %v, want an error matching ErrNotObtained and context.Canceled", err)
		}
		released := f.callsTo("release")
		for end := time.Now().Add(timeout); len(released) < 2 && time.Now().Before(end); released = f.callsTo("release") {
			time.Sleep(time.Millisecond) // the clean-up goes on in the background
		}
		if len(released) != 2 {
			t.Fatalf("the clean-up called Release %d times after a failed attempt, want 2 (until the server answered twice)", len(released))
		}
		if released[0].ctxErr != nil {
			t.Errorf("clean-up Release ran on a context with error %v, want a live context", released[0].ctxErr)
		}
		if !released[0].hasDeadline {
			t.Error("clean-up Release ran on a context without a deadline, want one bounded by CleanupTimeout")
		}
	})

	t.Run("cancelling the context during the wait gives ErrNotObtained and context.Canceled", func(t *testing.T) {
		f := newFake()
		f.hold("k", "another owner")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		attempted := make(chan struct{}, 1)
		f.onAcquire = func(context.Context) {
			select {
			case attempted <- struct{}{}:
			default:
			}
		}
		errc := make(chan error, 1)
		go func() {
			_, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.Linear(time.Hour)))
			errc <- err
		}()
		<-attempted
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("errors.Is(%v, ErrNotObtained) = false, want true", err)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("errors.Is(%v, context.Canceled) = false, want true", err)
			}
		case <-time.After(timeout):
			t.Fatalf("Obtain still waiting %v after its context was cancelled", timeout)
		}
	})

	t.Run("the error matches the cause the context was cancelled with", func(t *testing.T) {
		f := newFake()
		f.hold("k", "another owner")
		errShutdown := errors.New("shutting down")
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		f.onAcquire = func(context.Context) { cancel(errShutdown) }
		_, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.Linear(time.Hour)))
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, errShutdown) {
			t.Errorf("Obtain = %v, want an error matching ErrNotObtained and the cause %v", err, errShutdown)
		}
	})

	t.Run("a context deadline during the wait gives ErrNotObtained and context.DeadlineExceeded", func(t *testing.T) {
		f := newFake()
		f.hold("k", "another owner")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.Linear(time.Hour)))
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Obtain = %v, want an error matching ErrNotObtained and context.DeadlineExceeded", err)
		}
	})

	t.Run("a context already done gives ErrNotObtained and the context's error", func(t *testing.T) {
		f := newFake()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		lk, err := lock.New(f).Obtain(ctx, "k", time.Minute)
		if lk != nil || !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Errorf("Obtain on a cancelled context = %v, %v, want nil and an error matching ErrNotObtained and context.Canceled", lk, err)
		}
	})

	t.Run("a waiter obtains the lock once the holder releases it", func(t *testing.T) {
		f := newFake()
		f.hold("k", "another owner")
		var once sync.Once
		f.onAcquire = func(context.Context) { once.Do(func() { f.drop("k") }) } // released during the first attempt's wait
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		lk, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.Linear(time.Millisecond)))
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		if lk.Key() != "k" {
			t.Errorf("Key() = %q, want %q", lk.Key(), "k")
		}
	})

	t.Run("the value passed to the strategy is token plus metadata", func(t *testing.T) {
		f := newFake()
		const metadata = "host=web-1 pid=42"
		lk := obtain(t, f, "k", lock.WithMetadata(metadata))
		want := lk.Token() + metadata
		if got := values(f.callsTo("acquire")); !equal(got, []string{want}) {
			t.Errorf("Acquire values = %q, want %q", got, []string{want})
		}
		if lk.Metadata() != metadata {
			t.Errorf("Metadata() = %q, want %q", lk.Metadata(), metadata)
		}
		if err := lk.Release(context.Background()); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if got := values(f.callsTo("release")); !equal(got, []string{want}) {
			t.Errorf("Release values = %q, want %q", got, []string{want})
		}
	})

	t.Run("without metadata the value is the token", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		if got, want := values(f.callsTo("acquire")), []string{lk.Token()}; !equal(got, want) {
			t.Errorf("Acquire values = %q, want %q", got, want)
		}
		if lk.Metadata() != "" {
			t.Errorf("Metadata() = %q, want empty", lk.Metadata())
		}
	})

	t.Run("WithToken sets the token instead of a random one", func(t *testing.T) {
		f := newFake()
		const token = "caller-chosen-token-01"
		lk := obtain(t, f, "k", lock.WithToken(token), lock.WithMetadata("/m"))
		if lk.Token() != token {
			t.Errorf("Token() = %q, want %q", lk.Token(), token)
		}
		if got, want := values(f.callsTo("acquire")), []string{token + "/m"}; !equal(got, want) {
			t.Errorf("Acquire values = %q, want %q", got, want)
		}
	})

	t.Run("Grant.Value replaces the value used by later Refresh, TTL and Release", func(t *testing.T) {
		f := newFake()
		f.grant = strategy.Grant{Value: "1700000000123"}
		lk := obtain(t, f, "k")
		ctx := context.Background()
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		if _, err := lk.TTL(ctx); err != nil {
			t.Fatalf("TTL = %v, want nil", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		for _, op := range []string{"refresh", "ttl", "release"} {
			if got, want := values(f.callsTo(op)), []string{"1700000000123"}; !equal(got, want) {
				t.Errorf("%s values = %q, want %q (the granted value)", op, got, want)
			}
		}
		if got := values(f.callsTo("acquire")); len(got) != 1 || len(got[0]) != 22 {
			t.Errorf("Acquire values = %q, want one random 22-character token", got)
		}
		if got := lk.Token(); got != "1700000000123" {
			t.Errorf("Token() = %q, want the granted value %q", got, "1700000000123")
		}
	})

	t.Run("Grant.Value from Refresh replaces the value used by later calls", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.refreshGrant = strategy.Grant{Value: "refreshed-value"}
		ctx := context.Background()
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if got, want := values(f.callsTo("release")), []string{"refreshed-value"}; !equal(got, want) {
			t.Errorf("Release values = %q, want %q", got, want)
		}
	})

	t.Run("ValidUntil is the request time plus ttl less the grant's drift", func(t *testing.T) {
		const ttl, drift = time.Minute, 3 * time.Second
		f := newFake()
		f.grant = strategy.Grant{Drift: drift}
		before := time.Now()
		lk, err := lock.New(f).Obtain(context.Background(), "k", ttl)
		after := time.Now()
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		got := lk.ValidUntil()
		if latest := after.Add(ttl - drift); got.After(latest) {
			t.Errorf("ValidUntil() = %v, want at most %v (time after Obtain + ttl - drift)", got, latest)
		}
		if earliest := before.Add(ttl - drift); got.Before(earliest) {
			t.Errorf("ValidUntil() = %v, want at least %v (time before Obtain + ttl - drift)", got, earliest)
		}
	})

	t.Run("ValidUntil moves with Refresh and its drift", func(t *testing.T) {
		const ttl, drift = 2 * time.Hour, 5 * time.Second
		f := newFake()
		lk := obtain(t, f, "k")
		f.refreshGrant = strategy.Grant{Drift: drift}
		before := time.Now()
		if err := lk.Refresh(context.Background(), ttl); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		after := time.Now()
		got := lk.ValidUntil()
		if latest := after.Add(ttl - drift); got.After(latest) {
			t.Errorf("ValidUntil() after Refresh = %v, want at most %v", got, latest)
		}
		if earliest := before.Add(ttl - drift); got.Before(earliest) {
			t.Errorf("ValidUntil() after Refresh = %v, want at least %v", got, earliest)
		}
	})

	t.Run("tokens are 22-character base64url strings of 128 bits", func(t *testing.T) {
		lk := obtain(t, newFake(), "k")
		token := lk.Token()
		if len(token) != 22 {
			t.Errorf("len(Token()) = %d, want 22", len(token))
		}
		b, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			t.Fatalf("base64.RawURLEncoding.DecodeString(%q) = %v, want nil", token, err)
		}
		if len(b) != 16 {
			t.Errorf("token decodes to %d bytes, want 16", len(b))
		}
	})

	t.Run("tokens are unique across 1000 obtains", func(t *testing.T) {
		f := newFake()
		seen := make(map[string]int, 1000)
		for i := range 1000 {
			lk := obtain(t, f, fmt.Sprintf("k%d", i))
			if j, dup := seen[lk.Token()]; dup {
				t.Fatalf("Obtain %d returned the token of Obtain %d", i, j)
			}
			seen[lk.Token()] = i
		}
	})

	t.Run("a second obtainer of a held key gets ErrNotObtained", func(t *testing.T) {
		f := newFake()
		first := obtain(t, f, "k")
		second, err := lock.New(f).Obtain(context.Background(), "k", time.Minute)
		if second != nil || !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("second Obtain = %v, %v, want nil and an error matching ErrNotObtained", second, err)
		}
		if _, err := first.TTL(context.Background()); err != nil {
			t.Errorf("first.TTL = %v, want nil: the failed obtainer must not disturb the holder", err)
		}
	})
}

func TestLock(t *testing.T) {
	ctx := context.Background()

	t.Run("a nil *Lock is not held", func(t *testing.T) {
		var lk *lock.Lock
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("(*Lock)(nil).Release = %v, want an error matching ErrNotHeld", err)
		}
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("(*Lock)(nil).Refresh = %v, want an error matching ErrNotHeld", err)
		}
		if ttl, err := lk.TTL(ctx); ttl != 0 || !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("(*Lock)(nil).TTL = %v, %v, want 0 and an error matching ErrNotHeld", ttl, err)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("(*Lock)(nil).ValidUntil() = %v, want the zero time", got)
		}
		if got := lk.String(); got != "lock <nil>" {
			t.Errorf("(*Lock)(nil).String() = %q, want %q", got, "lock <nil>")
		}
		if lk.Key() != "" || lk.Token() != "" || lk.Metadata() != "" {
			t.Errorf("(*Lock)(nil) Key, Token, Metadata = %q, %q, %q; want empty", lk.Key(), lk.Token(), lk.Metadata())
		}
	})

	t.Run("Key returns the locked key", func(t *testing.T) {
		lk := obtain(t, newFake(), "orders:42")
		if lk.Key() != "orders:42" {
			t.Errorf("Key() = %q, want %q", lk.Key(), "orders:42")
		}
	})

	t.Run("formatting a Lock never reveals the token", func(t *testing.T) {
		const metadata = "meta"
		lk := obtain(t, newFake(), "secret-test", lock.WithMetadata(metadata))
		token := lk.Token()
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%t", "%x"} {
			got := fmt.Sprintf(verb, lk)
			if strings.Contains(got, token) {
				t.Errorf("fmt.Sprintf(%q, lock) = %q, want no token", verb, got)
			}
			if !strings.Contains(got, "secret-test") {
				t.Errorf("fmt.Sprintf(%q, lock) = %q, want the key", verb, got)
			}
		}
		for _, verb := range []string{"%v", "%+v", "%#v"} {
			holder := struct{ Lock *lock.Lock }{lk}
			if got := fmt.Sprintf(verb, holder); strings.Contains(got, token) {
				t.Errorf("fmt.Sprintf(%q, struct holding the lock) = %q, want no token", verb, got)
			}
		}
	})

	t.Run("logging a Lock with slog records the key and never the token", func(t *testing.T) {
		lk := obtain(t, newFake(), "secret-test")
		for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
			"JSON": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
			"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		} {
			var buf bytes.Buffer
			slog.New(newHandler(&buf)).Info("obtained", "lock", lk, slog.Any("again", lk))
			got := buf.String()
			if strings.Contains(got, lk.Token()) {
				t.Errorf("slog %s handler logged %q, want no token", name, got)
			}
			if !strings.Contains(got, "secret-test") {
				t.Errorf("slog %s handler logged %q, want the key", name, got)
			}
		}
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("obtained", "lock", lk)
		if want := `"lock":{"key":"secret-test"}`; !strings.Contains(buf.String(), want) {
			t.Errorf("slog JSON handler logged %q, want it to contain %s", buf.String(), want)
		}
	})

	t.Run("errors never reveal the token", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.refreshErr, f.ttlErr, f.releaseErr = errBoom, errBoom, errBoom
		_, ttlErr := lk.TTL(ctx)
		for _, err := range []error{lk.Refresh(ctx, time.Minute), ttlErr, lk.Release(ctx)} {
			if err == nil || strings.Contains(err.Error(), lk.Token()) {
				t.Errorf("error = %v, want a non-nil error without the token", err)
			}
		}
	})

	t.Run("Release frees the key and zeroes ValidUntil", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() after Release = %v, want the zero time", got)
		}
		if _, err := lock.New(f).Obtain(ctx, "k", time.Minute); err != nil {
			t.Errorf("Obtain after Release = %v, want a lock", err)
		}
	})

	t.Run("Refresh of a released lock returns ErrNotHeld without calling the strategy", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Refresh after Release = %v, want an error matching ErrNotHeld", err)
		}
		if got := len(f.callsTo("refresh")); got != 0 {
			t.Errorf("Refresh after Release called the strategy %d times, want 0", got)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() after Refresh of a released lock = %v, want the zero time", got)
		}
	})

	t.Run("Release and TTL of a released lock return ErrNotHeld without calling the strategy", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("second Release = %v, want an error matching ErrNotHeld", err)
		}
		if _, err := lk.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("TTL after Release = %v, want an error matching ErrNotHeld", err)
		}
		if got := len(f.callsTo("release")); got != 1 {
			t.Errorf("the strategy's Release was called %d times, want 1", got)
		}
		if got := len(f.callsTo("ttl")); got != 0 {
			t.Errorf("the strategy's TTL was called %d times, want 0", got)
		}
	})

	t.Run("a lock whose key is gone reports ErrExpired and zeroes ValidUntil", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.drop("k")
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Refresh of an expired lock = %v, want an error matching ErrExpired", err)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() after Refresh found the lock gone = %v, want the zero time", got)
		}
		if _, err := lk.TTL(ctx); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("TTL of an expired lock = %v, want an error matching ErrExpired", err)
		}
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Release of an expired lock = %v, want an error matching ErrExpired", err)
		}
	})

	t.Run("a lock taken by another owner reports ErrTaken and deletes nothing", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.hold("k", "another owner")
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrTaken) || !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Release of a taken lock = %v, want an error matching ErrTaken and ErrNotHeld", err)
		}
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Refresh of a taken lock = %v, want an error matching ErrTaken", err)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() of a taken lock = %v, want the zero time", got)
		}
		if _, err := lock.New(f).Obtain(ctx, "k", time.Minute); !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain after the other owner took the key = %v, want ErrNotObtained: its lock must survive", err)
		}
	})

	t.Run("strategy errors from Refresh, TTL and Release are wrapped with the operation", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.refreshErr, f.ttlErr, f.releaseErr = errBoom, errBoom, errBoom
		_, ttlErr := lk.TTL(ctx)
		for op, err := range map[string]error{
			"refresh": lk.Refresh(ctx, time.Minute),
			"ttl":     ttlErr,
			"release": lk.Release(ctx),
		} {
			if !errors.Is(err, errBoom) {
				t.Errorf("%s = %v, want an error matching errBoom", op, err)
				continue
			}
			if errors.Is(err, lock.ErrNotHeld) {
				t.Errorf("%s = %v, which matches ErrNotHeld, want it not to", op, err)
			}
			if !strings.Contains(err.Error(), op) {
				t.Errorf("%s error = %q, want it to name the operation", op, err)
			}
		}
		if got := lk.ValidUntil(); got.IsZero() {
			t.Error("ValidUntil() after transport errors is the zero time, want it kept: the lock may still be ours")
		}
	})

	t.Run("Refresh with a ttl below a millisecond is an *ArgumentError and calls no strategy", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		err := lk.Refresh(ctx, time.Microsecond)
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "ttl" {
			t.Errorf("Refresh(1µs) = %v, want an *ArgumentError named ttl", err)
		}
		if got := len(f.callsTo("refresh")); got != 0 {
			t.Errorf("Refresh(1µs) called the strategy %d times, want 0", got)
		}
	})

	t.Run("TTL reports the strategy's remaining time", func(t *testing.T) {
		lk := obtain(t, newFake(), "k")
		ttl, err := lk.TTL(ctx)
		if err != nil || ttl <= 0 || ttl > time.Minute {
			t.Errorf("TTL = %v, %v, want a duration in (0, 1m] and nil", ttl, err)
		}
	})

	t.Run("a Lock's methods are safe for concurrent use", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					_ = lk.Refresh(ctx, time.Minute)
					_, _ = lk.TTL(ctx)
					_ = lk.ValidUntil()
					_ = lk.String()
				}
			}()
		}
		wg.Add(1)
		var releaseErr error
		go func() {
			defer wg.Done()
			releaseErr = lk.Release(ctx)
		}()
		wg.Wait()
		if releaseErr != nil {
			t.Errorf("Release = %v, want nil", releaseErr)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() after Release = %v, want the zero time", got)
		}
		if got := len(f.callsTo("release")); got != 1 {
			t.Errorf("the strategy's Release was called %d times, want 1", got)
		}
	})
}

// deadlineStrategy fails every attempt with the driver's own timeout error
// once the deadline has passed, before ctx's timer has fired.
type deadlineStrategy struct{ fakeStrategy }

func (d *deadlineStrategy) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	dl, _ := ctx.Deadline()
	time.Sleep(time.Until(dl))
	return strategy.Grant{Undone: true}, errors.New("write tcp: i/o timeout")
}

func TestDeadlineReportedByTheDriver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := lock.New(&deadlineStrategy{}).Obtain(ctx, "k", time.Minute)
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Obtain whose attempt hit the deadline = %v, want ErrNotObtained and context.DeadlineExceeded", err)
	}
}

// lostRefresh is a fakeStrategy that replaces the value on refresh, and
// whose next Refresh, once lose is set, loses its reply: after its write
// when landed is set, before it otherwise. Either way it reports the value
// it tried to write, as Strategy asks.
type lostRefresh struct {
	*fakeStrategy
	lose, landed bool
}

func (s *lostRefresh) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	if !s.lose {
		return s.fakeStrategy.Refresh(ctx, key, value, ttl)
	}
	s.lose = false
	if s.landed {
		if _, err := s.fakeStrategy.Refresh(ctx, key, value, ttl); err != nil {
			return strategy.Grant{}, err
		}
	}
	return s.refreshGrant, context.DeadlineExceeded
}

// stored returns the value key holds, or "" when it is gone.
func (f *fakeStrategy) stored(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.entries[key].value
}

// TestLostRefreshReply: a refresh that may have replaced the value without
// an answer leaves the lock usable under whichever value the key holds, and
// never under another owner's.
func TestLostRefreshReply(t *testing.T) {
	ctx := context.Background()
	// setup obtains "k" and runs a refresh whose reply is lost; it returns
	// the lock, the value it was obtained under, and the strategy.
	setup := func(t *testing.T, landed bool) (*lock.Lock, string, *lostRefresh) {
		t.Helper()
		s := &lostRefresh{fakeStrategy: newFake(), landed: landed}
		s.refreshGrant = strategy.Grant{Value: "next"}
		lk, err := lock.New(s).Obtain(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		first := lk.Token()
		s.lose = true
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Refresh with its reply lost = %v, want context.DeadlineExceeded", err)
		}
		return lk, first, s
	}

	t.Run("a later Refresh finds the value it wrote", func(t *testing.T) {
		lk, first, s := setup(t, true)
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		if got, want := values(s.callsTo("refresh")), []string{first, first, "next"}; !equal(got, want) {
			t.Errorf("refreshes sent with %q, want %q", got, want)
		}
		if lk.Token() != "next" {
			t.Errorf("Token is the value the lost refresh wrote = false, want true")
		}
		if err := lk.Release(ctx); err != nil || s.stored("k") != "" {
			t.Errorf("Release = %v, key left = %t; want nil, false", err, s.stored("k") != "")
		}
	})

	t.Run("Release deletes the value it wrote", func(t *testing.T) {
		lk, _, s := setup(t, true)
		if err := lk.Release(ctx); err != nil || s.stored("k") != "" {
			t.Errorf("Release = %v, key left = %t; want nil, false", err, s.stored("k") != "")
		}
	})

	t.Run("TTL finds the value it wrote", func(t *testing.T) {
		lk, _, _ := setup(t, true)
		if _, err := lk.TTL(ctx); err != nil {
			t.Errorf("TTL = %v, want nil", err)
		}
	})

	t.Run("an answer with the held value settles it", func(t *testing.T) {
		lk, first, s := setup(t, false)
		if _, err := lk.TTL(ctx); err != nil {
			t.Fatalf("TTL = %v, want nil", err)
		}
		s.hold("k", "next") // another owner, after ours expired, with the same value
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Release = %v, want ErrTaken", err)
		}
		if got, want := values(s.callsTo("release")), []string{first}; !equal(got, want) {
			t.Errorf("releases sent with %q, want %q", got, want)
		}
		if s.stored("k") != "next" {
			t.Errorf("the other owner's key was deleted")
		}
	})

	t.Run("another owner's value is not adopted", func(t *testing.T) {
		lk, _, s := setup(t, false)
		s.hold("k", "other")
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Refresh = %v, want ErrTaken", err)
		}
		if err := lk.Err(); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Err = %v, want ErrTaken", err)
		}
		if s.stored("k") != "other" {
			t.Errorf("the other owner's key = %q, want %q", s.stored("k"), "other")
		}
	})
}
