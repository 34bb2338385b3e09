package single_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// scriptCalls returns how many scripts (EVALSHA and EVAL) srv has run.
func scriptCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	stats, err := srv.Command(context.Background(), "INFO", "commandstats")
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`cmdstat_(?:evalsha|eval):calls=(\d+)`).FindAllStringSubmatch(stats, -1) {
		c, _ := strconv.Atoi(m[1])
		n += c
	}
	return n
}

// refreshers returns how many goroutines of the process run a lock's own
// auto-refresh loop, which batched locks do without.
func refreshers(t *testing.T) int {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	return strings.Count(b.String(), "lock.(*Lock).refresh(")
}

// holdMany obtains n locks through l for ttl, with opts, and starts
// refreshing each.
func holdMany(t *testing.T, ctx context.Context, l lock.Locker, n int, ttl time.Duration, opts ...lock.Option) []*lock.Lock {
	t.Helper()
	prefix := conformance.Key(t)
	locks := make([]*lock.Lock, n)
	for i := range locks {
		lk, err := l.Obtain(ctx, fmt.Sprintf("%s:%d", prefix, i), ttl, opts...)
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		t.Cleanup(func() { _ = lk.Release(context.Background()) })
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatalf("StartRefresh = %v, want nil", err)
		}
		locks[i] = lk
	}
	return locks
}

// TestBatchedRefresh: the auto-refreshed locks of one Locker are refreshed
// together, by scripts that each carry many of them, without a goroutine
// per lock (none runs Lock.refresh, the loop of a lock refreshed on its
// own). Unbatched, 300 locks refreshed every 200ms would cost 1,800
// scripts in 1.2 s, and 300 goroutines.
func TestBatchedRefresh(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	l, err := single.New(goredis.New(redistest.GoRedis(t, srv.Addr, 3)))
	if err != nil {
		t.Fatal(err)
	}
	const n, ttl = 300, 2 * time.Second
	locks := holdMany(t, ctx, l, n, ttl, lock.WithRefreshFraction(0.1))
	before := scriptCalls(t, srv)
	time.Sleep(1200 * time.Millisecond)
	if got := refreshers(t); got != 0 {
		t.Errorf("goroutines refreshing a lock of their own while %d locks are refreshed = %d, want 0", n, got)
	}
	scripts := scriptCalls(t, srv) - before - 1 // INFO's own call is not a script
	lapsed := 0
	for i, lk := range locks {
		switch err := lk.Err(); {
		case errors.Is(err, lock.ErrLapsed):
			lapsed++ // a stalled machine
		case err != nil:
			t.Errorf("lock %d: Err() = %v, want nil", i, err)
		}
	}
	t.Logf("%d locks refreshed every 200ms for 1.2s: %d scripts, %d lapsed", n, scripts, lapsed)
	if scripts >= n {
		t.Errorf("scripts run to refresh %d locks for 1.2s, every 200ms = %d, want fewer than one per lock", n, scripts)
	}
}

// TestBatchedRefreshServerPaused: while the server is paused, every lock
// of a batch lapses (ErrLapsed) by its validity, which ends before the
// server's expiry of its key, and is never reported lost otherwise; no
// key remains once the server resumes; and the Locker goes on refreshing
// the locks obtained after.
func TestBatchedRefreshServerPaused(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	conn := goredis.New(redistest.GoRedis(t, srv.Addr, 3))
	l, err := single.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	const n, ttl = 100, time.Second
	locks := holdMany(t, ctx, l, n, ttl)
	time.Sleep(ttl / 2)
	srv.Pause()
	for i, lk := range locks {
		select {
		case <-lk.Done():
		case <-time.After(30 * time.Second):
			srv.Resume()
			t.Fatalf("lock %d: Done not closed 30s into the pause, want closed by its validity", i)
		}
		if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) {
			t.Errorf("lock %d: Err() during the pause = %v, want ErrLapsed", i, err)
		}
	}
	time.Sleep(ttl) // past the server's expiry of every key
	srv.Resume()
	for i, lk := range locks {
		if _, ok, err := conn.Get(ctx, lk.Key()); ok || err != nil {
			t.Errorf("lock %d: key after the pause: exists = %v (%v), want gone", i, ok, err)
		}
	}
	after := holdMany(t, ctx, l, 10, ttl)
	time.Sleep(2 * ttl)
	for i, lk := range after {
		if err := lk.Err(); err != nil && !errors.Is(err, lock.ErrLapsed) {
			t.Errorf("lock %d obtained after the pause: Err() = %v, want nil", i, err)
		}
	}
}

// TestTenThousandHeldLocks: a Locker holding 10,000 locks, refreshed in the
// background, for a minute while the process's CPUs are kept busy. How
// many it loses depends on the machine, and is logged (on a machine at
// load 8, all of them: a round that cannot finish in time lapses every
// lock it carries). What holds whatever the load is that each lock is
// either held, its key holding its token, or lost by its own cause
// (ErrLapsed, or ErrExpired when a refresh found its key gone), with Done
// closed, and that cause reported once by its Ended hooks. With
// LOCKSMITH_FULL=1 and the race detector only, as CI's first run has
// them: its later runs, on other servers and without the race detector,
// would repeat a minute whose schedule is the client's.
func TestTenThousandHeldLocks(t *testing.T) {
	redistest.RequireFull(t, "holding 10,000 locks for a minute")
	if !race {
		t.Skip("holding 10,000 locks for a minute runs under the race detector only (go test -race), as CI's first run")
	}
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	conn := goredis.New(redistest.GoRedis(t, srv.Addr, 3))
	l, err := single.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ended := map[string]int{}
	hooks := lock.WithHooks(&lock.Hooks{Ended: func(e lock.Event) {
		mu.Lock()
		ended[e.Key]++
		mu.Unlock()
	}})
	locks := holdMany(t, ctx, l, 10_000, 3*time.Second, hooks)
	var stop atomic.Bool
	for range runtime.GOMAXPROCS(0) { // the CPU hog: a busy loop per core
		go func() {
			for !stop.Load() {
			}
		}()
	}
	time.Sleep(time.Minute)
	stop.Store(true)
	lapsed, expired := 0, 0
	for i, lk := range locks {
		err := lk.Err()
		mu.Lock()
		reported := ended[lk.Key()]
		mu.Unlock()
		if closed := isClosed(lk.Done()); closed != (err != nil) {
			t.Errorf("lock %d: Done closed = %v with Err() = %v, want closed exactly when Err is not nil", i, closed, err)
		}
		switch {
		case err == nil:
			if v, ok, err := conn.Get(ctx, lk.Key()); !ok || err != nil || v != lk.Token() {
				t.Errorf("lock %d held: its key holds its token = %v (%v), want true", i, ok && v == lk.Token(), err)
			}
			if reported != 0 {
				t.Errorf("lock %d held: Ended hooks ran %d times, want 0", i, reported)
			}
		case errors.Is(err, lock.ErrLapsed) || errors.Is(err, lock.ErrExpired):
			if reported != 1 {
				t.Errorf("lock %d lost by %v: Ended hooks ran %d times, want once", i, err, reported)
			}
			if errors.Is(err, lock.ErrLapsed) {
				lapsed++
			} else {
				expired++
			}
		default:
			t.Errorf("lock %d lost: Err() = %v, want ErrLapsed or ErrExpired", i, err)
		}
	}
	t.Logf("locks lost in a minute under a CPU hog: %d of %d (%d lapsed, %d found expired)", lapsed+expired, len(locks), lapsed, expired)
}

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
