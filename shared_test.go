package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// fakeSharer is a strategy.Sharer over a fakeStrategy: its shared locks go
// to a fakeStrategy of their own (a writer's, a fakeWriter), and it records
// what it was asked for.
type fakeSharer struct {
	*fakeStrategy
	shared *fakeStrategy
	asked  []strategy.Sharing
	refuse error // returned by Shared when set
}

func (s *fakeSharer) Shared(sh strategy.Sharing) (strategy.SharedStrategy, error) {
	s.asked = append(s.asked, sh)
	switch {
	case s.refuse != nil:
		return nil, s.refuse
	case sh.Write:
		return fakeWriter{fakeShared{s.shared, sh}}, nil
	}
	return fakeShared{s.shared, sh}, nil
}

// fakeShared is a fakeStrategy that obtains the shared locks sh.
type fakeShared struct {
	*fakeStrategy
	sh strategy.Sharing
}

func (s fakeShared) Sharing() strategy.Sharing { return s.sh }

// fakeWriter is a read-write lock's write side: a strategy.Downgrader that
// records its Downgrades, and fails them with the fake's releaseErr.
type fakeWriter struct{ fakeShared }

func (w fakeWriter) Downgrade(ctx context.Context, key, value string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.record(ctx, "downgrade", key, value)
	return w.releaseErr
}

func newSharer() *fakeSharer { return &fakeSharer{fakeStrategy: newFake(), shared: newFake()} }

// TestSharedObtain: an Obtain WithPermits, WithRead or WithWrite asks the
// strategy's Sharer for the Strategy of that shape, and the lock's
// Acquire, TTL, Refresh and Release go to it alone; Permit reports the
// permit it granted.
func TestSharedObtain(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		opt     lock.Option
		want    strategy.Sharing
		permits int    // the events'
		side    string // the events'
	}{
		{"WithPermits", lock.WithPermits(3), strategy.Sharing{Permits: 3}, 3, ""},
		{"WithRead", lock.WithRead(), strategy.Sharing{Read: true}, 0, "read"},
		{"WithWrite", lock.WithWrite(), strategy.Sharing{Write: true}, 0, "write"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSharer()
			s.shared.grant = strategy.Grant{Permit: 3}
			var events []lock.Event
			hooks := lock.WithHooks(&lock.Hooks{Ended: func(e lock.Event) { events = append(events, e) },
				Obtain: func(ctx context.Context, e lock.Event, next func(context.Context) (*lock.Lock, error)) (*lock.Lock, error) {
					events = append(events, e)
					return next(ctx)
				}})
			lk, err := lock.New(s).Obtain(ctx, "k", time.Minute, c.opt, hooks)
			if err != nil {
				t.Fatalf("Obtain = %v, want a lock", err)
			}
			defer func() {
				if len(events) != 2 {
					t.Fatalf("events = %d, want the obtain's and the end's", len(events))
				}
				for _, e := range events {
					if e.Permits != c.permits || e.Side != c.side {
						t.Errorf("%s event: Permits %d, Side %q, want %d, %q", e.Op, e.Permits, e.Side, c.permits, c.side)
					}
				}
			}()
			if len(s.asked) != 1 || s.asked[0] != c.want {
				t.Errorf("Shared was asked for %+v, want [%+v]", s.asked, c.want)
			}
			wantPermit, wantOK := 2, true // Grant.Permit 3
			if c.permits == 0 {
				wantPermit, wantOK = 0, false // a read or write lock has no permit
			}
			if p, ok := lk.Permit(); p != wantPermit || ok != wantOK {
				t.Errorf("Permit() = %d, %v, want %d, %v", p, ok, wantPermit, wantOK)
			}
			if _, err := lk.TTL(ctx); err != nil {
				t.Errorf("TTL = %v, want nil", err)
			}
			if err := lk.Refresh(ctx, time.Minute); err != nil {
				t.Errorf("Refresh = %v, want nil", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release = %v, want nil", err)
			}
			if got := len(s.calls); got != 0 {
				t.Errorf("calls to the plain strategy = %d, want 0", got)
			}
			for _, op := range []string{"acquire", "ttl", "refresh", "release"} {
				if got := len(s.shared.callsTo(op)); got != 1 {
					t.Errorf("%s calls to the shared strategy = %d, want 1", op, got)
				}
			}
		})
	}
}

