package goredis_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestRunDriver runs the driver suite over every kind of go-redis
// UniversalClient, against real servers.
func TestRunDriver(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	for _, c := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"Client-RESP2", func(t *testing.T) redis.UniversalClient { return redistest.GoRedis(t, srv.Addr, 2) }},
		{"Client-RESP3", func(t *testing.T) redis.UniversalClient { return redistest.GoRedis(t, srv.Addr, 3) }},
		{"ClusterClient", func(t *testing.T) redis.UniversalClient {
			return redistest.GoRedisCluster(t, redistest.StartCluster(t, 3).Addrs())
		}},
		{"FailoverClient", func(t *testing.T) redis.UniversalClient {
			sentinel := redistest.StartSentinel(t, srv)
			c := redis.NewFailoverClient(&redis.FailoverOptions{
				MasterName: redistest.MasterName, SentinelAddrs: []string{sentinel.Addr}, ContextTimeoutEnabled: true,
			})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{"Ring", func(t *testing.T) redis.UniversalClient {
			c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"shard": srv.Addr}, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{"Ring-two-shards", func(t *testing.T) redis.UniversalClient {
			c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr, "b": redistest.Start(t, 1)[0].Addr}, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := c.client(t)
			conformance.RunDriver(t, func(t *testing.T) driver.Conn { return goredis.New(client) })
		})
	}
}

// TestRefusedClients: New refuses a nil client, and one whose options let a
// command outlive its context's deadline, with an error that names the
// option. The strategy constructors report it in an *lock.ArgumentError,
// and the Conn's commands return it without talking to Redis
// (or panicking).
func TestRefusedClients(t *testing.T) {
	const unreachable = "127.0.0.1:1" // never dialled: the Conn refuses first
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		reason string
	}{
		{"nil", nil, "client must not be nil"},
		{"nil *redis.Client", (*redis.Client)(nil), "client must not be a nil *redis.Client"},
		{"nil *redis.ClusterClient", (*redis.ClusterClient)(nil), "client must not be a nil *redis.ClusterClient"},
		{"nil *redis.Ring", (*redis.Ring)(nil), "client must not be a nil *redis.Ring"},
		{"Client without ContextTimeoutEnabled", redis.NewClient(&redis.Options{Addr: unreachable}),
			"redis.Options.ContextTimeoutEnabled must be true"},
		{"Client with ReadTimeout -2", redis.NewClient(&redis.Options{Addr: unreachable, ContextTimeoutEnabled: true, ReadTimeout: -2}),
			"redis.Options.ReadTimeout must not be -2"},
		{"Client with WriteTimeout -2", redis.NewClient(&redis.Options{Addr: unreachable, ContextTimeoutEnabled: true, WriteTimeout: -2}),
			"redis.Options.WriteTimeout must not be -2"},
		{"FailoverClient without ContextTimeoutEnabled", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{unreachable}}),
			"redis.FailoverOptions.ContextTimeoutEnabled must be true"},
		{"ClusterClient without ContextTimeoutEnabled", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{unreachable}}),
			"redis.ClusterOptions.ContextTimeoutEnabled must be true"},
		{"ClusterClient with ReadTimeout -2", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{unreachable}, ContextTimeoutEnabled: true, ReadTimeout: -2}),
			"redis.ClusterOptions.ReadTimeout must not be -2"},
		{"Ring without ContextTimeoutEnabled", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": unreachable}}),
			"redis.RingOptions.ContextTimeoutEnabled must be true"},
		{"Ring with WriteTimeout -2", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": unreachable}, ContextTimeoutEnabled: true, WriteTimeout: -2}),
			"redis.RingOptions.WriteTimeout must not be -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.client != nil && !reflect.ValueOf(tc.client).IsNil() {
				defer tc.client.Close()
			}
			conn := goredis.New(tc.client)
			want := "goredis: " + tc.reason
			if err := conn.Validate(); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Validate = %v, want %s...", err, want)
			}
			l, err := single.New(conn)
			var ae *lock.ArgumentError
			if l != nil || !errors.As(err, &ae) || !strings.Contains(err.Error(), conn.Validate().Error()) {
				t.Fatalf("single.New = %v, %v; want nil and an *lock.ArgumentError that says %v", l, err, conn.Validate())
			}
			t.Log(err)
			if _, _, err := conn.Get(context.Background(), "k"); err != conn.Validate() {
				t.Errorf("Get = %v, want Validate's error %v", err, conn.Validate())
			}
			if addr := conn.Addr(); addr != "" {
				t.Errorf("Addr() = %q, want \"\"", addr)
			}
		})
	}
}

