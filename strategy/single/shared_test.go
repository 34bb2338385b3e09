package single_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestPlainLockOnASharedName: a plain lock of a name that a semaphore or a
// read-write lock holds is refused with an error that matches
// ErrMismatch and says which it holds, not obtained and not reported held,
// whatever its retry policy, with no failed clean-up (it wrote nothing),
// and the shared lock's holders are left as they were (docs/semaphores.md,
// "A plain lock on the same name").
func TestPlainLockOnASharedName(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := sharedLocker(t, addr)
	for _, c := range []struct {
		name  string
		shape lock.Option
		says  string
	}{
		{"semaphore", lock.WithPermits(2), "the key holds a semaphore of 2 permits, not a plain lock"},
		{"read-write lock", lock.WithRead(), "the key holds a read-write lock, not a plain lock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := conformance.Key(t)
			h, err := l.Obtain(ctx, key, time.Minute, c.shape)
			if err != nil {
				t.Fatalf("the shared lock's Obtain = %v, want a lock", err)
			}
			defer h.Release(ctx)
			var failed []error // clean-ups that failed
			hooks := lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
				err := next(ctx)
				if e.Op == "cleanup" && err != nil {
					failed = append(failed, err)
				}
				return err
			}})
			for _, retry := range []lock.RetryPolicy{lock.NoRetry(), lock.LimitAttempts(lock.Linear(time.Millisecond), 2)} {
				lk, err := l.Obtain(ctx, key, time.Minute, lock.WithRetry(retry), hooks)
				if err == nil {
					lk.Release(ctx)
				}
				if !errors.Is(err, lock.ErrMismatch) || errors.Is(err, lock.ErrNotObtained) || !strings.Contains(err.Error(), c.says) {
					t.Errorf("a plain Obtain of the shared lock's name = %v, want ErrMismatch, saying %q", err, c.says)
				}
			}
			if len(failed) != 0 {
				t.Errorf("clean-ups after the refusals failed: %v, want none: nothing was written to delete", failed)
			}
			st, err := l.Inspect(ctx, key)
			if err != nil || len(st.Holders) != 1 {
				t.Errorf("Inspect after the plain Obtains = %d holders, %v, want 1, nil", len(st.Holders), err)
			}
			if err := h.Refresh(ctx, time.Minute); err != nil {
				t.Errorf("the shared lock's Refresh = %v, want nil", err)
			}
		})
	}
}

// TestSharedTTLAndRefresh: a holder's TTL is its own lease, and a refresh
// extends its lease alone: the other holders' leases are left as they were.
func TestSharedTTLAndRefresh(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := sharedLocker(t, addr)
	key := conformance.Key(t)
	short, err := l.Obtain(ctx, key, 10*time.Second, lock.WithPermits(2))
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	defer short.Release(ctx)
	long, err := l.Obtain(ctx, key, time.Hour, lock.WithPermits(2))
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	defer long.Release(ctx)
	if ttl, err := short.TTL(ctx); err != nil || ttl > 10*time.Second || ttl < 9*time.Second {
		t.Errorf("the 10s holder's TTL = %v, %v, want its own lease, at most 10s", ttl, err)
	}
	if err := short.Refresh(ctx, 20*time.Second); err != nil {
		t.Fatalf("Refresh = %v, want nil", err)
	}
	if ttl, err := short.TTL(ctx); err != nil || ttl <= 10*time.Second {
		t.Errorf("the refreshed holder's TTL = %v, %v, want more than 10s", ttl, err)
	}
	if ttl, err := long.TTL(ctx); err != nil || ttl <= 59*time.Minute {
		t.Errorf("the other holder's TTL = %v, %v, want its own hour", ttl, err)
	}
	if err := long.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	if err := short.Refresh(ctx, 20*time.Second); err != nil {
		t.Errorf("Refresh after the other's Release = %v, want nil", err)
	}
	if _, err := long.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("the released holder's TTL = %v, want ErrNotHeld", err)
	}
}

// TestReadWriteFences: the write side fences as a plain lock does, from the
// counter at FenceKey, larger for every writer; a reader with WithFencing
// reads the current fence, the last writer's.
func TestReadWriteFences(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := sharedLocker(t, addr)
	key := conformance.Key(t)
	fenceOf := func(opts ...lock.Option) int64 {
		t.Helper()
		lk, err := l.Obtain(ctx, key, time.Minute, append(opts, lock.WithFencing())...)
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		defer lk.Release(ctx)
		fence, ok := lk.Fence()
		if !ok || fence <= 0 {
			t.Fatalf("Fence() = %d, %v, want a positive token", fence, ok)
		}
		return fence
	}
	first := fenceOf(lock.WithWrite())
	if got := fenceOf(lock.WithRead()); got != first {
		t.Errorf("a reader's fence after the writer's %d: %d, want the same", first, got)
	}
	plain := fenceOf()
	if plain <= first {
		t.Errorf("a plain lock's fence after the writer's %d: %d, want more: they share the counter", first, plain)
	}
	if second := fenceOf(lock.WithWrite()); second <= plain {
		t.Errorf("the next writer's fence: %d, want more than %d", second, plain)
	}
}