// TestPermitOfAPlainLock: a lock that is no semaphore's has no permit.
func TestPermitOfAPlainLock(t *testing.T) {
	lk, err := lock.New(newFake()).Obtain(context.Background(), "k", time.Minute)
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	if p, ok := lk.Permit(); p != 0 || ok {
		t.Errorf("Permit() = %d, %v, want 0, false", p, ok)
	}
	var nilLock *lock.Lock
	if p, ok := nilLock.Permit(); p != 0 || ok {
		t.Errorf("Permit() of a nil lock = %d, %v, want 0, false", p, ok)
	}
}

// TestSharedRefused: invalid permits, a strategy that is no Sharer, a
// Sharer's refusal and a shared ObtainMany are each an *ArgumentError,
// and nothing is sent.
func TestSharedRefused(t *testing.T) {
	ctx := context.Background()
	refusal := &lock.ArgumentError{Name: "permits", Reason: "not supported by fake, for a reason"}
	for _, c := range []struct {
		name   string
		s      strategy.Strategy
		obtain func(*lock.Locker) error
		want   string // the ArgumentError's Name
		reason string // its Reason, if not ""
	}{
		{"zero permits", newSharer(), obtainWith(lock.WithPermits(0)), "permits", "must be from 1 to 1000 (MaxPermits), got 0"},
		{"negative permits", newSharer(), obtainWith(lock.WithPermits(-1)), "permits", ""},
		{"too many permits", newSharer(), obtainWith(lock.WithPermits(lock.MaxPermits + 1)), "permits", ""},
		{"no Sharer", newFake(), obtainWith(lock.WithPermits(2)), "permits", "semaphores and read-write locks are not supported by *lock_test.fakeStrategy"},
		{"no Sharer, read side", newFake(), obtainWith(lock.WithRead()), "permits", ""},
		{"refused", &fakeSharer{fakeStrategy: newFake(), shared: newFake(), refuse: refusal}, obtainWith(lock.WithWrite()), "permits", refusal.Reason},
		{"several keys", newSharer(), func(l *lock.Locker) error {
			_, err := l.ObtainMany(ctx, []string{"a", "b"}, time.Minute, lock.WithPermits(2))
			return err
		}, "keys", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.obtain(lock.New(c.s))
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != c.want {
				t.Fatalf("got %v, want an *ArgumentError named %s", err, c.want)
			}
			if c.reason != "" && ae.Reason != c.reason {
				t.Errorf("Reason = %q, want %q", ae.Reason, c.reason)
			}
			var calls int
			switch s := c.s.(type) {
			case *fakeSharer:
				calls = len(s.calls) + len(s.shared.calls)
			case *fakeStrategy:
				calls = len(s.calls)
			}
			if calls != 0 {
				t.Errorf("calls to the strategy = %d, want 0", calls)
			}
		})
	}
}

// obtainWith returns an Obtain of "k" with opts.
func obtainWith(opts ...lock.Option) func(*lock.Locker) error {
	return func(l *lock.Locker) error {
		_, err := l.Obtain(context.Background(), "k", time.Minute, opts...)
		return err
	}
}

// TestSharedUnsupported: a strategy that cannot share locks refuses them
// with an *ArgumentError that matches errors.ErrUnsupported; a mistake,
// such as zero permits, does not match it.
func TestSharedUnsupported(t *testing.T) {
	if err := obtainWith(lock.WithRead())(lock.New(newFake())); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("WithRead on a strategy that is no Sharer = %v, want an error matching errors.ErrUnsupported", err)
	}
	if err := obtainWith(lock.WithPermits(0))(lock.New(newSharer())); errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("WithPermits(0) = %v, want an error that does not match errors.ErrUnsupported", err)
	}
}

