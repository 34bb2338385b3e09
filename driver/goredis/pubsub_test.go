package goredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// TestSubscriberLiveness: a session pings a silent connection; a quiet one
// stays open, and one whose server stops answering ends.
func TestSubscriberLiveness(t *testing.T) {
	const ping = 300 * time.Millisecond
	goredis.SetPingEvery(t, ping)
	srv := redistest.Start(t, 1)[0]
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) {
			redistest.RunSubscriberLiveness(t, srv, goredis.New(redistest.GoRedis(t, srv.Addr, protocol)), ping)
		})
	}
}

// TestRingSubscribesOnTheShardOfEachChannel: over a *redis.Ring, a session
// subscribes each channel on the shard that holds its lock's key, where
// the lock's scripts publish.
func TestRingSubscribesOnTheShardOfEachChannel(t *testing.T) {
	servers := redistest.Start(t, 2)
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:                 map[string]string{"a": servers[0].Addr, "b": servers[1].Addr},
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = ring.Close() })
	conn := goredis.New(ring)
	// One channel on each shard.
	byShard := map[string]string{}
	for i := 0; len(byShard) < 2; i++ {
		ch := fmt.Sprintf("{%s.%d}:wake", t.Name(), i)
		shard, err := ring.GetShardClientForKey(ch)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byShard[shard.Options().Addr]; !ok {
			byShard[shard.Options().Addr] = ch
		}
	}
	channels := []string{byShard[servers[0].Addr], byShard[servers[1].Addr]}
	waiters := listen(t, conn, channels)
	for i, ch := range channels {
		if n := numsub(t, servers[i], ch); n != "1" {
			t.Errorf("subscribers of %q on its shard = %s, want 1", ch, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		_, err := driver.NewScript("return redis.call('PUBLISH', KEYS[1], ARGV[1])").Run(ctx, conn, []string{ch}, "w"+ch)
		cancel()
		if err != nil {
			t.Fatalf("PUBLISH %q: %v", ch, err)
		}
		wantWake(t, waiters[i], "the waiter of "+ch, strategy.WakeMessage)
	}
}
