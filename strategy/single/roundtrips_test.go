package single_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestWithoutScriptsRoundTrips: over go-redis, which pipelines, on a
// server without DELEX and DELIFEQ (Redis 7.0, Valkey 8.1), a release
// without scripts is a transaction in two round trips (WATCH and GET;
// MULTI, DEL and EXEC), and Inspect a snapshot in one (MULTI, GET, PTTL,
// GET of the counter, EXEC), counted by a go-redis hook.
func TestWithoutScriptsRoundTrips(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	var trips atomic.Int64
	client := redistest.GoRedis(t, srv.Addr, 3)
	client.AddHook(tripHook{&trips})
	l, _ := noScriptLocker(t, goredis.New(client))
	key := conformance.Key(t)
	lk, err := l.Obtain(ctx, key, time.Minute) // opens the connections, and finds the server without DELEX
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	lk, err = l.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	for _, c := range []struct {
		name string
		op   func() error
		want int64
	}{
		{"Inspect", func() error { _, err := l.Inspect(ctx, key); return err }, 1},
		{"Release", func() error { return lk.Release(ctx) }, 2},
	} {
		trips.Store(0)
		if err := c.op(); err != nil {
			t.Fatalf("%s = %v, want nil", c.name, err)
		}
		if got := trips.Load(); got != c.want {
			t.Errorf("%s: got %d round trips, want %d", c.name, got, c.want)
		}
	}
}

// tripHook counts a go-redis client's round trips: a command, or a
// pipeline of several, but for a connection's handshake.
type tripHook struct{ trips *atomic.Int64 }

func (tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd.Name()) {
			h.trips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake(cmds[0].Name()) {
			h.trips.Add(1)
		}
		return next(ctx, cmds)
	}
}

// handshake reports whether cmd is one of a connection's handshake.
func handshake(cmd string) bool {
	switch strings.ToUpper(cmd) {
	case "HELLO", "CLIENT", "AUTH", "SELECT":
		return true
	}
	return false
}
