package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestChecksOnARealRun: the checks read the history of clients that take
// turns on a key of a real server through single, with fencing, write to a
// FencedRegister and a Counter while they hold it, and sometimes stop for
// longer than the TTL, as a holder paused by its garbage collector or its
// machine does. They find nothing where the lock excludes, and what such a
// pause does where it does not.
func TestChecksOnARealRun(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	l, err := single.New(goredis.New(redistest.GoRedis(t, srv.Addr, 3)))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("holds within the TTL: no overlap, no stale write, no update lost", func(t *testing.T) {
		// A TTL far above the holds of 2 ms, so that a loaded machine's
		// stall does not make a holder outlast it.
		r := run(t, l, 4, 2*time.Second, 5*time.Second, func(int, int) time.Duration { return 2 * time.Millisecond }, lock.WithFencing())
		t.Log(r)
		if r.Holds < 8 {
			t.Fatalf("holds: got %d, want at least 8", r.Holds)
		}
		if r.RawOverlaps != 0 || r.ValidityOverlaps != 0 || r.FencesIssuedTwice != 0 || r.FencesOutOfOrder != 0 {
			t.Errorf("got %v, want nothing found", r)
		}
		if r.writes.Stale != 0 || r.writes.Collisions != 0 || r.lost != 0 {
			t.Errorf("register %+v and %d updates lost, want no stale write, no collision, nothing lost", r.writes, r.lost)
		}
	})
	t.Run("a holder paused past the TTL: raw overlaps, none within validity, its writes refused or lost", func(t *testing.T) {
		// Client 0 stops for 2.5 TTLs in each of its first three holds.
		const ttl = 300 * time.Millisecond
		hold := func(client, n int) time.Duration {
			if client == 0 && n < 3 {
				return 5 * ttl / 2
			}
			return 2 * time.Millisecond
		}
		r := run(t, l, 4, 3*time.Second, ttl, hold, lock.WithFencing())
		t.Log(r)
		if r.RawOverlaps == 0 {
			t.Errorf("raw overlaps: got 0, want some: the paused holder released after others obtained")
		}
		if r.ValidityOverlaps != 0 || r.FencesIssuedTwice != 0 || r.FencesOutOfOrder != 0 {
			t.Errorf("got %v, want no validity overlap and fences in order", r)
		}
		if r.writes.Stale == 0 || r.writes.Collisions != 0 {
			t.Errorf("register %+v, want the paused holder's stale writes refused, and no collision", r.writes)
		}
		if r.lost == 0 {
			t.Errorf("updates lost: got 0, want some: the lock alone cannot guard the counter from a paused holder")
		}
	})
}

// run has clients holders take turns on one key for d, each hold obtained
// through l with a TTL of ttl and opts, lasting hold(client, n) for the
// client's nth hold, between a read of a Counter and its write of one more,
// and ended, when the lock has a fencing token (lock.WithFencing), by a
// write to a FencedRegister; and returns what Check found in
// their history, the register's writes and the updates lost. An Obtain
// that gets no answer within a second, as under a partition, is tried
// again.
func run(t *testing.T, l *lock.Locker, clients int, d, ttl time.Duration, hold func(client, n int) time.Duration, opts ...lock.Option) result {
	t.Helper()
	key := fmt.Sprintf("jepsen:%s:%d", t.Name(), time.Now().UnixNano())
	start := time.Now()
	since := func(tm time.Time) int64 { return int64(tm.Sub(start)) }
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		reg     FencedRegister
		counter Counter
		mu      sync.Mutex
		holds   []Hold
		wg      sync.WaitGroup
		unseen  atomic.Int64 // Obtains that got no answer in time
	)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprint("client-", c)
			for n := 0; ; n++ {
				h := Hold{Key: key, Holder: holder, Invoked: since(time.Now())}
				// Each Obtain and Release has a second, as a client's
				// request would: a partition then ends it.
				attempt, cancel := context.WithTimeout(ctx, time.Second)
				lk, err := l.Obtain(attempt, key, ttl, append([]lock.Option{lock.WithRetry(lock.Linear(5 * time.Millisecond))}, opts...)...)
				cancel()
				if ctx.Err() != nil {
					if err == nil {
						release(lk)
					}
					return
				}
				if errors.Is(err, lock.ErrNoAnswer) || errors.Is(err, context.DeadlineExceeded) { // a fault at work: try again
					unseen.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Errorf("%s: Obtain = %v, want a lock or ErrNoAnswer", holder, err)
					return
				}
				h.Obtained, h.ValidUntil = since(time.Now()), since(lk.ValidUntil())
				h.Fence, _ = lk.Fence()
				v := counter.Read()
				time.Sleep(hold(c, n))
				counter.Write(v + 1)
				if h.Fence != 0 {
					reg.Write(key, holder, h.Fence)
				}
				h.Released = since(time.Now())
				if err := release(lk); err != nil && !errors.Is(err, lock.ErrNotHeld) && !errors.Is(err, lock.ErrNoAnswer) {
					t.Errorf("%s: Release = %v, want nil, ErrNotHeld or ErrNoAnswer", holder, err)
				}
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return result{Check(holds), reg.Writes(), counter.LostUpdates(), int(unseen.Load()), holds, start}
}

// result is what run found.
type result struct {
	Report
	writes   Writes
	lost     int    // updates of the counter lost
	noAnswer int    // Obtains that got no answer in time
	holds    []Hold // the history
	start    time.Time
}

// after returns how many holds were obtained after tm.
func (r result) after(tm time.Time) int {
	n := 0
	for _, h := range r.holds {
		if h.Obtained > int64(tm.Sub(r.start)) {
			n++
		}
	}
	return n
}

func (r result) String() string {
	return fmt.Sprintf("%v; register %+v; %d updates lost; %d Obtains without an answer", r.Report, r.writes, r.lost, r.noAnswer)
}
