package lock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
)

// TestDefaultTTL: a ttl of 0 is the Locker's default TTL (lock.WithTTL),
// for Obtain, ObtainMany, Do and Refresh, and is refused where there is
// none.
func TestDefaultTTL(t *testing.T) {
	ctx := context.Background()
	const def = 2 * time.Second

	t.Run("Obtain with a ttl of 0 obtains for the default TTL", func(t *testing.T) {
		var ttls attemptTTLs
		lk, err := lock.New(newFake(), lock.WithTTL(def)).Obtain(ctx, "k", 0, ttls.hooks())
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		defer lk.Release(ctx)
		if got := ttls.get(); len(got) != 1 || got[0] != def {
			t.Errorf("attempt TTLs = %v, want [%v]", got, def)
		}
	})

	t.Run("ObtainMany with a ttl of 0 obtains for the default TTL", func(t *testing.T) {
		var ttls attemptTTLs
		lk, err := lock.New(newFake(), lock.WithTTL(def)).ObtainMany(ctx, []string{"a", "b"}, 0, ttls.hooks())
		if err != nil {
			t.Fatalf("ObtainMany = %v, want a lock", err)
		}
		defer lk.Release(ctx)
		if got := ttls.get(); len(got) != 1 || got[0] != def {
			t.Errorf("attempt TTLs = %v, want [%v]", got, def)
		}
	})

	t.Run("Do with a ttl of 0 holds and refreshes for the default TTL", func(t *testing.T) {
		var ttls attemptTTLs
		f := newFake()
		err := lock.Do(ctx, lock.New(f, lock.WithTTL(aliveTTL)), "k", 0, func(ctx context.Context) error {
			return waitRefreshes(ctx, f, 1)
		}, alive, ttls.hooks())
		if err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		if got := ttls.get(); len(got) < 2 || got[0] != aliveTTL || got[1] != aliveTTL {
			t.Errorf("attempt and refresh TTLs = %v, want %v for each", got, aliveTTL)
		}
	})

	t.Run("a ttl other than 0 wins over the default", func(t *testing.T) {
		var ttls attemptTTLs
		lk, err := lock.New(newFake(), lock.WithTTL(def)).Obtain(ctx, "k", time.Minute, ttls.hooks())
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		defer lk.Release(ctx)
		if got := ttls.get(); len(got) != 1 || got[0] != time.Minute {
			t.Errorf("attempt TTLs = %v, want [1m0s]", got)
		}
	})

	t.Run("a call's WithTTL wins over the Locker's", func(t *testing.T) {
		var ttls attemptTTLs
		lk, err := lock.New(newFake(), lock.WithTTL(def)).Obtain(ctx, "k", 0, lock.WithTTL(time.Minute), ttls.hooks())
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		defer lk.Release(ctx)
		if got := ttls.get(); len(got) != 1 || got[0] != time.Minute {
			t.Errorf("attempt TTLs = %v, want [1m0s]", got)
		}
	})

	t.Run("without a default, a ttl of 0 is refused, naming WithTTL, and nothing is sent", func(t *testing.T) {
		f := newFake()
		for name, obtain := range map[string]func() (*lock.Lock, error){
			"Obtain":     func() (*lock.Lock, error) { return lock.New(f).Obtain(ctx, "k", 0) },
			"ObtainMany": func() (*lock.Lock, error) { return lock.New(f).ObtainMany(ctx, []string{"a", "b"}, 0) },
			"Obtain with options": func() (*lock.Lock, error) {
				return lock.New(f, lock.WithMetadata("m")).Obtain(ctx, "k", 0)
			},
		} {
			_, err := obtain()
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "ttl" || !strings.Contains(ae.Reason, "WithTTL") {
				t.Errorf("%s with a ttl of 0 = %v, want an ArgumentError named ttl that names WithTTL", name, err)
			}
		}
		if n := len(f.callsTo("acquire")); n != 0 {
			t.Errorf("acquires sent = %d, want 0", n)
		}
	})

	t.Run("WithTTL under 1ms is refused", func(t *testing.T) {
		for _, d := range []time.Duration{0, time.Microsecond, -time.Second} {
			_, err := lock.New(newFake(), lock.WithTTL(d)).Obtain(ctx, "k", time.Second)
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "ttl" {
				t.Errorf("Obtain with WithTTL(%v) = %v, want an ArgumentError named ttl", d, err)
			}
		}
	})

	t.Run("Refresh with a ttl of 0 renews the lock's TTL", func(t *testing.T) {
		var ttls attemptTTLs
		lk, err := lock.New(newFake()).Obtain(ctx, "k", def, ttls.hooks())
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		if err := lk.Refresh(ctx, 0); err != nil {
			t.Fatalf("Refresh(ctx, 0) = %v, want nil", err)
		}
		if got := ttls.get(); len(got) != 2 || got[1] != def {
			t.Errorf("attempt and refresh TTLs = %v, want %v for each", got, def)
		}
	})
}

// attemptTTLs records the TTL of every attempt and refresh that the hooks
// see.
type attemptTTLs struct {
	mu   sync.Mutex
	ttls []time.Duration
}

func (a *attemptTTLs) hooks() lock.Option {
	record := func(e lock.Event) {
		a.mu.Lock()
		a.ttls = append(a.ttls, e.TTL)
		a.mu.Unlock()
	}
	return lock.WithHooks(&lock.Hooks{
		Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			record(e)
			return next(ctx)
		},
		Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			if e.Op == "refresh" {
				record(e)
			}
			return next(ctx)
		},
	})
}

func (a *attemptTTLs) get() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Duration(nil), a.ttls...)
}
