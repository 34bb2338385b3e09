package single_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// slotKeys are keys with and without hash tags, and with braces that are
// not tags.
var slotKeys = []string{
	"orders:42", "{user:7}:cart", "x{y}z", "a{b", "{", "{{a}}", "ключ 7", "with space",
}

func TestFenceKey(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"orders:42", "{orders:42}:fence"},
		{"{user:7}:cart", "{user:7}:cart:fence"},
		{"x{y}z", "x{y}z:fence"},
		{"a{b", "{a{b}:fence"},
		{"{{a}}", "{{a}}:fence"},
	} {
		t.Run(c.key, func(t *testing.T) {
			if got, err := single.FenceKey(c.key); got != c.want || err != nil {
				t.Errorf("FenceKey(%q) = %q, %v; want %q, nil", c.key, got, err, c.want)
			}
		})
	}
	for _, key := range []string{"a}b", "{}x", "}{", "a{}b}"} {
		t.Run("refuses "+key, func(t *testing.T) {
			var ae *lock.ArgumentError
			if _, err := single.FenceKey(key); !errors.As(err, &ae) || ae.Name != "key" {
				t.Errorf("FenceKey(%q) = %v, want an *ArgumentError named key", key, err)
			}
		})
	}
}

// TestFenceKeyOnCluster: on a real cluster, each key and its counter share a
// hash slot, so the fenced acquisition works through a Cluster client.
func TestFenceKeyOnCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	ctx := context.Background()
	l, err := single.New(goredis.New(redistest.GoRedisCluster(t, cluster.Addrs())))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range slotKeys {
		t.Run(key, func(t *testing.T) {
			fenceKey, err := single.FenceKey(key)
			if err != nil {
				t.Fatal(err)
			}
			srv := cluster.Servers[0]
			slot, err := srv.Command(ctx, "CLUSTER", "KEYSLOT", key)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := srv.Command(ctx, "CLUSTER", "KEYSLOT", fenceKey); got != slot {
				t.Errorf("slot of %q = %s, want %s, the slot of %q", fenceKey, got, slot, key)
			}
			lk, err := l.Obtain(ctx, key, time.Minute, lock.WithFencing())
			if err != nil {
				t.Fatalf("Obtain WithFencing on the cluster = %v, want a lock", err)
			}
			if n, ok := lk.Fence(); n <= 0 || !ok {
				t.Errorf("Fence() = %d, %v; want a positive token", n, ok)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release = %v, want nil", err)
			}
		})
	}
}

// TestFencingAcrossRestart: a server restarted without persistence forgets
// the counter, which starts again from its clock, above the tokens it
// issued before.
func TestFencingAcrossRestart(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	l, err := single.New(goredis.New(redistest.GoRedis(t, srv.Addr, 3)))
	if err != nil {
		t.Fatal(err)
	}
	key := conformance.Key(t)
	before, err := l.Obtain(ctx, key, time.Minute, lock.WithFencing())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var after *lock.Lock
	for try := 0; ; try++ { // go-redis may return its last dial error for a moment
		if after, err = l.Obtain(ctx, key, time.Minute, lock.WithFencing()); err == nil || try == 50 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Obtain after the restart = %v, want a lock", err)
	}
	b, _ := before.Fence()
	a, _ := after.Fence()
	if a <= b {
		t.Errorf("token after a restart = %d, want more than %d, the token before", a, b)
	}
}

// TestFenceCounterOfAnotherType: a counter key that holds something else is
// a clear error, and the lock it could not fence is not left behind.
func TestFenceCounterOfAnotherType(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	rdb := redistest.GoRedis(t, addr, 3)
	l, err := single.New(goredis.New(rdb))
	if err != nil {
		t.Fatal(err)
	}
	key := conformance.Key(t)
	fenceKey, _ := single.FenceKey(key)
	if err := rdb.HSet(ctx, fenceKey, "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Del(ctx, fenceKey)
	if _, err := l.Obtain(ctx, key, time.Minute, lock.WithFencing()); err == nil || errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Obtain WithFencing over a hash counter = %v, want a Redis error", err)
	}
	if n, err := rdb.Exists(ctx, key).Result(); n != 0 || err != nil {
		t.Errorf("EXISTS lock key after the failed fenced Obtain = %d, %v; want 0", n, err)
	}
}
