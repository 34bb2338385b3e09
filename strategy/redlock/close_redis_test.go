package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestCloseLeavesNoKeys: contenders that race for a free key on a Locker
// that has not yet met its nodes lose, and their Obtain returns once a
// quorum refused them, while their deletes on the other nodes may still be
// on their way; the winner releases. Once Close has returned, that work
// has ended: no node holds the key, though each attempt wrote it for a
// minute.
func TestCloseLeavesNoKeys(t *testing.T) {
	servers := redistest.Start(t, 5)
	ctx := context.Background()
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			l := newLocker(t, connect(t, servers, d))
			key := conformance.Key(t)
			var wg sync.WaitGroup
			errs := make([]error, 32)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lk, err := l.Obtain(ctx, key, time.Minute)
					switch {
					case err == nil:
						err = lk.Release(ctx)
					case errors.Is(err, lock.ErrNoAnswer):
						// Nodes that a starved process reads too late
						// time out: its clean-up is Close's to wait for too.
						t.Logf("a contender's Obtain got no answer: %v", err)
						err = nil
					case errors.Is(err, lock.ErrNotObtained):
						err = nil
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("a contender's Obtain or Release = %v, want a lock, ErrNotObtained or ErrNoAnswer", err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close = %v, want nil", err)
			}
			for _, srv := range servers {
				if n, err := srv.Command(ctx, "EXISTS", key); n != "0" {
					t.Errorf("after Close, EXISTS %s on %s = %q, %v; want 0", key, srv.Addr, n, err)
				}
			}
			if _, err := l.Obtain(ctx, key, time.Minute); !errors.Is(err, lock.ErrClosed) {
				t.Errorf("Obtain after Close = %v, want an error matching ErrClosed", err)
			}
		})
	}
}
