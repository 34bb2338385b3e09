package cas_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestSetTwice: a Set sent again after it was applied (its reply lost, or
// its connection found dead) succeeds, and sets the expiry again.
func TestSetTwice(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	c := goredis.New(rdb)
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
			if err := cas.Set(ctx, c, key, "v", "w", time.Minute); !errors.Is(err, tc.want) {
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
	t.Run("the key is gone", func(t *testing.T) {
		rdb.Del(ctx, key)
		if err := cas.Set(ctx, c, key, "v", "w", time.Minute); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Set = %v, want ErrExpired", err)
		}
	})
}
