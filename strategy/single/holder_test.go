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
	"github.com/locksmith-go/lock/strategy/single"
)

// TestQueuedRefusalNamesTheHolder: a waiter's refusal by the wait queue
// carries the holder, in the same round trip, so that a plain Locker's
// Obtain whose context ends the wait names the holder, its hold and the
// queue, with no Attempt hook to make it read them.
func TestQueuedRefusalNamesTheHolder(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			l, err := single.New(d.Conn(t, srv.Addr))
			if err != nil {
				t.Fatal(err)
			}
			key := conformance.Key(t)
			holder, err := l.Obtain(context.Background(), key, time.Minute, lock.WithMetadata("web-3 pid=4121"))
			if err != nil {
				t.Fatalf("Obtain = %v, want a lock", err)
			}
			defer holder.Release(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err = l.Obtain(ctx, key, time.Minute, lock.WithRetry(lock.Linear(50*time.Millisecond)))
			var held *lock.NotObtainedError
			if !errors.As(err, &held) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Obtain of a held lock until its context ends = %v, want a *NotObtainedError matching DeadlineExceeded", err)
			}
			if h := held.Holder; !h.Held || h.Metadata != "web-3 pid=4121" || h.HeldFor <= 0 || h.TTL <= 0 || h.Waiters != 1 {
				t.Errorf("Holder = held %v, metadata %q, held for %v, TTL %v, %d waiting; want held, %q, a hold, a TTL and 1 waiting (the waiter)",
					h.Held, h.Metadata, h.HeldFor, h.TTL, h.Waiters, "web-3 pid=4121")
			}
			if !strings.Contains(err.Error(), "held by web-3 pid=4121 for ") {
				t.Errorf("error = %q, want it to name the holder", err)
			}
		})
	}
}
