package single_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// multiSetup is a Locker of single over one driver, and a go-redis client
// of the same deployment that plants and reads keys.
type multiSetup struct {
	name string
	conn func(t *testing.T) driver.Conn
	raw  redis.UniversalClient
	// keys returns three keys of the test's own: on a Cluster, in three
	// slots on three masters.
	keys    func(t *testing.T) []string
	cluster bool
}

// TestMulti: ObtainMany over single, with scripts and without, on one
// server (real or embedded) over every driver, and on a Cluster over
// go-redis and rueidis with keys in three slots on three masters.
func TestMulti(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, _ := redistest.Addr(t)
	var setups []multiSetup
	for _, d := range redistest.Drivers() {
		setups = append(setups, multiSetup{d.Name, func(t *testing.T) driver.Conn { return d.Conn(t, addr) },
			redistest.GoRedis(t, addr, 3), func(t *testing.T) []string {
				k := conformance.Key(t)
				return []string{k + ":c", k + ":a", k + ":b"}
			}, false})
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) { runMulti(t, s) })
		t.Run(s.name+"/without scripts", func(t *testing.T) { runMulti(t, withoutScripts(s)) })
	}
	t.Run("cluster", func(t *testing.T) {
		cluster := redistest.StartCluster(t, 3)
		keys := func(t *testing.T) []string { return threeMasters(t, cluster, conformance.Key(t)) }
		raw := redistest.GoRedisCluster(t, cluster.Addrs())
		for _, s := range []multiSetup{
			{"goredis", func(t *testing.T) driver.Conn { return goredis.New(redistest.GoRedisCluster(t, cluster.Addrs())) }, raw, keys, true},
			{"rueidis", func(t *testing.T) driver.Conn {
				return rueidisdriver.New(redistest.RueidisCluster(t, cluster.Addrs()))
			}, raw, keys, true},
		} {
			t.Run(s.name, func(t *testing.T) { runMulti(t, s) })
			t.Run(s.name+"/without scripts", func(t *testing.T) { runMulti(t, withoutScripts(s)) })
		}
	})
}

// withoutScripts returns s with a Locker over a Conn marked
// driver.WithoutScripts.
func withoutScripts(s multiSetup) multiSetup {
	conn := s.conn
	s.conn = func(t *testing.T) driver.Conn { return driver.WithoutScripts(conn(t)) }
	return s
}

// threeMasters returns three keys that start with prefix, whose slots three
// different masters of cluster own.
func threeMasters(t *testing.T, cluster *redistest.Cluster, prefix string) []string {
	t.Helper()
	var keys []string
	owners := map[*redistest.Server]bool{}
	for i := 0; len(keys) < 3; i++ {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if o := cluster.Owner(t, cluster.KeySlot(t, k)); !owners[o] {
			owners[o] = true
			keys = append(keys, k)
		}
	}
	return keys
}

