package lock_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// queued is a fakeStrategy whose Inspect reports waiters, or fails.
type queued struct {
	*fakeStrategy
	waiters int
	err     error
}

func (q *queued) Inspect(ctx context.Context, key string) (strategy.State, error) {
	st, err := q.fakeStrategy.Inspect(ctx, key)
	st.Waiters = q.waiters
	if q.err != nil {
		return strategy.State{}, q.err
	}
	return st, err
}

// knowing is a fakeStrategy that returns the holder with each refusal
// (Grant.Holder), as a strategy that reads it in the same round trip does.
type knowing struct{ *fakeStrategy }

func (k knowing) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	g, err := k.fakeStrategy.Acquire(ctx, r)
	if errors.Is(err, strategy.ErrNotObtained) {
		g.Holder = &strategy.State{Held: true, TTL: time.Minute, Fingerprint: "0123456789abcdef", Metadata: "web-4", Waiters: 2}
	}
	return g, err
}

// heldBy obtains key on f for a minute with opts, as another process would.
func heldBy(t *testing.T, f strategy.Strategy, key string, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := lock.New(f).Obtain(context.Background(), key, time.Minute, opts...)
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	return lk
}

// refusedBy returns the error of an Obtain of key on s that tries once.
func refusedBy(t *testing.T, s strategy.Strategy, key string) (*lock.NotObtainedError, error) {
	t.Helper()
	_, err := lock.New(s).Obtain(context.Background(), key, time.Minute, lock.WithRetry(lock.NoRetry()))
	var held *lock.NotObtainedError
	if !errors.As(err, &held) || !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Obtain of a held lock = %v, want a *lock.NotObtainedError matching ErrNotObtained", err)
	}
	return held, err
}

// observing is an Attempt hook that only passes the attempt on: with one
// set, an Obtain reads each holder it meets, for the hook to see.
var observing = lock.WithHooks(&lock.Hooks{Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error { return next(ctx) }})

func TestNotObtainedError(t *testing.T) {
	t.Run("names the key, the holder's metadata, its hold and the waiters", func(t *testing.T) {
		q := &queued{fakeStrategy: newFake(), waiters: 4}
		holder := heldBy(t, q, "report:daily", lock.WithMetadata("web-3 pid=4121"))
		held, err := refusedBy(t, q, "report:daily")
		want := regexp.MustCompile(`^lock: not obtained: "report:daily" held by web-3 pid=4121 for [0-9.]+m?s \(4 waiting\)$`)
		if !want.MatchString(err.Error()) {
			t.Errorf("error = %q, want it to match %q", err, want)
		}
		h := held.Holder
		if h.Fingerprint != strategy.Fingerprint(holder.Token()) || h.Metadata != "web-3 pid=4121" || h.HeldFor <= 0 || h.TTL <= 0 || h.Waiters != 4 {
			t.Errorf("Holder = %+v, want the holder's fingerprint, its metadata, a positive HeldFor and TTL, and 4 waiters", h)
		}
	})

	t.Run("names a holder without metadata by its fingerprint", func(t *testing.T) {
		f := newFake()
		holder := heldBy(t, f, "k")
		_, err := refusedBy(t, f, "k")
		if want := "held by holder " + strategy.Fingerprint(holder.Token()) + " for "; !strings.Contains(err.Error(), want) {
			t.Errorf("error = %q, want it to contain %q", err, want)
		}
	})

	t.Run("quotes metadata that is not printable", func(t *testing.T) {
		f := newFake()
		heldBy(t, f, "k", lock.WithMetadata("web-3\nrm -rf"))
		if _, err := refusedBy(t, f, "k"); !strings.Contains(err.Error(), `held by "web-3\nrm -rf" for `) {
			t.Errorf("error = %q, want the metadata quoted", err)
		}
	})

	t.Run("says another owner when the holder cannot be read", func(t *testing.T) {
		q := &queued{fakeStrategy: newFake(), err: errors.New("NOPERM")}
		heldBy(t, q, "k")
		held, err := refusedBy(t, q, "k")
		if got, want := err.Error(), `lock: not obtained: "k" held by another owner`; got != want {
			t.Errorf("error = %q, want %q", got, want)
		}
		if held.Holder.Held {
			t.Errorf("Holder.Held = true, want false: the read failed")
		}
	})

	t.Run("names the head of the queue when the lock was passed on to it", func(t *testing.T) {
		q := &queued{fakeStrategy: newFake(), waiters: 2}
		heldBy(t, q, "k")
		q.drop("k") // released, and promised to the head of its queue
		q.fakeStrategy.acquireErr = lock.ErrNotObtained
		if _, err := refusedBy(t, q, "k"); err.Error() != `lock: not obtained: "k" held by the next of 2 waiting` {
			t.Errorf("error = %q, want the head of the queue named", err)
		}
	})

	t.Run("names the first three keys of a lock of several, and the one held", func(t *testing.T) {
		f := newFake()
		heldBy(t, f, "d", lock.WithMetadata("web-3"))
		_, err := lock.New(f).ObtainMany(context.Background(), []string{"a", "b", "c", "d", "e"}, time.Minute, lock.WithRetry(lock.NoRetry()))
		var held *lock.NotObtainedError
		if !errors.As(err, &held) || held.Key != "d" || len(held.Keys) != 5 {
			t.Fatalf("ObtainMany = %v, want a *lock.NotObtainedError for key d of 5", err)
		}
		if want := `lock: not obtained: "a", "b", "c" and 2 more: "d" held by web-3 for `; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error = %q, want it to start with %q", err, want)
		}
	})

	t.Run("matches the context's error too when the context ended the wait, naming the holder an Attempt hook made it read", func(t *testing.T) {
		f := newFake()
		heldBy(t, f, "k", lock.WithMetadata("web-3"))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.Linear(time.Millisecond)), observing)
		var held *lock.NotObtainedError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lock.ErrNotObtained) || !errors.As(err, &held) {
			t.Fatalf("Obtain = %v, want an error matching DeadlineExceeded, ErrNotObtained and *lock.NotObtainedError", err)
		}
		if !strings.HasPrefix(err.Error(), `lock: not obtained: "k" held by web-3 for `) || !strings.HasSuffix(err.Error(), ": context deadline exceeded") {
			t.Errorf("error = %q, want the holder, then the context's error", err)
		}
	})

	t.Run("with an Attempt hook, a waiter reads a holder once while its lease lasts", func(t *testing.T) {
		f := newFake()
		heldBy(t, f, "k")
		_, _ = lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 5)), observing)
		if got := len(f.callsTo("inspect")); got != 1 {
			t.Errorf("reads of the holder over 5 refused attempts = %d, want 1", got)
		}
	})

	t.Run("a holder that the strategy returned with the refusal is named, and costs no read", func(t *testing.T) {
		f := newFake()
		heldBy(t, f, "k")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := lock.New(knowing{f}).Obtain(ctx, "k", time.Minute, lock.WithRetry(lock.Linear(time.Millisecond)), observing)
		if want := `lock: not obtained: "k" held by web-4 (2 waiting): context deadline exceeded`; err == nil || err.Error() != want {
			t.Errorf("Obtain = %v, want %q", err, want)
		}
		if got := len(f.callsTo("inspect")); got != 0 {
			t.Errorf("reads of a holder that each refusal returned = %d, want 0", got)
		}
	})

	t.Run("without an Attempt hook, a waiter reads the holder only when it gives up", func(t *testing.T) {
		f := newFake()
		holder := heldBy(t, f, "k")
		time.AfterFunc(20*time.Millisecond, func() { _ = holder.Release(context.Background()) })
		if _, err := lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.Linear(time.Millisecond))); err != nil {
			t.Fatalf("Obtain = %v, want the lock once released", err)
		}
		if got := len(f.callsTo("inspect")); got != 0 {
			t.Errorf("reads of the holder by a waiter that obtained the lock = %d, want 0", got)
		}
		_, _ = lock.New(f).Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 3)))
		if got := len(f.callsTo("inspect")); got != 1 {
			t.Errorf("reads of the holder by a waiter that gave up after 3 attempts = %d, want 1, for its error", got)
		}
	})
}

