package single_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
	"github.com/redis/go-redis/v9"
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
// refreshing each, eight at a time; they are released when the test ends.
// A lock that lapsed before its refreshes started is in the list, lapsed.
func holdMany(t *testing.T, ctx context.Context, l *lock.Locker, n int, ttl time.Duration, opts ...lock.Option) []*lock.Lock {
	t.Helper()
	prefix := conformance.Key(t)
	locks := make([]*lock.Lock, n)
	eachOf(locks, func(i int) {
		lk, err := l.Obtain(ctx, fmt.Sprintf("%s:%d", prefix, i), ttl, opts...)
		if err != nil {
			t.Errorf("Obtain = %v, want a lock", err)
			return
		}
		// A lock whose validity ended before its refreshes started (a
		// stall between the two, seen under the soak's CPU hog) stays in
		// the list, lapsed: the callers take ErrLapsed as a stalled machine.
		if err := lk.StartRefresh(ctx); err != nil && !errors.Is(err, lock.ErrLapsed) {
			t.Errorf("StartRefresh = %v, want nil", err)
		}
		locks[i] = lk
	})
	t.Cleanup(func() {
		eachOf(locks, func(i int) { _ = locks[i].Release(context.Background()) })
	})
	if t.Failed() {
		t.FailNow()
	}
	return locks
}

// eachOf calls f with each index of locks, eight at a time.
func eachOf(locks []*lock.Lock, f func(i int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(locks); i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
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
// background, for a minute while the process runs two busy loops beyond
// its cores. How many it loses depends on the machine, and is logged (here,
// 0: one batch of every lock due, with one deadline, lost all 10,000);
// what holds whatever the load is, holdUnderLoad checks. With LOCKSMITH_FULL=1 and the race
// detector and alone on the machine only (LOCKSMITH_ALONE=1 go test -race
// -run TestTenThousandHeldLocks ./strategy/single/, by hand: its hog,
// beside the other packages' tests in CI's run under the race detector,
// starved Redlock's node timeouts there), and CI's step of timing tests
// runs without the race detector: TestHeldLocksUnderLoad measures the same
// without it.
func TestTenThousandHeldLocks(t *testing.T) {
	redistest.RequireAlone(t, "holding 10,000 locks for a minute under a CPU hog")
	if !race {
		t.Skip("holding 10,000 locks for a minute runs under the race detector only (go test -race)")
	}
	srv := redistest.Start(t, 1)[0]
	conn := goredis.New(redistest.GoRedis(t, srv.Addr, 3))
	l, err := single.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	lost, n := holdUnderLoad(t, conn, l, 10_000, 3*time.Second, runtime.GOMAXPROCS(0)+2, time.Minute)
	t.Logf("locks lost in a minute under a CPU hog: %d of %d", lost, n)
}

// TestHeldLocksUnderLoad measures how many of 10,000 auto-refreshed locks
// (TTL 3 s) a Locker loses in 10 s while the process runs 1, 2 and 4 busy
// loops beyond its cores, refreshed in batches and by a goroutine per
// lock (the strategy with its strategy.Batcher hidden). The figures depend
// on the machine, and are logged; what holds whatever the load is,
// holdUnderLoad checks. Without the race detector, whose cost is not what
// production pays: TestTenThousandHeldLocks runs under it. Alone on the
// machine, as its busy loops would starve the other packages' tests.
func TestHeldLocksUnderLoad(t *testing.T) {
	redistest.RequireAlone(t, "holding 10,000 locks under load, six times")
	if race {
		t.Skip("the figures are those of a program built without the race detector")
	}
	srv := redistest.Start(t, 1)[0]
	conn := goredis.New(redistest.GoRedis(t, srv.Addr, 3))
	s, err := single.NewStrategy(conn)
	if err != nil {
		t.Fatal(err)
	}
	lockers := []struct {
		name string
		l    *lock.Locker
	}{
		{"batched", lock.New(s)},
		{"a goroutine per lock", lock.New(struct{ strategy.Strategy }{s})},
	}
	for _, extra := range []int{1, 2, 4} {
		for _, c := range lockers {
			t.Run(fmt.Sprintf("%s, %d busy loops beyond the cores", c.name, extra), func(t *testing.T) {
				lost, n := holdUnderLoad(t, conn, c.l, 10_000, 3*time.Second, runtime.GOMAXPROCS(0)+extra, 10*time.Second)
				t.Logf("locks lost in 10 s, %s, %d busy loops beyond the cores: %d of %d", c.name, extra, lost, n)
			})
		}
	}
}

// holdUnderLoad holds n locks of ttl through l, refreshed in the
// background, for d while loops busy loops run, and returns how many it
// lost. It checks what holds whatever the load is: each lock is either
// held, its key holding its token, or lost by its own cause (ErrLapsed, or
// ErrExpired when a refresh found its key gone), with Done closed, and
// that cause reported once by its Ended hooks.
func holdUnderLoad(t *testing.T, conn driver.Conn, l *lock.Locker, n int, ttl time.Duration, loops int, d time.Duration) (lost, of int) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	ended := map[string]int{}
	hooks := lock.WithHooks(&lock.Hooks{Ended: func(e lock.Event) {
		mu.Lock()
		ended[e.Key]++
		mu.Unlock()
	}})
	locks := holdMany(t, ctx, l, n, ttl, hooks)
	stop := hog(loops)
	time.Sleep(d)
	stop()
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
			if v, ok, err := conn.Get(ctx, lk.Key()); !ok || err != nil || redistest.Unstamped(v) != lk.Token() {
				t.Errorf("lock %d held: its key holds its token = %v (%v), want true", i, ok && redistest.Unstamped(v) == lk.Token(), err)
			}
			if reported != 0 {
				t.Errorf("lock %d held: Ended hooks ran %d times, want 0", i, reported)
			}
		case errors.Is(err, lock.ErrLapsed) || errors.Is(err, lock.ErrExpired):
			if reported != 1 {
				t.Errorf("lock %d lost by %v: Ended hooks ran %d times, want once", i, err, reported)
			}
			lost++
		default:
			t.Errorf("lock %d lost: Err() = %v, want ErrLapsed or ErrExpired", i, err)
		}
	}
	return lost, n
}

