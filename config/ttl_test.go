package config_test

import (
	"context"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestTTLIsTheDefault: the ttl setting is the TTL of an Obtain, an
// ObtainMany or a lock.Do whose ttl is 0, and a ttl other than 0 wins.
func TestTTLIsTheDefault(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		cfg  config.Config
		want time.Duration
	}{
		{"ttl=2s", config.Config{Strategy: "single", Addrs: []string{addr}, TTL: 2 * time.Second}, 2 * time.Second},
		{"no ttl: 30s", config.Config{Strategy: "redlock", Addrs: []string{addr}}, 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := open(t, c.cfg)
			ttls := map[string]time.Duration{}
			hooks := lock.WithHooks(&lock.Hooks{Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
				ttls[e.Key] = e.TTL
				return next(ctx)
			}})
			lk, err := l.Obtain(ctx, "ttl:obtain", 0, hooks)
			if err != nil {
				t.Fatalf("Obtain(ctx, k, 0) = %v, want a lock", err)
			}
			_ = lk.Release(ctx)
			if err := lock.Do(ctx, l, "ttl:do", 0, func(context.Context) error { return nil }, hooks); err != nil {
				t.Fatalf("lock.Do(ctx, l, k, 0, fn) = %v, want nil", err)
			}
			if lk, err = l.Obtain(ctx, "ttl:own", time.Minute, hooks); err != nil {
				t.Fatal(err)
			}
			_ = lk.Release(ctx)
			want := map[string]time.Duration{"ttl:obtain": c.want, "ttl:do": c.want, "ttl:own": time.Minute}
			for k, w := range want {
				if ttls[k] != w {
					t.Errorf("the TTL of %s = %v, want %v", k, ttls[k], w)
				}
			}
		})
	}
}
