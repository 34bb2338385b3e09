package single_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

const setKey = `return redis.call('SET', KEYS[1], ARGV[1])`

// TestGuardOnCluster: through a Cluster client, a guarded write to a key
// in the lock's hash slot lands, and one naming a key of another slot is
// refused with an *ArgumentError named "keys" that names it, writing
// nothing and leaving the lock held.
func TestGuardOnCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	ctx := testContext(t)
	conn := goredis.New(redistest.GoRedisCluster(t, cluster.Addrs()))
	l, err := single.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Obtain(ctx, "{orders}:42", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	t.Run("a key in the lock's slot", func(t *testing.T) {
		if _, err := lk.Guard(ctx, setKey, []string{"{orders}:42:state"}, "paid"); err != nil {
			t.Errorf("Guard: got %v, want nil", err)
		}
		if v, _, _ := conn.Get(ctx, "{orders}:42:state"); v != "paid" {
			t.Errorf("the guarded key: got %q, want %q", v, "paid")
		}
	})
	for _, form := range []struct {
		name  string
		write func(key string) error
	}{
		{"script", func(key string) error { _, err := lk.Guard(ctx, setKey, []string{key}, "paid"); return err }},
		{"commands", func(key string) error {
			_, err := lk.GuardCommands(ctx, []string{key}, []any{"SET", key, "paid"})
			return err
		}},
	} {
		t.Run("a key of another slot, "+form.name, func(t *testing.T) {
			var ae *lock.ArgumentError
			if err := form.write("orders:42:state"); !errors.As(err, &ae) || ae.Name != "keys" || !strings.Contains(ae.Reason, `"orders:42:state"`) {
				t.Errorf("got %v, want an *ArgumentError named keys that names orders:42:state", err)
			}
			if _, ok, _ := conn.Get(ctx, "orders:42:state"); ok {
				t.Errorf("the refused write's key exists, want none")
			}
			if err := lk.Err(); err != nil {
				t.Errorf("Err after a refused write: got %v, want nil", err)
			}
		})
	}
}

// TestGuardShared: a semaphore's holder and a reader guard their writes by
// their own lease: a write lands while it lasts, and once it is gone (its
// entry removed from the lock's sorted set, as the reaper removes an
// ended lease) nothing is written, and ErrExpired is returned, in both
// forms.
func TestGuardShared(t *testing.T) {
	t.Parallel()
	addr, _ := redistest.Addr(t)
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			conn := d.Conn(t, addr)
			l, err := single.New(conn)
			if err != nil {
				t.Fatal(err)
			}
			for _, shape := range []struct {
				name string
				opt  lock.Option
			}{{"semaphore", lock.WithPermits(2)}, {"reader", lock.WithRead()}, {"writer", lock.WithWrite()}} {
				t.Run(shape.name, func(t *testing.T) {
					ctx := testContext(t)
					key := "{guard-shared:" + d.Name + ":" + shape.name + "}"
					data := key + ":data"
					lk, err := l.Obtain(ctx, key, time.Minute, shape.opt)
					if err != nil {
						t.Fatal(err)
					}
					defer lk.Release(ctx)
					if _, err := lk.Guard(ctx, setKey, []string{data}, "1"); err != nil {
						t.Fatalf("Guard: got %v, want nil", err)
					}
					if _, err := lk.GuardCommands(ctx, []string{data}, []any{"SET", data, "2"}); err != nil {
						t.Fatalf("GuardCommands: got %v, want nil", err)
					}
					if _, err := driver.Do(ctx, conn, "ZREMRANGEBYRANK", key, 0, -1); err != nil {
						t.Fatal(err)
					}
					if _, err := lk.GuardCommands(ctx, []string{data}, []any{"SET", data, "stale"}); !errors.Is(err, lock.ErrExpired) {
						t.Errorf("GuardCommands after the lease ended: got %v, want ErrExpired", err)
					}
					if _, err := lk.Guard(ctx, setKey, []string{data}, "stale"); !errors.Is(err, lock.ErrNotHeld) {
						t.Errorf("Guard after the lease ended: got %v, want ErrNotHeld", err)
					}
					if v, _, _ := conn.Get(ctx, data); v != "2" {
						t.Errorf("the guarded key: got %q, want %q", v, "2")
					}
				})
			}
		})
	}
}

// TestGuardWithoutScripts: over a conn marked driver.WithoutScripts, a
// guarded script is refused with an error matching errors.ErrUnsupported
// that points to GuardCommands, sending nothing and leaving the lock held,
// and guarded commands land, sending no script.
func TestGuardWithoutScripts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, 1)[0]
	ctx := testContext(t)
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			conn := d.Conn(t, srv.Addr)
			l, _ := noScriptLocker(t, conn)
			key := "{guard-noscript:" + d.Name + "}"
			lk, err := l.Obtain(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Release(ctx)
			if _, err := lk.Guard(ctx, setKey, []string{key + ":a"}, "x"); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "GuardCommands") {
				t.Errorf("Guard: got %v, want an error matching errors.ErrUnsupported that names GuardCommands", err)
			}
			if err := lk.Err(); err != nil {
				t.Errorf("Err after a refused Guard: got %v, want nil", err)
			}
			replies, err := lk.GuardCommands(ctx, []string{key + ":a"}, []any{"SET", key + ":a", "x"}, []any{"INCR", key + ":n"})
			if err != nil || len(replies) != 2 || replies[0] != "OK" || replies[1] != int64(1) {
				t.Errorf("GuardCommands: got %v, %v; want [OK 1], nil", replies, err)
			}
		})
	}
	sentNoScript(t, srv)
}
