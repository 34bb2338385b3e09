package lock_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

func TestObtainValidation(t *testing.T) {
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

	t.Run("a token of 22 base64url characters is accepted", func(t *testing.T) {
		token := strings.Repeat("t", 22)
		lk := obtain(t, newFake(), "k", lock.WithToken(token))
		if lk.Token() != token {
			t.Errorf("Token() = %q, want %q", lk.Token(), token)
		}
	})
}

func TestObtainRetry(t *testing.T) {
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
}

func TestObtainContext(t *testing.T) {
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
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond) // long enough for the first attempt, on a loaded machine
		defer cancel()
		_, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.Linear(time.Hour)))
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Obtain = %v, want an error matching ErrNotObtained and context.DeadlineExceeded", err)
		}
	})

	t.Run("a context already done gives the context's error, and sends nothing", func(t *testing.T) {
		f := newFake()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		lk, err := lock.New(f).Obtain(ctx, "k", time.Minute)
		if lk != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("Obtain on a cancelled context = %v, %v, want nil and an error matching context.Canceled", lk, err)
		}
		for _, target := range []error{lock.ErrNotObtained, lock.ErrNoAnswer} {
			if errors.Is(err, target) {
				t.Errorf("errors.Is(%v, %v) = true, want false: no attempt was made", err, target)
			}
		}
		if got := len(f.callsTo("acquire")); got != 0 {
			t.Errorf("Obtain on a cancelled context made %d attempts, want 0", got)
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
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond) // long enough to begin the attempt, on a loaded machine
	defer cancel()
	_, err := lock.New(&deadlineStrategy{}).Obtain(ctx, "k", time.Minute)
	if !errors.Is(err, lock.ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Obtain whose attempt hit the deadline = %v, want ErrNoAnswer and context.DeadlineExceeded", err)
	}
	if errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("errors.Is(%v, ErrNotObtained) = true, want false: no attempt found the lock held", err)
	}
}

func TestObtainStrategyErrors(t *testing.T) {
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
}

func TestObtainCleanup(t *testing.T) {
	t.Run("after a strategy error the attempted value is released", func(t *testing.T) {
		f := newFake()
		f.acquireErr = errBoom
		_, _ = lock.New(f).Obtain(context.Background(), "k", time.Minute)
		acquired, released := f.callsTo("acquire"), f.callsTo("release")
		if len(acquired) != 1 {
			t.Fatalf("Obtain made %d attempts, want 1", len(acquired))
		}
		if want := values([]fakeCall{acquired[0], acquired[0]}); !equal(values(released), want) {
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
			t.Errorf("Release calls after an error with Grant.Undone = %d, want 0", got)
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

	t.Run("the clean-up runs on a live, bounded context after the caller's is cancelled", func(t *testing.T) {
		f := newFake()
		f.acquireErr = context.Canceled
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f.onAcquire = func(context.Context) { cancel() } // the reply is lost as the caller gives up
		_, err := lock.New(f).Obtain(ctx, "k", time.Minute)
		if !errors.Is(err, lock.ErrNoAnswer) || !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain = %v, want an error matching ErrNoAnswer and context.Canceled, not ErrNotObtained", err)
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
}

func TestObtainTokens(t *testing.T) {
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

	t.Run("the value passed to the strategy is the token, a stamp and the metadata", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k", lock.WithMetadata("m"))
		got := f.callsTo("acquire")[0].value
		if rest, ok := strings.CutPrefix(got, lk.Token()); !ok || !stampPattern.MatchString(rest) || !strings.HasSuffix(rest, "\x1em") {
			t.Errorf("Acquire value = %q, want the token, a stamp (\\x1e<milliseconds>\\x1e) and \"m\"", got)
		}
	})

	t.Run("a chosen token's value has no stamp, so that it is the same in every process", func(t *testing.T) {
		f := newFake()
		const token = "caller-chosen-token-01"
		obtain(t, f, "k", lock.WithToken(token), lock.WithMetadata("m"))
		if got := f.callsTo("acquire")[0].value; got != token+"m" {
			t.Errorf("Acquire value = %q, want %q", got, token+"m")
		}
	})

	t.Run("the value passed to the strategy is token plus metadata, past the stamp", func(t *testing.T) {
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
}

// TestCloseRefusesCalls: after Close, Obtain, ObtainMany, Inspect and Break
// return an error matching ErrClosed and send nothing, on the Locker and on
// one derived from it with With; a second Close returns nil.
func TestCloseRefusesCalls(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	l := lock.New(f)
	derived := l.With(lock.WithTTL(time.Minute))
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	for _, l := range []*lock.Locker{l, derived} {
		calls := map[string]error{}
		_, calls["Obtain"] = l.Obtain(ctx, "k", time.Minute)
		_, calls["ObtainMany"] = l.ObtainMany(ctx, []string{"a", "b"}, time.Minute)
		_, calls["Inspect"] = l.Inspect(ctx, "k")
		for name, err := range calls {
			if !errors.Is(err, lock.ErrClosed) {
				t.Errorf("%s after Close = %v, want an error matching ErrClosed", name, err)
			}
		}
	}
	if n := len(f.calls); n != 0 {
		t.Errorf("calls to the strategy after Close = %d, want 0", n)
	}
	if err := derived.Close(); err != nil {
		t.Errorf("a second Close = %v, want nil", err)
	}
}
