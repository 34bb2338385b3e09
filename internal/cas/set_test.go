package cas_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestSetTwice: a Set sent again after it was applied (its reply lost, or
// its connection found dead) succeeds, and sets the expiry again; so does
// Plain's, on the server's SET IFEQ where it has one (Valkey 8.1) and on
// the transaction where it has not or refuses it.
func TestSetTwice(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	c := goredis.New(rdb)
	for _, m := range []struct {
		name string
		set  func(ctx context.Context, key, value, next string, ttl time.Duration) error
	}{
		{"scripts", func(ctx context.Context, key, value, next string, ttl time.Duration) error {
			return set(ctx, c, key, value, next, ttl)
		}},
		{"without scripts", plain(t, c).Set},
		{"without scripts, by transaction", plain(t, &faulty{Conn: c, refuse: noSetIfEq}).Set},
	} {
		t.Run(m.name, func(t *testing.T) { testSetTwice(t, rdb, m.set) })
	}
}

func testSetTwice(t *testing.T, rdb *redis.Client, set func(ctx context.Context, key, value, next string, ttl time.Duration) error) {
	ctx := context.Background()
	key := "cas-set-twice"
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	for _, tc := range []struct {
		name   string
		stored string
		want   error
	}{
		{"the key holds value", "v", nil},
		{"the key holds next", "w", nil},
		{"the key holds another value", "x", lock.ErrTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := rdb.Set(ctx, key, tc.stored, time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			if err := set(ctx, key, "v", "w", time.Minute); !errors.Is(err, tc.want) {
				t.Fatalf("Set = %v, want %v", err, tc.want)
			}
			want, wantTTL := "w", 50*time.Second
			if tc.want != nil {
				want, wantTTL = tc.stored, 0
			}
			if got, err := rdb.Get(ctx, key).Result(); err != nil || got != want {
				t.Errorf("after Set, GET = %q, %v; want %q", got, err, want)
			}
			if ttl, err := rdb.PTTL(ctx, key).Result(); err != nil || ttl < wantTTL || ttl > time.Minute {
				t.Errorf("after Set, PTTL = %v, %v; want at least %v", ttl, err, wantTTL)
			}
		})
	}
	t.Run("a TTL of 0 leaves no expiry", func(t *testing.T) {
		if err := rdb.Set(ctx, key, "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := set(ctx, key, "v", "w", 0); err != nil {
			t.Fatalf("Set = %v, want nil", err)
		}
		if ttl, err := rdb.PTTL(ctx, key).Result(); err != nil || ttl != -1 {
			t.Errorf("after Set, PTTL = %v, %v; want -1 (no expiry)", ttl, err)
		}
	})
	t.Run("the key is gone", func(t *testing.T) {
		rdb.Del(ctx, key)
		if err := set(ctx, key, "v", "w", time.Minute); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Set = %v, want ErrExpired", err)
		}
	})
}
