package single_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestInspect: Inspect reads a lock without holding it: free or held, its
// TTL, the holder's fingerprint and metadata, and the fencing counter,
// over every driver.
func TestInspect(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			conn := d.Conn(t, srv.Addr)
			l, err := single.New(conn)
			if err != nil {
				t.Fatal(err)
			}
			inspect := func(t *testing.T, key string) lock.State {
				t.Helper()
				st, err := l.Inspect(ctx, key)
				if err != nil {
					t.Fatalf("Inspect = %v, want nil", err)
				}
				return st
			}

			t.Run("a free key", func(t *testing.T) {
				st := inspect(t, conformance.Key(t))
				if st.Held || st.TTL != 0 || st.Fingerprint != "" || st.Metadata != "" || st.Verdict != "free" {
					t.Errorf("Inspect = %+v, want free, with no TTL, fingerprint or metadata", st)
				}
			})

			t.Run("a held lock", func(t *testing.T) {
				key := conformance.Key(t)
				lk, err := l.Obtain(ctx, key, time.Minute, lock.WithMetadata("host=web-3"))
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Release(ctx)
				st := inspect(t, key)
				if !st.Held || st.Verdict != "held" {
					t.Errorf("Held, Verdict = %v, %q; want true, held", st.Held, st.Verdict)
				}
				if st.TTL <= 0 || st.TTL > time.Minute {
					t.Errorf("TTL = %v, want in (0, 1m]", st.TTL)
				}
				if st.Fingerprint != strategy.Fingerprint(lk.Token()) {
					t.Errorf("Fingerprint = %q, want the fingerprint of the holder's token", st.Fingerprint)
				}
				if st.Metadata != "host=web-3" {
					t.Errorf("Metadata = %q, want %q", st.Metadata, "host=web-3")
				}
				if st.Fence != 0 {
					t.Errorf("Fence = %d, want 0 (never fenced)", st.Fence)
				}
			})

			t.Run("the token never shows", func(t *testing.T) {
				key := conformance.Key(t)
				lk, err := l.Obtain(ctx, key, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Release(ctx)
				if st := inspect(t, key); strings.Contains(st.Fingerprint+st.Metadata+st.Verdict, lk.Token()) {
					t.Errorf("the State shows the token, want it never shown")
				}
			})

			t.Run("the fencing counter", func(t *testing.T) {
				key := conformance.Key(t)
				lk, err := l.Obtain(ctx, key, time.Minute, lock.WithFencing())
				if err != nil {
					t.Fatal(err)
				}
				fence, _ := lk.Fence()
				if st := inspect(t, key); st.Fence != fence {
					t.Errorf("Fence while held = %d, want the holder's, %d", st.Fence, fence)
				}
				if err := lk.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if st := inspect(t, key); st.Held || st.Fence != fence {
					t.Errorf("after Release: Held, Fence = %v, %d; want false, the last token issued, %d", st.Held, st.Fence, fence)
				}
			})

			t.Run("a key with no fence key", func(t *testing.T) {
				key := conformance.Key(t) + "}" // FenceKey refuses it
				lk, err := l.Obtain(ctx, key, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Release(ctx)
				if st := inspect(t, key); !st.Held || st.Fence != 0 {
					t.Errorf("Held, Fence = %v, %d; want true, 0", st.Held, st.Fence)
				}
			})

			t.Run("a value of another client", func(t *testing.T) {
				key := conformance.Key(t)
				const token = "AAAAAAAAAAAAAAAAAAAAAA" // 22 base64url characters
				for _, tc := range []struct{ value, token, metadata string }{
					{token + `{"host":"web-3"}`, token, `{"host":"web-3"}`}, // bsm/redislock's layout
					{"short", "short", ""},
					{"1700000000", "1700000000", ""}, // a legacy timestamp
				} {
					if _, err := srv.Command(ctx, "SET", key, tc.value); err != nil {
						t.Fatal(err)
					}
					st := inspect(t, key)
					if !st.Held || st.Fingerprint != strategy.Fingerprint(tc.token) || st.Metadata != tc.metadata {
						t.Errorf("Inspect of %q = %+v, want held, the fingerprint of %q and metadata %q", tc.value, st, tc.token, tc.metadata)
					}
					if st.TTL >= 0 {
						t.Errorf("TTL of a key with no expiry = %v, want negative", st.TTL)
					}
				}
			})

			t.Run("a key of another type", func(t *testing.T) {
				key := conformance.Key(t)
				if _, err := srv.Command(ctx, "HSET", key, "f", "v"); err != nil {
					t.Fatal(err)
				}
				st, err := l.Inspect(ctx, key)
				if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || !strings.Contains(err.Error(), "inspect") {
					t.Errorf("Inspect of a hash = %+v, %v; want an inspect error with WRONGTYPE", st, err)
				}
			})
		})
	}
}

// TestInspectCluster: on a Cluster, the counter is read in the key's hash
// slot, in the same script.
func TestInspectCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	l, err := single.New(goredis.New(redistest.GoRedisCluster(t, cluster.Addrs())))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"orders:42", "{user:7}:cart"} {
		lk, err := l.Obtain(ctx, key, time.Minute, lock.WithFencing())
		if err != nil {
			t.Fatal(err)
		}
		fence, _ := lk.Fence()
		st, err := l.Inspect(ctx, key)
		if err != nil || !st.Held || st.Fence != fence || st.Fingerprint != strategy.Fingerprint(lk.Token()) {
			t.Errorf("Inspect(%q) = %+v, %v; want held by the holder, with its fence %d", key, st, err, fence)
		}
		_ = lk.Release(ctx)
	}
}

// TestInspectCountsWaiters: Inspect counts the waiters queued behind the
// holder, and a Break wakes the head of the queue, as a Release does: with
// a retry timer of a minute, only the break's message explains its prompt
// turn.
func TestInspectCountsWaiters(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			l, err := single.New(d.Conn(t, srv.Addr))
			if err != nil {
				t.Fatal(err)
			}
			key := conformance.Key(t)
			holder, err := l.Obtain(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			const waiters = 2
			got := make(chan *lock.Lock, waiters)
			for range waiters {
				go func() {
					lk, _ := l.Obtain(ctx, key, time.Minute, lock.WithRetry(lock.Linear(time.Minute)))
					got <- lk
				}()
			}
			var st lock.State
			for st.Waiters < waiters && ctx.Err() == nil { // the waiters join the queue in their own time
				if st, err = l.Inspect(ctx, key); err != nil {
					t.Fatalf("Inspect = %v, want nil", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if st.Waiters != waiters {
				t.Fatalf("Inspect: got %d waiters, want %d", st.Waiters, waiters)
			}
			if _, err := l.Break(ctx, key, strategy.Fingerprint(holder.Token())); err != nil {
				t.Fatalf("Break = %v, want nil", err)
			}
			first := <-got
			if first == nil {
				t.Fatal("the head of the queue did not obtain the lock after the Break")
			}
			if err := first.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil", err)
			}
			if second := <-got; second == nil {
				t.Fatal("the second waiter did not obtain the lock after the first released it")
			} else if err := second.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil", err)
			}
			if st, err := l.Inspect(ctx, key); err != nil || st.Held || st.Waiters != 0 {
				t.Errorf("Inspect at the end: got %+v, %v; want free, no waiters", st, err)
			}
		})
	}
}
