package goredis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// hang bounds the waits of these tests: a hang detector, not a timing.
const hang = 10 * time.Second

// TestClusterShardChannels: on a Redis Cluster of three masters, a session
// subscribes each shard channel on the master of its slot, and keeps
// following it when the slot moves.
func TestClusterShardChannels(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *redistest.Cluster, driver.Conn, []string)
	}{
		{"MessagesFromEveryMasterArrive", clusterEveryMaster},
		{"SubscriptionFollowsAMovedSlot", clusterSlotMoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := goredis.New(redistest.GoRedisCluster(t, cluster.Addrs()))
			tc.f(t, cluster, conn, channelPerMaster(t, cluster))
		})
	}
}

// channelPerMaster returns one channel for each master of c, in the order of
// c.Servers, each in a slot of that master.
func channelPerMaster(t *testing.T, c *redistest.Cluster) []string {
	channels := make([]string, len(c.Servers))
	found := 0
	for i := 0; found < len(channels); i++ {
		ch := fmt.Sprintf("{%s.%d}:wake", t.Name(), i)
		owner := c.Owner(t, c.KeySlot(t, ch))
		for j, s := range c.Servers {
			if s == owner && channels[j] == "" {
				channels[j] = ch
				found++
			}
		}
	}
	return channels
}

// spublish publishes payload on the shard channel, as a release does: from
// a script that names the channel as its key.
func spublish(t *testing.T, conn driver.Conn, channel, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	n, err := driver.NewScript("return redis.call('SPUBLISH', KEYS[1], ARGV[1])").Int(ctx, conn, []string{channel}, payload)
	if err != nil || n != 1 {
		t.Fatalf("SPUBLISH %q = %d, %v; want 1 subscriber, nil", channel, n, err)
	}
}

// wantWake fails t unless w wakes, for reason want.
func wantWake(t *testing.T, w *notify.Waiter, what string, want strategy.Wake) {
	t.Helper()
	select {
	case got := <-w.Wakes():
		if got != want {
			t.Errorf("wake-up of %s = %v, want %v", what, got, want)
		}
	case <-time.After(hang):
		t.Errorf("%s not woken within %v, want %v", what, hang, want)
	}
}

// subscribers returns the number of subscribers of a shard channel on s.
func subscribers(t *testing.T, s *redistest.Server, channel string) string {
	t.Helper()
	return pubsubCount(t, s, "SHARDNUMSUB", channel)
}

// numsub returns the number of subscribers of a classic channel on s.
func numsub(t *testing.T, s *redistest.Server, channel string) string {
	t.Helper()
	return pubsubCount(t, s, "NUMSUB", channel)
}

// pubsubCount returns the reply of PUBSUB sub channel on s: a count.
func pubsubCount(t *testing.T, s *redistest.Server, sub, channel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	reply, err := s.Command(ctx, "PUBSUB", sub, channel)
	if err != nil {
		t.Fatalf("PUBSUB %s on %s: %v", sub, s.Addr, err)
	}
	return reply[len(channel)+1:]
}

// listen makes a waiter listen to each channel, closed when t ends, and
// waits for their subscriptions.
func listen(t *testing.T, conn driver.Conn, channels []string) []*notify.Waiter {
	t.Helper()
	waiters := make([]*notify.Waiter, len(channels))
	for i, ch := range channels {
		waiters[i] = notify.Listen([]driver.Conn{conn}, ch, "w"+ch)
		t.Cleanup(waiters[i].Close)
	}
	for i, w := range waiters {
		wantWake(t, w, "the waiter of "+channels[i], strategy.WakeSubscribed)
	}
	return waiters
}

func clusterEveryMaster(t *testing.T, c *redistest.Cluster, conn driver.Conn, channels []string) {
	waiters := listen(t, conn, channels)
	for i, ch := range channels {
		if n := subscribers(t, c.Servers[i], ch); n != "1" {
			t.Errorf("subscribers of %q on the master of its slot = %s, want 1", ch, n)
		}
		spublish(t, conn, ch, "w"+ch)
		wantWake(t, waiters[i], "the waiter of "+ch, strategy.WakeMessage)
	}
}

func clusterSlotMoved(t *testing.T, c *redistest.Cluster, conn driver.Conn, channels []string) {
	redistest.RequireFull(t, "a Cluster slot move")
	waiters := listen(t, conn, channels)
	moved, to := channels[0], c.Servers[1]
	c.MoveSlot(t, c.KeySlot(t, moved), to)
	wantWake(t, waiters[0], "the waiter of the moved channel", strategy.WakeResubscribed)
	if n := subscribers(t, to, moved); n != "1" {
		t.Errorf("subscribers of %q on its slot's new master = %s, want 1", moved, n)
	}
	if n := subscribers(t, c.Servers[0], moved); n != "0" {
		t.Errorf("subscribers of %q on its slot's old master = %s, want 0", moved, n)
	}
	spublish(t, conn, moved, "w"+moved)
	wantWake(t, waiters[0], "the waiter of the moved channel", strategy.WakeMessage)
	for i, ch := range channels[1:] { // the others kept their subscriptions
		spublish(t, conn, ch, "w"+ch)
		wantWake(t, waiters[i+1], "the waiter of "+ch, strategy.WakeMessage)
	}
}

// TestClusterSingleWaitsForSPublish runs single end to end on a Redis
// Cluster: Lockers that each have their own ClusterClient contend on one
// key and wait by notification; no two ever hold the lock at once, every
// Obtain succeeds, and some waiter is woken by a message, which shows that
// the SPUBLISH of the queue scripts reaches the SSUBSCRIBE of the waiters.
func TestClusterSingleWaitsForSPublish(t *testing.T) {
	const (
		lockers      = 8
		acquisitions = 200
	)
	cluster := redistest.StartCluster(t, 3)
	key := "single-" + t.Name()
	var (
		claimed, inside, overlaps, done, messages atomic.Int64
		wg                                        sync.WaitGroup
	)
	hooks := lock.WithHooks(&lock.Hooks{Wait: func(_ context.Context, e lock.Event) {
		if e.Op == "woken" && e.Reason == strategy.WakeMessage.String() {
			messages.Add(1)
		}
	}})
	for i := range lockers {
		l, err := single.New(goredis.New(redistest.GoRedisCluster(t, cluster.Addrs())))
		if err != nil {
			t.Fatalf("single.New: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for claimed.Add(1) <= acquisitions {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				lk, err := l.Obtain(ctx, key, 10*time.Second, lock.WithRetry(lock.Linear(time.Second)), hooks)
				if err != nil {
					cancel()
					t.Errorf("locker %d: Obtain = %v, want a lock", i, err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				done.Add(1)
				if err := lk.Release(ctx); err != nil {
					t.Errorf("locker %d: Release = %v, want nil", i, err)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	if n := done.Load(); n != acquisitions {
		t.Errorf("acquisitions = %d, want %d", n, acquisitions)
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("acquisitions that overlapped another = %d, want 0", n)
	}
	t.Logf("acquisitions: %d, waiters woken by a message: %d", done.Load(), messages.Load())
	if messages.Load() == 0 {
		t.Errorf("waiters woken by a message = 0, want at least 1")
	}
}
