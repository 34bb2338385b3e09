package single_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestMultiServerFailsMidway: an ObtainMany whose server stops answering
// fails by its deadline, saying that Redis did not answer, and leaves no
// key behind once the server answers again: the Locker's clean-up deletes
// what the attempt wrote. On a Cluster with keys in three slots, the slots
// are taken one by one, so a master that stops in the middle leaves the
// earlier slots taken until the clean-up deletes them.
func TestMultiServerFailsMidway(t *testing.T) {
	t.Run("the server paused", func(t *testing.T) {
		srv := redistest.Start(t, 1)[0]
		rdb := redistest.GoRedis(t, srv.Addr, 3)
		k := "{" + conformance.Key(t) + "}"
		keys := []string{k + ":a", k + ":b", k + ":c"}
		failMidway(t, redistest.GoRedis(t, srv.Addr, 3), rdb, keys, srv.Pause, srv.Resume)
	})
	t.Run("a Cluster master paused after the first slot", func(t *testing.T) {
		redistest.RequireFull(t, "a Cluster")
		cluster := redistest.StartCluster(t, 3)
		rdb := redistest.GoRedisCluster(t, cluster.Addrs())
		keys := threeMasters(t, cluster, conformance.Key(t))
		slices.SortFunc(keys, func(a, b string) int { return cas.Slot(a) - cas.Slot(b) }) // the order of the slots
		second := cluster.Owner(t, cluster.KeySlot(t, keys[1]))
		failMidway(t, redistest.GoRedisCluster(t, cluster.Addrs()), rdb, keys, second.Pause, second.Resume)
	})
}

// failMidway runs an ObtainMany of keys with a short deadline over client,
// after stop; then it calls resume, and waits until rdb, a client of the
// same deployment, finds none of keys.
func failMidway(t *testing.T, client, rdb redis.UniversalClient, keys []string, stop, resume func()) {
	t.Helper()
	l, err := single.New(goredis.New(client))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := client.Ping(ctx).Err(); err != nil { // connected, and a Cluster's slots known
		t.Fatal(err)
	}
	stop()
	resumed := false
	defer func() {
		if !resumed {
			resume()
		}
	}()
	call, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = l.ObtainMany(call, keys, time.Minute)
	if !errors.Is(err, lock.ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ObtainMany with the server stopped = %v, want ErrNoAnswer and context.DeadlineExceeded", err)
	}
	resume()
	resumed = true
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := existing(ctx, rdb, keys)
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys left once the server answered again = %d (%v), want 0: the clean-up deletes them", n, err)
		}
	}
}

// existing counts the keys of keys that exist, one EXISTS each (a
// Cluster's keys are in several slots).
func existing(ctx context.Context, rdb redis.UniversalClient, keys []string) (int64, error) {
	var n int64
	for _, k := range keys {
		e, err := rdb.Exists(ctx, k).Result()
		if err != nil {
			return 0, err
		}
		n += e
	}
	return n, nil
}