// TestAcceptedClients: timeouts of -1 (none of the client's own) leave the
// context to bound each command; another UniversalClient cannot be checked,
// and is accepted.
func TestAcceptedClients(t *testing.T) {
	const unreachable = "127.0.0.1:1"
	type wrapper struct{ *redis.Client } // a UniversalClient that is none of go-redis's
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
	}{
		{"Client with defaults", redis.NewClient(&redis.Options{Addr: unreachable, ContextTimeoutEnabled: true})},
		{"Client with timeouts -1", redis.NewClient(&redis.Options{Addr: unreachable, ContextTimeoutEnabled: true, ReadTimeout: -1, WriteTimeout: -1})},
		{"ClusterClient with timeouts -1", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{unreachable}, ContextTimeoutEnabled: true, ReadTimeout: -1, WriteTimeout: -1})},
		{"Ring with timeouts -1", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": unreachable}, ContextTimeoutEnabled: true, ReadTimeout: -1, WriteTimeout: -1})},
		{"another implementation", wrapper{redis.NewClient(&redis.Options{Addr: unreachable})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.client.Close()
			if err := driver.Check(goredis.New(tc.client)); err != nil {
				t.Errorf("driver.Check = %v, want nil", err)
			}
		})
	}
}

// BenchmarkAwait measures what watching a command's cancellation costs (a
// goroutine per command whose context can be cancelled and has no
// deadline): a GET with a context that cannot end, with one that has a
// deadline, and with one that can only be cancelled, from one goroutine and
// from several.
func BenchmarkAwait(b *testing.B) {
	srv := redistest.Start(b, 1)[0]
	conn := goredis.New(redistest.GoRedis(b, srv.Addr, 3))
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"Background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"WithTimeout", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Minute)
		}},
		{"WithCancel", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	} {
		ctx, cancel := c.ctx()
		defer cancel()
		get := func(b *testing.B) {
			if _, _, err := conn.Get(ctx, "k"); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				get(b)
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					get(b)
				}
			})
		})
	}
}

// TestRingLockOfSeveralKeys: over a Ring of two shards, a lock of several
// keys with one hash tag is taken and released, and one whose keys have no
// common tag is refused with goredis's error that says they need one,
// before anything is sent: the Ring would run its script on the first
// key's shard alone, where a single-key lock of another of its keys does
// not look.
func TestRingLockOfSeveralKeys(t *testing.T) {
	servers := redistest.Start(t, 2)
	ring := redistest.GoRedisRing(t, servers[0].Addr, servers[1].Addr)
	l, err := single.New(goredis.New(ring))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Run("one hash tag", func(t *testing.T) {
		lk, err := l.ObtainMany(ctx, []string{"{ring}:a", "{ring}:b", "{ring}:c"}, time.Minute)
		if err != nil {
			t.Fatalf("ObtainMany = %v, want the lock", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release = %v, want nil", err)
		}
	})
	t.Run("no common hash tag", func(t *testing.T) {
		keys := make([]string, 20) // over two shards, surely
		for i := range keys {
			keys[i] = "ring-key-" + strings.Repeat("x", i)
		}
		_, err := l.ObtainMany(ctx, keys, time.Minute)
		if err == nil || !strings.Contains(err.Error(), "goredis: keys of one lock need one hash tag over a *redis.Ring") {
			t.Fatalf("ObtainMany of keys on two shards = %v, want goredis's refusal of keys without one hash tag", err)
		}
		for _, k := range keys {
			if n, _ := ring.Exists(ctx, k).Result(); n != 0 {
				t.Errorf("key %q exists after the refusal, want none written", k)
			}
		}
	})
}