func TestStamp(t *testing.T) {
	ctx := context.Background()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
	tracing := func(trace string) lock.Option {
		return lock.WithHooks(&lock.Hooks{Trace: func(context.Context) string { return trace }})
	}

	t.Run("Inspect reads how long the holder has held the lock, and its trace", func(t *testing.T) {
		f := newFake()
		before := time.Now()
		heldBy(t, f, "k", lock.WithMetadata("m"), tracing(trace))
		st, err := lock.New(f).Inspect(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if held := time.Since(before) + time.Millisecond; st.Metadata != "m" || st.Trace != trace || st.HeldFor <= 0 || st.HeldFor > held {
			t.Errorf("State: Metadata %q, Trace %q, HeldFor %v; want %q, %q, in (0, %v]", st.Metadata, st.Trace, st.HeldFor, "m", trace, held)
		}
	})

	t.Run("a trace that is not 32 and 16 lower-case hexadecimal digits is not stored", func(t *testing.T) {
		for _, bad := range []string{"x", strings.ToUpper(trace), strings.Replace(trace, "-", "_", 1), "00000000000000000000000000000000-00f067aa0ba902b7"} {
			f := newFake()
			heldBy(t, f, "k", tracing(bad))
			if st, _ := lock.New(f).Inspect(ctx, "k"); st.Trace != "" || st.Metadata != "" {
				t.Errorf("Trace hook returning %q: State Trace %q, Metadata %q; want both empty", bad, st.Trace, st.Metadata)
			}
		}
	})

	t.Run("a value without a stamp reads as metadata alone", func(t *testing.T) {
		f := newFake()
		token, _ := lock.NewToken()
		f.hold("k", token+"\x1e12x\x1ehost")
		if st, _ := lock.New(f).Inspect(ctx, "k"); st.Metadata != "\x1e12x\x1ehost" || st.HeldFor != 0 {
			t.Errorf("State: Metadata %q, HeldFor %v; want the value's whole metadata, 0", st.Metadata, st.HeldFor)
		}
	})

	t.Run("metadata that starts with 0x1e is refused", func(t *testing.T) {
		_, err := lock.New(newFake()).Obtain(ctx, "k", time.Minute, lock.WithMetadata("\x1e1\x1e"))
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "metadata" {
			t.Errorf("Obtain = %v, want an *ArgumentError named metadata", err)
		}
	})
}