func runMulti(t *testing.T, s multiSetup) {
	ctx := context.Background()
	newLocker := func(t *testing.T) *lock.Locker {
		l, err := single.New(s.conn(t))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	obtain := func(t *testing.T, l *lock.Locker, keys []string, opts ...lock.Option) *lock.Lock {
		t.Helper()
		lk, err := l.ObtainMany(ctx, keys, time.Minute, opts...)
		if err != nil {
			t.Fatalf("ObtainMany(%q) = %v, want a lock", keys, err)
		}
		t.Cleanup(func() { _ = lk.Release(context.Background()) })
		return lk
	}
	// exists returns the keys of keys that exist.
	exists := func(t *testing.T, keys []string) []string {
		t.Helper()
		var got []string
		for _, k := range keys {
			n, err := s.raw.Exists(ctx, k).Result()
			if err != nil {
				t.Fatalf("EXISTS %q: %v", k, err)
			}
			if n == 1 {
				got = append(got, k)
			}
		}
		return got
	}
	pttl := func(t *testing.T, k string) time.Duration {
		t.Helper()
		d, err := s.raw.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatalf("PTTL %q: %v", k, err)
		}
		return d
	}

	t.Run("every key holds single's value", func(t *testing.T) {
		keys := s.keys(t)
		lk := obtain(t, newLocker(t), keys, lock.WithMetadata("m"))
		if got, want := lk.Keys(), slices.Sorted(slices.Values(keys)); !slices.Equal(got, want) {
			t.Errorf("Keys() = %q, want %q", got, want)
		}
		for _, k := range keys {
			if v, err := s.raw.Get(ctx, k).Result(); redistest.Unstamped(v) != lk.Token()+"m" || err != nil {
				t.Errorf("GET %q = %q, %v; want the token and metadata", k, v, err)
			}
			if d := pttl(t, k); d <= 0 || d > time.Minute {
				t.Errorf("PTTL %q = %v, want the minute", k, d)
			}
		}
	})

	t.Run("one key held: not obtained, naming it, nothing written", func(t *testing.T) {
		// On a Cluster, the held key is in the last slot taken: the
		// earlier slots' keys are taken, then deleted.
		keys := s.keys(t)
		slices.SortFunc(keys, func(a, b string) int { return cas.Slot(a) - cas.Slot(b) })
		l := newLocker(t)
		held := obtainOne(t, l, keys[2])
		_, err := l.ObtainMany(ctx, keys, time.Minute)
		var ke *lock.KeyError
		if !errors.Is(err, lock.ErrNotObtained) || !errors.As(err, &ke) || ke.Key != keys[2] {
			t.Errorf("ObtainMany = %v, want ErrNotObtained in a KeyError naming %q", err, keys[2])
		}
		if got := exists(t, keys); !slices.Equal(got, []string{keys[2]}) {
			t.Errorf("keys that exist = %q, want only the held one, %q", got, keys[2])
		}
		if v, _ := s.raw.Get(ctx, keys[2]).Result(); redistest.Unstamped(v) != held.Token() {
			t.Errorf("the held key's value changed")
		}
	})

	t.Run("a key of another type: an error, nothing written", func(t *testing.T) {
		keys := s.keys(t)
		if err := s.raw.LPush(ctx, keys[1], "x").Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.raw.Del(context.Background(), keys[1]) })
		_, err := newLocker(t).ObtainMany(ctx, keys, time.Minute)
		if err == nil || errors.Is(err, lock.ErrNotObtained) || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("ObtainMany = %v, want a WRONGTYPE error that is not ErrNotObtained", err)
		}
		if got := exists(t, keys); !slices.Equal(got, []string{keys[1]}) {
			t.Errorf("keys that exist = %q, want only the list, %q", got, keys[1])
		}
	})

	t.Run("the same token again takes the keys again", func(t *testing.T) {
		keys := s.keys(t)
		l := newLocker(t)
		token, _ := lock.NewToken()
		obtain(t, l, keys, lock.WithToken(token))
		if _, err := l.ObtainMany(ctx, keys, 2*time.Minute, lock.WithToken(token)); err != nil {
			t.Fatalf("ObtainMany with the holder's token = %v, want a lock", err)
		}
		for _, k := range keys {
			if d := pttl(t, k); d <= time.Minute {
				t.Errorf("PTTL %q = %v, want more than a minute: the TTL reset", k, d)
			}
		}
	})

	t.Run("release leaves nothing behind", func(t *testing.T) {
		keys := s.keys(t)
		lk := obtain(t, newLocker(t), keys)
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if got := exists(t, keys); len(got) != 0 {
			t.Errorf("keys that exist after Release = %q, want none", got)
		}
	})

	t.Run("refresh is all or nothing", func(t *testing.T) {
		k := conformance.Key(t)
		keys := []string{"{" + k + "}:a", "{" + k + "}:b", "{" + k + "}:c"} // one Cluster slot
		lk := obtain(t, newLocker(t), keys)
		if err := s.raw.Set(ctx, keys[1], "another", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		err := lk.Refresh(ctx, 2*time.Minute)
		var ke *lock.KeyError
		if !errors.Is(err, lock.ErrTaken) || !errors.As(err, &ke) || ke.Key != keys[1] {
			t.Errorf("Refresh = %v, want ErrTaken in a KeyError naming %q", err, keys[1])
		}
		for _, k := range keys {
			if d := pttl(t, k); d > time.Minute {
				t.Errorf("PTTL %q = %v after the refused Refresh, want at most the minute: no key extended", k, d)
			}
		}
	})

	t.Run("refresh across slots: lost, the other slots extended", func(t *testing.T) {
		if !s.cluster {
			t.Skip("one server takes every key in one script")
		}
		keys := s.keys(t)
		lk := obtain(t, newLocker(t), keys)
		if err := s.raw.Set(ctx, keys[1], "another", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := lk.Refresh(ctx, 2*time.Minute); !hasKeyError(err, keys[1], lock.ErrTaken) {
			t.Errorf("Refresh = %v, want ErrTaken in a KeyError naming %q", err, keys[1])
		}
		for _, k := range []string{keys[0], keys[2]} {
			if d := pttl(t, k); d <= time.Minute {
				t.Errorf("PTTL %q = %v, want more than a minute: its slot was extended", k, d)
			}
		}
		if err := lk.Release(ctx); !hasKeyError(err, keys[1], lock.ErrTaken) {
			t.Errorf("Release = %v, want ErrTaken naming %q", err, keys[1])
		}
		if got := exists(t, keys); !slices.Equal(got, []string{keys[1]}) {
			t.Errorf("keys that exist after Release = %q, want only the taken one, %q", got, keys[1])
		}
	})

	t.Run("refresh extends every key", func(t *testing.T) {
		keys := s.keys(t)
		lk := obtain(t, newLocker(t), keys)
		if err := lk.Refresh(ctx, 2*time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		for _, k := range keys {
			if d := pttl(t, k); d <= time.Minute {
				t.Errorf("PTTL %q = %v, want more than a minute", k, d)
			}
		}
	})

	t.Run("release reports each key gone or taken, and deletes the others", func(t *testing.T) {
		keys := slices.Sorted(slices.Values(s.keys(t)))
		lk := obtain(t, newLocker(t), keys)
		if err := s.raw.Del(ctx, keys[0]).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.raw.Set(ctx, keys[1], "another", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		err := lk.Release(ctx)
		for _, want := range []struct {
			key string
			err error
		}{{keys[0], lock.ErrExpired}, {keys[1], lock.ErrTaken}} {
			if !hasKeyError(err, want.key, want.err) {
				t.Errorf("Release = %v, want a KeyError naming %q with %v", err, want.key, want.err)
			}
		}
		if hasKeyError(err, keys[2], nil) {
			t.Errorf("Release = %v, want no error about %q, which the lock held", err, keys[2])
		}
		if got := exists(t, keys); !slices.Equal(got, []string{keys[1]}) {
			t.Errorf("keys that exist after Release = %q, want only the taken one, %q", got, keys[1])
		}
	})

	t.Run("TTL is the least of the keys", func(t *testing.T) {
		keys := s.keys(t)
		lk := obtain(t, newLocker(t), keys)
		if err := s.raw.PExpire(ctx, keys[1], 30*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		if d, err := lk.TTL(ctx); err != nil || d <= 0 || d > 30*time.Second {
			t.Errorf("TTL = %v, %v; want at most the 30s of %q", d, err, keys[1])
		}
	})

	t.Run("TTL of a lost key", func(t *testing.T) {
		keys := s.keys(t)
		lk := obtain(t, newLocker(t), keys)
		if err := s.raw.Del(ctx, keys[2]).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := lk.TTL(ctx); !hasKeyError(err, keys[2], lock.ErrExpired) {
			t.Errorf("TTL = %v, want a KeyError naming %q with ErrExpired", err, keys[2])
		}
	})

	t.Run("fencing: one increasing token per key", func(t *testing.T) {
		keys := s.keys(t)
		l := newLocker(t)
		first := obtain(t, l, keys, lock.WithFencing())
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		second := obtain(t, l, keys, lock.WithFencing())
		for _, k := range keys {
			f1, ok1 := first.FenceOf(k)
			f2, ok2 := second.FenceOf(k)
			if !ok1 || !ok2 || f1 <= 0 || f2 <= f1 {
				t.Errorf("FenceOf(%q) = %d, %v then %d, %v; want positive and increasing", k, f1, ok1, f2, ok2)
			}
			counter, _ := single.FenceKey(k)
			if n, err := s.raw.Get(ctx, counter).Int64(); n != f2 || err != nil {
				t.Errorf("counter %q = %d, %v; want the last token, %d", counter, n, err, f2)
			}
		}
	})

	t.Run("fencing refuses a key without a counter, before writing", func(t *testing.T) {
		keys := append(s.keys(t)[:1], "a}b"+conformance.Key(t))
		_, err := newLocker(t).ObtainMany(ctx, keys, time.Minute, lock.WithFencing())
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "key" {
			t.Errorf("ObtainMany = %v, want an *ArgumentError named key", err)
		}
		if got := exists(t, keys); len(got) != 0 {
			t.Errorf("keys that exist = %q, want none", got)
		}
	})

	t.Run("a key's release wakes its single-key waiter's queue", func(t *testing.T) {
		// The release deletes each key through the queue script: a
		// single-key lock on a member key is free at once.
		keys := s.keys(t)
		l := newLocker(t)
		lk := obtain(t, l, keys)
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
		obtainOne(t, l, keys[0])
	})
}

// obtainOne obtains key with a Locker of its own, until the test ends.
func obtainOne(t *testing.T, l *lock.Locker, key string) *lock.Lock {
	t.Helper()
	lk, err := l.Obtain(context.Background(), key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain(%q) = %v, want a lock", key, err)
	}
	t.Cleanup(func() { _ = lk.Release(context.Background()) })
	return lk
}

// hasKeyError reports whether err holds a *lock.KeyError naming key that
// matches want (any, when want is nil).
func hasKeyError(err error, key string, want error) bool {
	return slices.ContainsFunc(lock.KeyErrors(err), func(ke *lock.KeyError) bool {
		return ke.Key == key && (want == nil || errors.Is(ke, want))
	})
}

// TestMultiClusterSlotMoves: a lock of keys in three slots keeps working
// when one of its slots moves to another master while it is held: Refresh,
// TTL and Release reach each key where it now lives.
func TestMultiClusterSlotMoves(t *testing.T) {
	redistest.RequireFull(t, "a Cluster's slot moves")
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	ctx := context.Background()
	for _, d := range []struct {
		name string
		conn func(t *testing.T) driver.Conn
	}{
		{"goredis", func(t *testing.T) driver.Conn { return goredis.New(redistest.GoRedisCluster(t, cluster.Addrs())) }},
		{"rueidis", func(t *testing.T) driver.Conn { return rueidisdriver.New(redistest.RueidisCluster(t, cluster.Addrs())) }},
	} {
		t.Run(d.name, func(t *testing.T) {
			l, err := single.New(d.conn(t))
			if err != nil {
				t.Fatal(err)
			}
			keys := threeMasters(t, cluster, conformance.Key(t))
			lk, err := l.ObtainMany(ctx, keys, time.Minute, lock.WithFencing())
			if err != nil {
				t.Fatal(err)
			}
			slot := cluster.KeySlot(t, keys[0])
			to := cluster.Owner(t, cluster.KeySlot(t, keys[1]))
			cluster.MoveSlot(t, slot, to)
			if err := lk.Refresh(ctx, 2*time.Minute); err != nil {
				t.Errorf("Refresh after the move = %v, want nil", err)
			}
			if ttl, err := lk.TTL(ctx); err != nil || ttl <= time.Minute {
				t.Errorf("TTL after the move = %v, %v; want the refreshed 2 minutes", ttl, err)
			}
			if _, err := l.Obtain(ctx, keys[0], time.Minute); !errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("Obtain(%q) on its new master = %v, want ErrNotObtained", keys[0], err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release after the move = %v, want nil", err)
			}
			raw := redistest.GoRedisCluster(t, cluster.Addrs())
			for _, k := range keys {
				if n, err := raw.Exists(ctx, k).Result(); n != 0 || err != nil {
					t.Errorf("EXISTS %q after Release = %d, %v; want 0", k, n, err)
				}
			}
		})
	}
}

// TestMultiWithReplicas: with WithReplicas, with scripts and without, a
// lock of several keys is obtained and refreshed once a replica
// acknowledges it, and without one fails with a *ReplicaError, leaving no
// key behind.
func TestMultiWithReplicas(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		mark func(driver.Conn) driver.Conn
	}{{"scripts", withScripts}, {"without scripts", driver.WithoutScripts}} {
		t.Run(v.name, func(t *testing.T) { testMultiWithReplicas(t, v.mark) })
	}
}

func testMultiWithReplicas(t *testing.T, mark func(driver.Conn) driver.Conn) {
	keys := []string{"replicas-multi:a", "replicas-multi:b"}
	t.Run("a replica acknowledges: obtained and refreshed", func(t *testing.T) {
		master := redistest.Start(t, 1)[0]
		redistest.StartReplica(t, master.Addr)
		l := newReplicated(t, mark(goredis.New(redistest.GoRedis(t, master.Addr, 3))), 1, replicaWait)
		ctx := testContext(t)
		lk, err := l.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			t.Fatalf("ObtainMany = %v, want a lock", err)
		}
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Errorf("Refresh = %v, want nil", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release = %v, want nil", err)
		}
	})
	t.Run("no replica: a *ReplicaError, and nothing left behind", func(t *testing.T) {
		master := redistest.Start(t, 1)[0]
		l := newReplicated(t, mark(goredis.New(redistest.GoRedis(t, master.Addr, 3))), 1, 50*time.Millisecond)
		ctx := testContext(t)
		_, err := l.ObtainMany(ctx, keys, time.Minute)
		var re *single.ReplicaError
		if !errors.As(err, &re) || errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("ObtainMany = %v; want a *ReplicaError, not ErrNotObtained", err)
		}
		for _, k := range keys {
			if n, err := master.Command(ctx, "EXISTS", k); n != "0" || err != nil {
				t.Errorf("EXISTS %s = %q, %v; want 0: the unconfirmed lock deleted", k, n, err)
			}
		}
	})
}
