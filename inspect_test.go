package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/strategy"
)

// inspectFake is a multi-node fakeStrategy whose Inspect reports two nodes
// and returns st and err.
type inspectFake struct {
	*fakeStrategy
	st  strategy.State
	err error
}

func (f inspectFake) ReportsNodes() bool { return true }

func (f inspectFake) Inspect(ctx context.Context, key string) (strategy.State, error) {
	strategy.ReportNode(ctx, "n1", "ok", nil)
	strategy.ReportNode(ctx, "n2", "timeout", context.DeadlineExceeded)
	return f.st, f.err
}

func TestInspect(t *testing.T) {
	ctx := context.Background()

	t.Run("a free key", func(t *testing.T) {
		st, err := lock.New(newFake()).Inspect(ctx, "k")
		if err != nil || st.Held || st.Verdict != "free" {
			t.Errorf("Inspect = %+v, %v; want free, nil", st, err)
		}
	})

	t.Run("a held lock", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k", lock.WithMetadata("host=web-3"))
		st, err := lock.New(f).Inspect(ctx, "k")
		if err != nil || !st.Held || st.Metadata != "host=web-3" || st.Fingerprint != strategy.Fingerprint(lk.Token()) {
			t.Errorf("Inspect = %+v, %v; want held, with the holder's fingerprint and metadata", st, err)
		}
		if st.TTL <= 0 || st.TTL > time.Minute {
			t.Errorf("TTL = %v, want in (0, 1m]", st.TTL)
		}
	})

	t.Run("an empty key", func(t *testing.T) {
		f := newFake()
		var ae *lock.ArgumentError
		if _, err := lock.New(f).Inspect(ctx, ""); !errors.As(err, &ae) || ae.Name != "key" {
			t.Errorf("Inspect of an empty key = %v, want an *ArgumentError named key", err)
		}
		if len(f.calls) != 0 {
			t.Errorf("strategy calls = %d, want 0", len(f.calls))
		}
	})

	t.Run("a nil option", func(t *testing.T) {
		var ae *lock.ArgumentError
		if _, err := lock.New(newFake()).Inspect(ctx, "k", nil); !errors.As(err, &ae) || ae.Name != "option" {
			t.Errorf("Inspect with a nil option = %v, want an *ArgumentError named option", err)
		}
	})

	t.Run("an error comes with what was read", func(t *testing.T) {
		cause := errors.New("no quorum")
		f := inspectFake{fakeStrategy: newFake(), st: strategy.State{Verdict: "unknown", Nodes: make([]strategy.NodeState, 2)}, err: cause}
		st, err := lock.New(f).Inspect(ctx, "k")
		if !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), `lock: inspect "k": `) {
			t.Errorf("Inspect = %v, want the strategy's error wrapped with the operation and key", err)
		}
		if st.Verdict != "unknown" || len(st.Nodes) != 2 {
			t.Errorf("State = %+v, want the one the strategy read", st)
		}
	})

	t.Run("the hooks wrap it and see each node", func(t *testing.T) {
		var tr trail
		var events []lock.Event
		h := recorder(&tr, "a")
		op := h.Op
		h.Op = func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			events = append(events, e)
			return op(ctx, e, next)
		}
		f := inspectFake{fakeStrategy: newFake()}
		if _, err := lock.New(f).Inspect(ctx, "k", lock.WithHooks(h), lock.WithRetry(lock.NoRetry())); err != nil {
			t.Fatal(err)
		}
		if got, want := tr.String(), "a:inspect( a:node:n1=ok a:node:n2=timeout )a"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if e := events[0]; e.Key != "k" || e.Lock != nil || e.TTL != 0 {
			t.Errorf("Event = %+v, want key k, no lock, no TTL", e)
		}
	})

	t.Run("the Locker's default hooks apply", func(t *testing.T) {
		var tr trail
		if _, err := lock.New(newFake(), lock.WithHooks(recorder(&tr, "d"))).Inspect(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if got, want := tr.String(), "d:inspect( )d"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

// TestBreakArguments: Break refuses an empty key before the strategy is
// called, and a strategy that cannot break locks with an error matching
// errors.ErrUnsupported, which names the operation and the key.
func TestBreakArguments(t *testing.T) {
	ctx := context.Background()
	t.Run("an empty key", func(t *testing.T) {
		f := newFake()
		var ae *lock.ArgumentError
		if _, err := lock.New(f).Break(ctx, "", ""); !errors.As(err, &ae) || ae.Name != "key" {
			t.Errorf("Break of an empty key: got %v, want an *ArgumentError named key", err)
		}
		if len(f.calls) != 0 {
			t.Errorf("strategy calls: got %d, want 0", len(f.calls))
		}
	})
	t.Run("a strategy that cannot break", func(t *testing.T) {
		_, err := lock.New(newFake()).Break(ctx, "k", "")
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), `break "k"`) {
			t.Errorf("Break: got %v, want errors.ErrUnsupported, naming break and the key", err)
		}
	})
}

// TestBreakFingerprint: against a real server, on every strategy, Break
// refuses a fingerprint that is not 16 hexadecimal digits with an
// *ArgumentError named fingerprint, before anything is sent (the Op hooks
// never run) and without quoting it (it may be a token); the lock stays
// held. A fingerprint in upper case is the same fingerprint.
func TestBreakFingerprint(t *testing.T) {
	ctx := context.Background()
	for _, c := range matrix.EachStrategy(t) {
		t.Run(c.Name, func(t *testing.T) {
			l := c.Harness.NewLocker(t)
			for _, bad := range []struct {
				name        string
				fingerprint func(lk *lock.Lock) string
			}{
				{"too short", func(*lock.Lock) string { return "xyz" }},
				{"16 characters, not all hexadecimal", func(*lock.Lock) string { return "0123456789abcdeg" }},
				{"the holder's token", (*lock.Lock).Token},
				{"17 hexadecimal digits", func(lk *lock.Lock) string { return strategy.Fingerprint(lk.Token()) + "0" }},
			} {
				t.Run(bad.name, func(t *testing.T) {
					key := conformance.Key(t)
					lk, err := l.Obtain(ctx, key, time.Minute)
					if err != nil {
						t.Fatalf("Obtain: got %v, want a lock", err)
					}
					defer lk.Release(ctx)
					ops := 0
					count := &lock.Hooks{Op: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
						ops++
						return next(ctx)
					}}
					fingerprint := bad.fingerprint(lk)
					_, err = l.Break(ctx, key, fingerprint, lock.WithHooks(count))
					var ae *lock.ArgumentError
					if !errors.As(err, &ae) || ae.Name != "fingerprint" {
						t.Fatalf("Break: got %v, want an *ArgumentError named fingerprint", err)
					}
					if strings.Contains(err.Error(), fingerprint) {
						t.Errorf("Break: got %q, want an error that does not quote the fingerprint", err)
					}
					if ops != 0 {
						t.Errorf("Op hooks run: got %d, want 0: nothing is sent", ops)
					}
					if st, err := l.Inspect(ctx, key); err != nil || !st.Held || st.Fingerprint != strategy.Fingerprint(lk.Token()) {
						t.Errorf("Inspect after Break: got %+v, %v; want the lock still held by its holder", st, err)
					}
				})
			}
			t.Run("upper case", func(t *testing.T) {
				key := conformance.Key(t)
				lk, err := l.Obtain(ctx, key, time.Minute)
				if err != nil {
					t.Fatalf("Obtain: got %v, want a lock", err)
				}
				if _, err := l.Break(ctx, key, strings.ToUpper(strategy.Fingerprint(lk.Token()))); err != nil {
					t.Fatalf("Break by the fingerprint in upper case: got %v, want nil", err)
				}
				if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrExpired) {
					t.Errorf("Refresh after Break: got %v, want ErrExpired", err)
				}
			})
		})
	}
}
