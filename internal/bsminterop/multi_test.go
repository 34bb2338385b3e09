package bsminterop_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/bsm/redislock"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestMultiInterop: a bsm/redislock client that holds one of the keys
// blocks the set, and sees each key of a set that single took held.
func TestMultiInterop(t *testing.T) {
	t.Parallel()
	addr := redistest.Start(t, 1)[0].Addr
	ctx := context.Background()
	l, err := single.New(goredis.New(redistest.GoRedis(t, addr, 3)))
	if err != nil {
		t.Fatal(err)
	}
	bsm := redislock.New(redistest.GoRedis(t, addr, 3))
	t.Run("bsm holds one key", func(t *testing.T) {
		k := conformance.Key(t)
		keys := []string{k + ":a", k + ":b"}
		bl, err := bsm.Obtain(ctx, keys[1], time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bl.Release(context.Background()) })
		if _, err := l.ObtainMany(ctx, keys, time.Minute); !notObtained(err, keys[1]) {
			t.Errorf("ObtainMany = %v, want ErrNotObtained naming %q", err, keys[1])
		}
	})
	t.Run("bsm sees each key held", func(t *testing.T) {
		k := conformance.Key(t)
		keys := []string{k + ":a", k + ":b"}
		lk, err := l.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lk.Release(context.Background()) })
		for _, key := range keys {
			if _, err := bsm.Obtain(ctx, key, time.Minute, nil); !errors.Is(err, redislock.ErrNotObtained) {
				t.Errorf("bsm Obtain(%q) = %v, want redislock.ErrNotObtained", key, err)
			}
		}
	})
}

// notObtained reports whether err holds a *lock.KeyError naming key that
// matches lock.ErrNotObtained.
func notObtained(err error, key string) bool {
	return slices.ContainsFunc(lock.KeyErrors(err), func(ke *lock.KeyError) bool {
		return ke.Key == key && errors.Is(ke, lock.ErrNotObtained)
	})
}
