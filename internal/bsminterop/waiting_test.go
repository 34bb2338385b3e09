package bsminterop_test

import (
	"context"
	"testing"
	"time"

	"github.com/bsm/redislock"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/reach"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/internal/testing/waittest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestForeignClientsBargeIn: bsm/redislock and a polling Locker
// (lock.WithPolling) ignore the queue and barge in; waiters by
// notification contend with them on one key. No two holders of any kind
// overlap, and every waiter obtains the lock as often as it asked: the
// queue only withholds grants from locksmith's own waiters, and a head
// that a barging holder keeps waiting tries again on its timer. It is one
// of the failure cases of waiting by notification, beside those of
// package single's waiting_failure_test.go, and is bounded as they are.
func TestForeignClientsBargeIn(t *testing.T) {
	const times = 20
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang detector, far beyond the bounds
	defer cancel()
	key := conformance.Key(t)

	// notified returns a Locker like another process's, over a go-redis
	// client of its own, whose waiters do not wake on their subscription's
	// confirmation (waittest.MessagesOnly).
	notified := func() *lock.Locker {
		l, err := single.New(goredis.New(redistest.GoRedis(t, srv.Addr, 3)))
		if err != nil {
			t.Fatalf("single.New: %v", err)
		}
		return lock.New(waittest.MessagesOnly(reach.Strategy(l)))
	}
	polling, err := single.New(redigo.New(redistest.Redigo(t, srv.Addr)))
	if err != nil {
		t.Fatal(err)
	}
	retry := lock.WithRetry(lock.Exponential(time.Millisecond, 20*time.Millisecond))
	cs := []*waittest.Contender{
		{L: notified(), Opts: []lock.Option{retry}},
		{L: notified(), Opts: []lock.Option{retry}},
		{L: notified(), Opts: []lock.Option{retry}},
		{L: polling, Opts: []lock.Option{retry, lock.WithPolling()}},
	}
	var det conformance.Detector
	bsm := redislock.New(redistest.GoRedis(t, srv.Addr, 3))
	bsmDone := make(chan error, 1)
	go func() {
		for range times {
			bl, err := bsm.Obtain(ctx, key, 10*time.Second, &redislock.Options{RetryStrategy: redislock.ExponentialBackoff(time.Millisecond, 20*time.Millisecond)})
			if err != nil {
				bsmDone <- err
				return
			}
			det.Hold(time.Millisecond)
			if err := bl.Release(ctx); err != nil {
				bsmDone <- err
				return
			}
		}
		bsmDone <- nil
	}()
	waittest.Contend(t, ctx, key, &det, times, cs...)
	if err := <-bsmDone; err != nil {
		t.Errorf("bsm/redislock: %v, want %d acquisitions", err, times)
	}
	if got, want := det.Entries(), int64(times*(len(cs)+1)); got != want {
		t.Errorf("acquisitions = %d, want %d", got, want)
	}
	for i, c := range cs[:3] {
		t.Logf("waiter %d: %v", i, &c.Rec)
	}
	q, _ := cas.NewQueue(key, false)
	if n, err := srv.Command(ctx, "EXISTS", q.Q, q.W); err != nil || n != "0" {
		t.Errorf("queue keys left: EXISTS %s %s = %s, %v; want 0", q.Q, q.W, n, err)
	}
}
