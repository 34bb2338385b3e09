package single_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestHoldEveryShape: lock.Hold holds a lock of each shape, and of several
// keys, as Do holds one key's: fn's context carries the lock, the lock is
// refreshed while fn runs, and it is released when fn returns.
func TestHoldEveryShape(t *testing.T) {
	const ttl = 2 * time.Second // refreshed every 667ms: a margin for a loaded machine
	addr, _ := redistest.Addr(t)
	shapes := []struct {
		name   string
		obtain func(ctx context.Context, l *lock.Locker, key string, opt lock.Option) (*lock.Lock, error)
	}{
		{"one key", func(ctx context.Context, l *lock.Locker, key string, opt lock.Option) (*lock.Lock, error) {
			return l.Obtain(ctx, key, ttl, opt)
		}},
		{"several keys", func(ctx context.Context, l *lock.Locker, key string, opt lock.Option) (*lock.Lock, error) {
			return l.ObtainMany(ctx, []string{"{" + key + "}:a", "{" + key + "}:b"}, ttl, opt)
		}},
		{"a semaphore's permit", func(ctx context.Context, l *lock.Locker, key string, opt lock.Option) (*lock.Lock, error) {
			return l.Obtain(ctx, key, ttl, opt, lock.WithPermits(2))
		}},
		{"a read lock", func(ctx context.Context, l *lock.Locker, key string, opt lock.Option) (*lock.Lock, error) {
			return l.Obtain(ctx, key, ttl, opt, lock.WithRead())
		}},
		{"a write lock", func(ctx context.Context, l *lock.Locker, key string, opt lock.Option) (*lock.Lock, error) {
			return l.Obtain(ctx, key, ttl, opt, lock.WithWrite())
		}},
	}
	for _, d := range redistest.Drivers() {
		for _, sh := range shapes {
			t.Run(d.Name+"/"+sh.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				l, err := single.New(d.Conn(t, addr))
				if err != nil {
					t.Fatal(err)
				}
				refreshed := make(chan struct{}, 16)
				var refreshes atomic.Int32
				counts := lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
					err := next(ctx)
					if e.Op == "refresh" && err == nil {
						refreshes.Add(1)
						refreshed <- struct{}{}
					}
					return err
				}})
				lk, err := sh.obtain(ctx, l, conformance.Key(t), counts)
				if err != nil {
					t.Fatalf("Obtain = %v, want a lock", err)
				}
				err = lock.Hold(ctx, lk, func(ctx context.Context) error {
					if got, ok := lock.FromContext(ctx); !ok || got != lk {
						t.Errorf("FromContext(fn's ctx) = %v, %v, want the lock held", got, ok)
					}
					for range 2 { // refreshed twice: held past its first TTL
						select {
						case <-refreshed:
						case <-ctx.Done():
							return context.Cause(ctx)
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("Hold = %v, want nil (%d refreshes)", err, refreshes.Load())
				}
				if _, err := lk.TTL(ctx); err == nil {
					t.Errorf("TTL after Hold returned = nil, want an error: the lock is released")
				}
			})
		}
	}
}

// TestHoldRefusesNil: Hold refuses a nil ctx, lock or fn with an
// *ArgumentError naming it.
func TestHoldRefusesNil(t *testing.T) {
	lk := new(lock.Lock)
	fn := func(context.Context) error { return nil }
	var noCtx context.Context
	for _, c := range []struct {
		name string
		err  error
	}{
		{"ctx", lock.Hold(noCtx, lk, fn)},
		{"lock", lock.Hold(context.Background(), nil, fn)},
		{"fn", lock.Hold(context.Background(), lk, nil)},
	} {
		var ae *lock.ArgumentError
		if !errors.As(c.err, &ae) || ae.Name != c.name {
			t.Errorf("Hold with a nil %s = %v, want an *ArgumentError named %s", c.name, c.err, c.name)
		}
	}
}
