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
// earlier slots taken until the attempt undoes them or the clean-up
// deletes them; a master killed in the middle fails the attempt, never as
// "not obtained", and leaves nothing behind once it is back.
func TestMultiServerFailsMidway(t *testing.T) {
	noAnswer := func(t *testing.T, err error) {
		if !errors.Is(err, lock.ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ObtainMany with the server stopped = %v, want ErrNoAnswer and context.DeadlineExceeded", err)
		}
	}
	t.Run("the server paused", func(t *testing.T) {
		srv := redistest.Start(t, 1)[0]
		rdb := redistest.GoRedis(t, srv.Addr, 3)
		k := "{" + conformance.Key(t) + "}"
		keys := []string{k + ":a", k + ":b", k + ":c"}
		noAnswer(t, failMidway(t, redistest.GoRedis(t, srv.Addr, 3), rdb, keys, srv.Pause, srv.Resume))
	})
	// second returns a Cluster's clients, keys in three slots on three
	// masters, and the master of the second slot in the order of slots.
	second := func(t *testing.T) (client, rdb redis.UniversalClient, keys []string, master *redistest.Server) {
		redistest.RequireFull(t, "a Cluster")
		cluster := redistest.StartCluster(t, 3)
		keys = threeMasters(t, cluster, conformance.Key(t))
		slices.SortFunc(keys, func(a, b string) int { return cas.Slot(a) - cas.Slot(b) })
		master = cluster.Owner(t, cluster.KeySlot(t, keys[1]))
		return redistest.GoRedisCluster(t, cluster.Addrs()), redistest.GoRedisCluster(t, cluster.Addrs()), keys, master
	}
	t.Run("a Cluster master paused after the first slot", func(t *testing.T) {
		client, rdb, keys, master := second(t)
		noAnswer(t, failMidway(t, client, rdb, keys, master.Pause, master.Resume))
	})
	t.Run("a Cluster master killed after the first slot, then restarted", func(t *testing.T) {
		client, rdb, keys, master := second(t)
		restart := func() {
			if err := master.Restart(); err != nil {
				t.Fatalf("restarting the killed master: %v", err)
			}
		}
		err := failMidway(t, client, rdb, keys, master.Kill, restart)
		if err == nil || errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("ObtainMany with a master killed = %v, want an error that is not ErrNotObtained: nobody held the keys", err)
		}
	})
}

// failMidway runs an ObtainMany of keys with a short deadline over client,
// after stop, and returns its error; then it calls resume, and waits until
// rdb, a client of the same deployment, finds none of keys.
func failMidway(t *testing.T, client, rdb redis.UniversalClient, keys []string, stop, resume func()) error {
	t.Helper()
	l, err := single.New(goredis.New(client))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var obtainErr error
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
	if lk, err := l.ObtainMany(call, keys, time.Minute); lk != nil {
		t.Fatalf("ObtainMany with a server stopped = a lock, want an error")
	} else {
		obtainErr = err
	}
	resume()
	resumed = true
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := existing(ctx, rdb, keys)
		if err == nil && n == 0 {
			return obtainErr
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
