package single_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// multiWaitSetup returns a Locker of single over go-redis that waits by
// notification, a client that reads the queues, and the keys of a set,
// {k}:a and {k}:b.
func multiWaitSetup(t *testing.T) (*lock.Locker, redis.UniversalClient, []string) {
	t.Helper()
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	l, err := single.New(goredis.New(redistest.GoRedis(t, addr, 3)))
	if err != nil {
		t.Fatal(err)
	}
	k := "{" + conformance.Key(t) + "}"
	return l, rdb, []string{k + ":a", k + ":b"}
}

// multiWaitSetups are the deployments of the waiting tests: one server,
// where a set's keys share a slot and one script takes them; and a
// Cluster, where they are in three slots on three masters, taken slot by
// slot, and keys[0] and keys[1] are the first two in that order.
var multiWaitSetups = []struct {
	name  string
	setup func(t *testing.T) (*lock.Locker, redis.UniversalClient, []string)
}{
	{"one slot", multiWaitSetup},
	{"three slots", func(t *testing.T) (*lock.Locker, redis.UniversalClient, []string) {
		cluster := redistest.StartCluster(t, 3)
		rdb := redistest.GoRedisCluster(t, cluster.Addrs())
		l, err := single.New(goredis.New(redistest.GoRedisCluster(t, cluster.Addrs())))
		if err != nil {
			t.Fatal(err)
		}
		keys := threeMasters(t, cluster, conformance.Key(t))
		slices.SortFunc(keys, func(a, b string) int { return cas.Slot(a) - cas.Slot(b) })
		return l, rdb, keys
	}},
}

// queueOf returns the name of key's wait queue.
func queueOf(key string) string {
	q, _ := cas.NewQueue(key, false)
	return q.Q
}

// waitRetry is the retry policy of the waiters of these tests: with
// notification, it is the head's timer.
var waitRetry = lock.WithRetry(lock.Linear(20 * time.Millisecond))

// TestMultiWaitIsFair: a waiter for {A, B} obtains them while other waiters
// take A and B in turn, each alone, without a pause: it queues at A, keeps
// its place at the head of A's queue once there, so that A's next taker
// waits behind it, queues at B, and takes both once B is released. A waiter
// that polled would find both free at once only by chance.
func TestMultiWaitIsFair(t *testing.T) {
	for _, c := range multiWaitSetups {
		t.Run(c.name, func(t *testing.T) { isFair(t, c.setup) })
	}
}

func isFair(t *testing.T, setup func(t *testing.T) (*lock.Locker, redis.UniversalClient, []string)) {
	l, _, keys := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	const cycles = 100 // each of the others' takes of its key, at most
	var done atomic.Bool
	var wg sync.WaitGroup
	taken := make([]atomic.Int64, len(keys))
	first := make(chan struct{}, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < cycles && !done.Load(); n++ {
				lk, err := l.Obtain(ctx, k, time.Minute, waitRetry)
				if err != nil {
					t.Errorf("Obtain(%q) = %v", k, err)
					return
				}
				if taken[i].Add(1) == 1 {
					first <- struct{}{}
				}
				time.Sleep(5 * time.Millisecond)
				_ = lk.Release(ctx)
			}
		}()
	}
	for range keys { // both keys are taken in turn already
		select {
		case <-first:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	lk, err := l.ObtainMany(ctx, keys, time.Minute, waitRetry)
	done.Store(true)
	if err != nil {
		t.Fatalf("ObtainMany = %v, want the lock", err)
	}
	a, b := taken[0].Load(), taken[1].Load()
	_ = lk.Release(ctx)
	wg.Wait()
	if a >= cycles || b >= cycles {
		t.Errorf("the others took A %d and B %d times before the waiter for both obtained them, want fewer than %d: it waited until they stopped", a, b, cycles)
	}
}

// TestMultiWaitKeepsItsPlace: a waiter for {A, B} that waits for B heads
// A's queue, so that a waiter for A alone that comes after it gets A only
// after it.
func TestMultiWaitKeepsItsPlace(t *testing.T) {
	for _, c := range multiWaitSetups {
		t.Run(c.name, func(t *testing.T) { keepsItsPlace(t, c.setup) })
	}
}

func keepsItsPlace(t *testing.T, setup func(t *testing.T) (*lock.Locker, redis.UniversalClient, []string)) {
	l, rdb, keys := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	holder, err := l.Obtain(ctx, keys[1], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	obtained := func(who string) {
		mu.Lock()
		order = append(order, who)
		mu.Unlock()
	}
	queued := func(c chan struct{}) lock.Option {
		return lock.WithHooks(&lock.Hooks{Wait: func(_ context.Context, e lock.Event) {
			if e.Op == "enqueued" {
				close(c)
			}
		}})
	}
	bothQueued, aQueued := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		lk, err := l.ObtainMany(ctx, keys, time.Minute, waitRetry, queued(bothQueued))
		if err != nil {
			t.Errorf("ObtainMany = %v, want the lock", err)
			return
		}
		obtained("both")
		_ = lk.Release(ctx)
	}()
	await(ctx, t, bothQueued, "the waiter for both queued")
	if n, _ := rdb.ZCard(ctx, queueOf(keys[0])).Result(); n != 1 {
		t.Errorf("waiters in A's queue = %d, want 1: the waiter for both heads it", n)
	}
	go func() {
		defer wg.Done()
		lk, err := l.Obtain(ctx, keys[0], time.Minute, waitRetry, queued(aQueued))
		if err != nil {
			t.Errorf("Obtain(A) = %v, want the lock", err)
			return
		}
		obtained("A")
		_ = lk.Release(ctx)
	}()
	await(ctx, t, aQueued, "the waiter for A queued") // A is free, yet its taker waits behind the waiter for both
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(order) != 2 || order[0] != "both" {
		t.Errorf("obtained in the order %q, want [both A]", order)
	}
}

// await waits for c to close, and fails t if ctx ends first.
func await(ctx context.Context, t *testing.T, c chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-ctx.Done():
		t.Fatalf("%s: never happened (%v)", what, ctx.Err())
	}
}

// TestMultiWaitLeavesTheQueues: a waiter for {A, B} that gives up (its
// context cancelled) leaves the queues of both keys.
func TestMultiWaitLeavesTheQueues(t *testing.T) {
	for _, c := range multiWaitSetups {
		t.Run(c.name, func(t *testing.T) { leavesTheQueues(t, c.setup) })
	}
}

func leavesTheQueues(t *testing.T, setup func(t *testing.T) (*lock.Locker, redis.UniversalClient, []string)) {
	l, rdb, keys := setup(t)
	ctx := context.Background()
	holder, err := l.Obtain(ctx, keys[1], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	waiting, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	giveUp := lock.WithHooks(&lock.Hooks{Wait: func(_ context.Context, e lock.Event) {
		if e.Op == "enqueued" {
			cancel()
		}
	}})
	if _, err := l.ObtainMany(waiting, keys, time.Minute, waitRetry, giveUp); !errors.Is(err, context.Canceled) {
		t.Fatalf("ObtainMany cancelled while queued = %v, want context.Canceled", err)
	}
	for _, k := range keys { // it leaves in the background
		q := queueOf(k)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			n, err := rdb.ZCard(ctx, q).Result()
			if n == 0 && err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("waiters in %s = %d (%v), want 0 once the waiter gave up", q, n, err)
				break
			}
		}
	}
}
