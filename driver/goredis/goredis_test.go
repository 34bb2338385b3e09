package goredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/redistest"
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
	} {
		t.Run(c.name, func(t *testing.T) {
			client := c.client(t)
			conformance.RunDriver(t, func(t *testing.T) driver.Conn { return goredis.New(client) })
		})
	}
}

func TestNew(t *testing.T) {
	t.Run("a nil client gives a nil Conn that strategies reject", func(t *testing.T) {
		if c := goredis.New(nil); c != nil {
			t.Fatalf("New(nil) = %v, want nil", c)
		}
		_, err := single.New(goredis.New(nil))
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "conn" {
			t.Errorf("single.New(goredis.New(nil)) = %v, want an ArgumentError naming conn", err)
		}
	})
	t.Run("Client returns the wrapped client", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		defer c.Close()
		if got := goredis.New(c).Client(); got != c {
			t.Errorf("Client() = %p, want %p", got, c)
		}
	})
}

// TestContextDeadline: with ContextTimeoutEnabled (which the package doc
// asks for), a command to a paused server ends at the context's deadline.
func TestContextDeadline(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	c := goredis.New(redistest.GoRedis(t, srv.Addr, 3))
	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := c.Get(ctx, "k"); err == nil {
		t.Fatalf("Get on a paused server = nil error, want a timeout")
	}
}