// hog keeps loops goroutines busy, as a CPU-bound part of the process
// would, until the function it returns is called.
func hog(loops int) (stop func()) {
	var done atomic.Bool
	for range loops {
		go func() {
			for !done.Load() {
			}
		}()
	}
	return func() { done.Store(true) }
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

// TestLapseBurstSignalledBeforeExpiry: 2,000 auto-refreshed locks, cut
// off from their server together, lapse together, and each lock's loss is
// signalled (its Ended hooks, then Done) before the server's expiry of its
// key (PEXPIRETIME, read once the cut holds), and before the earliest
// moment the server could have let it go, the send of the refresh that set
// that expiry plus the TTL, under a CPU hog (a busy loop per core), in each
// of 20 runs. The allowance that a batch's validity
// leaves for it must cover the work of signalling them all. Without the
// race detector, which multiplies that work by ten or more (2,000 lapses
// took 140 to 380 ms under it, against 6 to 8 ms), and which the
// allowance is not sized for: a program built with it is not one that
// production runs. Alone on the machine (LOCKSMITH_ALONE=1): beside the
// other packages' tests, at a load of 9 to 12 on two cores, signalling
// the 2,000 took up to 360 ms, which no allowance of a sane size covers.
func TestLapseBurstSignalledBeforeExpiry(t *testing.T) {
	redistest.RequireAlone(t, "2,000 locks lapsing together, 20 times, under a CPU hog")
	if race {
		t.Skip("the allowance for signalling lapses is sized for a program built without the race detector")
	}
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	proxy := srv.Proxy(t)
	client := redistest.GoRedis(t, proxy.Addr, 3)
	sends := &sendTimes{}
	client.AddHook(sends)
	l, err := single.New(goredis.New(client))
	if err != nil {
		t.Fatal(err)
	}
	direct := redistest.GoRedis(t, srv.Addr, 3)
	const n, ttl, runs = 2000, time.Second, 20
	margin := time.Hour // the least, over every lock of every run, of its key's expiry less its Done's closing
	strict := time.Hour // the same, of the refresh's send plus the TTL
	for run := range runs {
		sends.reset(conformance.Key(t))
		// The Ended hooks run on the goroutine that ends the lock, just
		// before it closes Done: the time they note is that of the signal,
		// not of when a waiting goroutine got to run.
		signalled := make([]time.Time, n)
		hooks := lock.WithHooks(&lock.Hooks{Ended: func(e lock.Event) {
			i, _ := strconv.Atoi(e.Key[strings.LastIndexByte(e.Key, ':')+1:]) // holdMany's keys end in :i
			signalled[i] = time.Now()
		}})
		locks := holdMany(t, ctx, l, n, ttl, hooks)
		stop := hog(runtime.GOMAXPROCS(0))
		time.Sleep(ttl / 2)
		proxy.Cut()
		time.Sleep(50 * time.Millisecond) // what was on its way has landed
		expiry, valid := make([]time.Time, n), make([]time.Time, n)
		for i, lk := range locks {
			valid[i] = lk.ValidUntil()
		}
		cmds, err := direct.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, lk := range locks {
				p.PExpireTime(ctx, lk.Key())
			}
			return nil
		})
		if err != nil {
			t.Fatalf("PEXPIRETIME: %v", err)
		}
		for i, c := range cmds {
			expiry[i] = time.UnixMilli(int64(c.(*redis.DurationCmd).Val() / time.Millisecond))
		}
		for _, lk := range locks {
			<-lk.Done()
		}
		closed := signalled
		stop()
		proxy.Heal()
		var after []time.Duration
		for i := range locks {
			after = append(after, closed[i].Sub(valid[i]))
		}
		slices.Sort(after)
		t.Logf("run %d: signalled %v to %v after ValidUntil (median %v), which is %v before the key's expiry", run, after[0], after[n-1], after[n/2], expiry[0].Sub(valid[0]))
		late, lateStrict := 0, 0
		for i, lk := range locks {
			d := expiry[i].Sub(closed[i])
			margin = min(margin, d)
			if d <= 0 {
				late++
			}
			// The send that set the key's expiry is the last one whose send
			// plus the TTL is not after it (PEXPIRETIME is in milliseconds).
			sent, ok := sends.landed(lk.Key(), ttl, expiry[i].Add(time.Millisecond))
			if !ok {
				t.Fatalf("run %d: lock %d: no send of its key found before its expiry %v", run, i, expiry[i])
			}
			d = sent.Add(ttl).Sub(closed[i])
			strict = min(strict, d)
			if d <= 0 {
				lateStrict++
			}
		}
		if late > 0 {
			t.Errorf("run %d: locks whose Done closed after their key's expiry = %d of %d, want 0 (the latest by %v)", run, late, n, -margin)
		}
		if lateStrict > 0 {
			t.Errorf("run %d: locks whose Done closed after their last refresh's send plus the TTL = %d of %d, want 0 (the latest by %v)", run, lateStrict, n, -strict)
		}
		for _, lk := range locks {
			_ = lk.Release(ctx)
		}
	}
	t.Logf("%d runs of %d locks lapsing together: each Done closed at least %v before its key's expiry, and %v before its last refresh's send plus the TTL", runs, n, margin, strict)
}

// sendTimes is a go-redis hook that notes when each command naming a key
// was sent: each pipeline's and command's start, before the client writes
// it. The notes are of every argument that starts with a lock key prefix
// (see reset).
type sendTimes struct {
	mu     sync.Mutex
	prefix string
	sent   map[string][]time.Time
}

// reset forgets every note, and notes from then on the arguments that
// start with "conformance:" and the name of the test of key.
func (h *sendTimes) reset(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prefix = key[:strings.LastIndexByte(key, ':')+1]
	h.sent = map[string][]time.Time{}
}

func (h *sendTimes) note(cmds ...redis.Cmder) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		for _, a := range c.Args() {
			if k, ok := a.(string); ok && strings.HasPrefix(k, h.prefix) {
				h.sent[k] = append(h.sent[k], now)
			}
		}
	}
}

// landed returns the last send of key that, plus ttl, is not after expiry.
func (h *sendTimes) landed(key string, ttl time.Duration, expiry time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range slices.Backward(h.sent[key]) {
		if !s.Add(ttl).After(expiry) {
			return s, true
		}
	}
	return time.Time{}, false
}

func (h *sendTimes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sendTimes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}

func (h *sendTimes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.note(cmds...)
		return next(ctx, cmds)
	}
}