// TestSharedShapesConflict: two options that ask for different shapes are
// refused with an *ArgumentError naming both, whether both are the call's
// or one is a Locker's default, and nothing is sent; the same shape twice
// is no conflict.
func TestSharedShapesConflict(t *testing.T) {
	for _, c := range []struct {
		name           string
		defaults, opts []lock.Option
		both           [2]string
	}{
		{"permits, then read", nil, []lock.Option{lock.WithPermits(3), lock.WithRead()}, [2]string{"WithPermits(3)", "WithRead()"}},
		{"permits, then write", nil, []lock.Option{lock.WithPermits(3), lock.WithWrite()}, [2]string{"WithPermits(3)", "WithWrite()"}},
		{"read, then permits", nil, []lock.Option{lock.WithRead(), lock.WithPermits(2)}, [2]string{"WithRead()", "WithPermits(2)"}},
		{"write, then permits", nil, []lock.Option{lock.WithWrite(), lock.WithPermits(2)}, [2]string{"WithWrite()", "WithPermits(2)"}},
		{"read, then write", nil, []lock.Option{lock.WithRead(), lock.WithWrite()}, [2]string{"WithRead()", "WithWrite()"}},
		{"write, then read", nil, []lock.Option{lock.WithWrite(), lock.WithRead()}, [2]string{"WithWrite()", "WithRead()"}},
		{"two limits", nil, []lock.Option{lock.WithPermits(2), lock.WithPermits(3)}, [2]string{"WithPermits(2)", "WithPermits(3)"}},
		{"a default and the call", []lock.Option{lock.WithRead()}, []lock.Option{lock.WithWrite()}, [2]string{"WithRead()", "WithWrite()"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSharer()
			err := obtainWith(c.opts...)(lock.New(s, c.defaults...))
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || !strings.Contains(ae.Reason, c.both[0]) || !strings.Contains(ae.Reason, c.both[1]) {
				t.Fatalf("got %v, want an *ArgumentError naming %s and %s", err, c.both[0], c.both[1])
			}
			if calls := len(s.calls) + len(s.shared.calls) + len(s.asked); calls != 0 {
				t.Errorf("calls to the strategy = %d, want 0", calls)
			}
		})
	}
	t.Run("the same shape twice", func(t *testing.T) {
		if err := obtainWith(lock.WithRead())(lock.New(newSharer(), lock.WithRead())); err != nil {
			t.Errorf("WithRead as a default and in the call = %v, want a lock", err)
		}
	})
}

// TestDowngrade: Downgrade calls the write side's Downgrade with the lock's
// key and value, and the lock goes on; a loss ends the lock; a lock that
// is not a write lock's is an *ArgumentError named "lock".
func TestDowngrade(t *testing.T) {
	ctx := context.Background()
	t.Run("writer", func(t *testing.T) {
		s := newSharer()
		lk, err := lock.New(s).Obtain(ctx, "k", time.Minute, lock.WithWrite())
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		if err := lk.Downgrade(ctx); err != nil {
			t.Fatalf("Downgrade = %v, want nil", err)
		}
		calls := s.shared.callsTo("downgrade")
		if len(calls) != 1 || calls[0].key != "k" || unstamped(calls[0].value) != lk.Token() {
			t.Errorf("Downgrade calls = %+v, want one, of k with the lock's value", calls)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release after Downgrade = %v, want nil", err)
		}
	})
	t.Run("lost", func(t *testing.T) {
		s := newSharer()
		lk, err := lock.New(s).Obtain(ctx, "k", time.Minute, lock.WithWrite())
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		s.shared.releaseErr = lock.ErrExpired
		if err := lk.Downgrade(ctx); !errors.Is(err, lock.ErrExpired) {
			t.Fatalf("Downgrade of a lock whose lease ended = %v, want ErrExpired", err)
		}
		select {
		case <-lk.Done():
		default:
			t.Errorf("Done after a Downgrade that found the lock expired: open, want closed")
		}
	})
	for _, c := range []struct {
		name string
		opt  lock.Option
	}{
		{"reader", lock.WithRead()},
		{"semaphore", lock.WithPermits(2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			lk, err := lock.New(newSharer()).Obtain(ctx, "k", time.Minute, c.opt)
			if err != nil {
				t.Fatalf("Obtain = %v, want a lock", err)
			}
			var ae *lock.ArgumentError
			if err := lk.Downgrade(ctx); !errors.As(err, &ae) || ae.Name != "lock" {
				t.Errorf("Downgrade = %v, want an *ArgumentError named lock", err)
			}
		})
	}
	t.Run("nil lock", func(t *testing.T) {
		var lk *lock.Lock
		if err := lk.Downgrade(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Downgrade of a nil lock = %v, want ErrNotHeld", err)
		}
	})
	t.Run("nil ctx", func(t *testing.T) {
		lk, _ := lock.New(newSharer()).Obtain(ctx, "k", time.Minute, lock.WithWrite())
		var ae *lock.ArgumentError
		var none context.Context // nil
		if err := lk.Downgrade(none); !errors.As(err, &ae) || ae.Name != "ctx" {
			t.Errorf("Downgrade(nil) = %v, want an *ArgumentError named ctx", err)
		}
	})
}
