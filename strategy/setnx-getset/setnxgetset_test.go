package setnxgetset_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
	"github.com/locksmith-go/lock/strategy/single"
)

func newLocker(t testing.TB, c driver.Conn, opts ...setnxgetset.Option) *lock.Locker {
	t.Helper()
	l, err := setnxgetset.New(c, opts...)
	if err != nil {
		t.Fatalf("setnxgetset.New: %v", err)
	}
	return l
}

func TestConformance(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, real := redistest.Addr(t)
	matrix.Run(t, matrix.SetnxGetset(addr), matrix.AtOnce(real))
	t.Run("goredis-cluster", func(t *testing.T) {
		t.Parallel()
		conformance.Run(t, matrix.SetnxGetsetCluster(redistest.StartCluster(t, 3).Addrs()).Harness)
	})
}

func TestOptions(t *testing.T) {
	addr, _ := redistest.Addr(t)
	conn := goredis.New(redistest.GoRedis(t, addr, 3))
	for _, c := range []struct {
		name string
		opt  setnxgetset.Option
		arg  string
	}{
		{"nil format", setnxgetset.WithFormat(nil), "format"},
		{"negative safety TTL", setnxgetset.WithSafetyTTL(-time.Second), "safety TTL"},
		{"negative clock skew", setnxgetset.WithClockSkew(-time.Second), "clock skew"},
		{"nil clock", setnxgetset.WithClock(nil), "clock"},
		{"nil option", nil, "option"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := setnxgetset.New(conn, c.opt)
			var ae *strategy.ArgumentError
			if l != nil || !errors.As(err, &ae) || ae.Name != c.arg {
				t.Errorf("New(%s) = %v, %v; want nil and an ArgumentError naming %q", c.name, l, err, c.arg)
			}
		})
	}
	l := newLocker(t, conn)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opt  lock.Option
		arg  string
	}{
		{"metadata", lock.WithMetadata("host=a"), "metadata"},
		{"a chosen token", lock.WithToken("0123456789abcdef012345"), "token"},
	} {
		t.Run("Obtain refuses "+c.name, func(t *testing.T) {
			key := conformance.Key(t)
			_, err := l.Obtain(ctx, key, time.Second, c.opt)
			var ae *strategy.ArgumentError
			if !errors.As(err, &ae) || ae.Name != c.arg {
				t.Errorf("Obtain with %s = %v, want an ArgumentError naming %q", c.name, err, c.arg)
			}
			if _, ok, _ := conn.Get(ctx, key); ok {
				t.Errorf("Obtain with %s left the key behind", c.name)
			}
		})
	}
}

// contend runs the sides on the same keys until n acquisitions in all, with
// a Detector per key, and returns how many each side made.
func contend(t *testing.T, keys []string, n int64, sides map[string][]func(ctx context.Context, key string) (release func() error, err error)) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	detectors := make(map[string]*conformance.Detector)
	for _, k := range keys {
		detectors[k] = new(conformance.Detector)
	}
	var (
		left  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		count = map[string]int64{}
	)
	left.Store(n)
	for side, workers := range sides {
		for i, obtain := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := i; left.Add(-1) >= 0; j++ {
					key := keys[j%len(keys)]
					release, err := obtain(ctx, key)
					if err != nil {
						t.Errorf("%s: obtain: %v", side, err)
						return
					}
					detectors[key].Hold(50 * time.Microsecond)
					if err := release(); err != nil {
						t.Errorf("%s: release: %v", side, err)
						return
					}
					mu.Lock()
					count[side]++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	var overlaps int64
	for _, d := range detectors {
		overlaps += d.Overlaps()
	}
	t.Logf("keys=%d acquisitions=%v overlaps=%d", len(keys), count, overlaps)
	if overlaps != 0 {
		t.Errorf("overlaps = %d, want 0", overlaps)
	}
	return count
}

func strategyWorker(l *lock.Locker) func(ctx context.Context, key string) (func() error, error) {
	retry := lock.WithRetry(lock.Exponential(time.Millisecond, 4*time.Millisecond))
	return func(ctx context.Context, key string) (func() error, error) {
		lk, err := l.Obtain(ctx, key, 10*time.Second, retry)
		if err != nil {
			return nil, err
		}
		return func() error { return lk.Release(context.Background()) }, nil
	}
}

func legacyWorker(c legacyClient) func(ctx context.Context, key string) (func() error, error) {
	return func(ctx context.Context, key string) (func() error, error) {
		stamp, err := c.lock(ctx, key)
		if err != nil {
			return nil, err
		}
		return func() error { return c.unlock(context.Background(), key, stamp) }, nil
	}
}

func keys(t *testing.T, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = conformance.Key(t)
	}
	return ks
}

// TestMixedFleetPhase1: reference legacy clients and this strategy, in the
// same format, contend on the same keys with no overlap.
func TestMixedFleetPhase1(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, _ := redistest.Addr(t)
	for _, c := range []struct {
		name   string
		ms     bool
		format setnxgetset.Format
	}{
		{"seconds", false, setnxgetset.Seconds},
		{"milliseconds", true, setnxgetset.Milliseconds},
	} {
		for _, nkeys := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d keys", c.name, nkeys), func(t *testing.T) {
				sides := map[string][]func(context.Context, string) (func() error, error){}
				for range 4 {
					legacy := legacyClient{rdb: redistest.GoRedis(t, addr, 2), ms: c.ms, timeout: 10 * time.Second}
					sides["legacy"] = append(sides["legacy"], legacyWorker(legacy))
					ours := newLocker(t, goredis.New(redistest.GoRedis(t, addr, 3)), setnxgetset.WithFormat(c.format), setnxgetset.WithSafetyTTL(time.Minute))
					sides["setnx-getset"] = append(sides["setnx-getset"], strategyWorker(ours))
				}
				count := contend(t, keys(t, nkeys), 1000, sides)
				if count["legacy"] == 0 || count["setnx-getset"] == 0 {
					t.Errorf("acquisitions = %v, want both sides to get some", count)
				}
			})
		}
	}
}

// TestMixedFleetPhase2: this strategy and single, on the same keys, with no
// overlap: each sees the other's value as held.
func TestMixedFleetPhase2(t *testing.T) {
	addr, _ := redistest.Addr(t)
	for _, nkeys := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d keys", nkeys), func(t *testing.T) {
			sides := map[string][]func(context.Context, string) (func() error, error){}
			for range 4 {
				legacy := newLocker(t, goredis.New(redistest.GoRedis(t, addr, 3)), setnxgetset.WithFormat(setnxgetset.Milliseconds), setnxgetset.WithSafetyTTL(time.Minute))
				sides["setnx-getset"] = append(sides["setnx-getset"], strategyWorker(legacy))
				s, err := single.New(goredis.New(redistest.GoRedis(t, addr, 3)))
				if err != nil {
					t.Fatal(err)
				}
				sides["single"] = append(sides["single"], strategyWorker(s))
			}
			count := contend(t, keys(t, nkeys), 1000, sides)
			if count["single"] == 0 || count["setnx-getset"] == 0 {
				t.Errorf("acquisitions = %v, want both sides to get some", count)
			}
		})
	}
}

// TestWhyTheOrderMatters shows why phase 2 waits until no legacy client is
// left: a legacy reader that cannot parse single's random token (here one
// that parses like Ruby's to_i) judges it expired and steals the lock.
func TestWhyTheOrderMatters(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	key := conformance.Key(t)
	s, err := single.New(goredis.New(redistest.GoRedis(t, addr, 3)))
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	legacy := legacyClient{rdb: redistest.GoRedis(t, addr, 3), timeout: 10 * time.Second, parse: rubyToI}
	if _, ok, err := legacy.tryLock(ctx, key); !ok || err != nil {
		t.Fatalf("a to_i legacy reader's tryLock on single's lock = %v, %v; want it to steal the lock (true, nil)", ok, err)
	}
	if err := held.Refresh(ctx, time.Minute); !errors.Is(err, strategy.ErrTaken) {
		t.Errorf("single's Refresh after the steal = %v, want ErrTaken", err)
	}
	// In phase 1, the strategy writes timestamps, which that reader parses.
	l := newLocker(t, goredis.New(redistest.GoRedis(t, addr, 3)))
	key2 := conformance.Key(t)
	if _, err := l.Obtain(ctx, key2, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := legacy.tryLock(ctx, key2); ok || err != nil {
		t.Errorf("the same reader's tryLock on this strategy's lock = %v, %v; want false, nil", ok, err)
	}
}

// TestCrashedHolder: a lock whose holder crashed (never released) is taken
// over after its timestamp passes, through GETSET, by exactly one of many
// contenders, ours and legacy ones alike.
func TestCrashedHolder(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	const rounds, each = 20, 4
	var ours, theirs atomic.Int32
	for round := range rounds {
		key := conformance.Key(t)
		// A legacy holder crashed two seconds ago; its key has no TTL.
		if err := rdb.Set(ctx, key, time.Now().Add(-2*time.Second).UnixMilli(), 0).Err(); err != nil {
			t.Fatal(err)
		}
		var (
			start   = make(chan struct{})
			wg      sync.WaitGroup
			winners atomic.Int32
		)
		for i := range each {
			l := newLocker(t, goredis.New(redistest.GoRedis(t, addr, 3)), setnxgetset.WithFormat(setnxgetset.Milliseconds))
			legacy := legacyClient{rdb: redistest.GoRedis(t, addr, 2), ms: true, timeout: 10 * time.Second}
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				if _, err := l.Obtain(ctx, key, 10*time.Second); err == nil {
					winners.Add(1)
					ours.Add(1)
				} else if !errors.Is(err, strategy.ErrNotObtained) {
					t.Errorf("round %d, strategy %d: Obtain = %v, want a lock or ErrNotObtained", round, i, err)
				}
			}()
			go func() {
				defer wg.Done()
				<-start
				if _, ok, err := legacy.tryLock(ctx, key); err != nil {
					t.Errorf("round %d, legacy %d: tryLock = %v", round, i, err)
				} else if ok {
					winners.Add(1)
					theirs.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if got := winners.Load(); got != 1 {
			t.Errorf("round %d: winners = %d, want 1", round, got)
		}
	}
	t.Logf("%d rounds of %d+%d contenders: strategy won %d, legacy won %d", rounds, each, each, ours.Load(), theirs.Load())
}

// TestValuesThatAreNotTimestamps: a value the format cannot read is held by a
// non-legacy owner: Obtain reports ErrNotTimestamp, never steals it, and
// obtains the key only once its own PTTL has removed it.
func TestValuesThatAreNotTimestamps(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	l := newLocker(t, goredis.New(rdb))
	ctx := context.Background()
	for _, value := range []string{"BEzb3iRQgpoTxxpuOWiT1w", "", "-5", "  ", "NaN"} {
		t.Run(strconv.Quote(value), func(t *testing.T) {
			key := conformance.Key(t)
			const pttl = 300 * time.Millisecond
			gone := time.Now().Add(pttl)
			if err := rdb.Set(ctx, key, value, pttl).Err(); err != nil {
				t.Fatal(err)
			}
			_, err := l.Obtain(ctx, key, time.Minute)
			if !errors.Is(err, strategy.ErrNotObtained) || !errors.Is(err, setnxgetset.ErrNotTimestamp) {
				t.Errorf("Obtain = %v, want ErrNotObtained and ErrNotTimestamp", err)
			}
			if got, _ := rdb.Get(ctx, key).Result(); got != value {
				t.Errorf("value after Obtain = %q, want %q untouched", got, value)
			}
			lk, err := l.Obtain(ctx, key, time.Minute, lock.WithRetry(lock.Linear(10*time.Millisecond)))
			if err != nil {
				t.Fatalf("Obtain with retry = %v, want a lock once the value's PTTL ends", err)
			}
			defer lk.Release(ctx)
			if time.Now().Before(gone) {
				t.Errorf("obtained %v before the foreign value's PTTL ended", time.Until(gone))
			}
		})
	}
	t.Run("a key of another type", func(t *testing.T) {
		key := conformance.Key(t)
		if err := rdb.HSet(ctx, key, "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
		_, err := l.Obtain(ctx, key, time.Minute)
		if err == nil || errors.Is(err, strategy.ErrNotObtained) || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Obtain of a hash = %v, want a WRONGTYPE error", err)
		}
	})
}

// TestSafetyTTL: keys this strategy writes expire after their timestamp;
// a legacy GETSET strips the TTL, and a key with none is judged by its
// timestamp; a takeover puts the TTL back.
func TestSafetyTTL(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	const grace = 30 * time.Second
	l := newLocker(t, goredis.New(rdb), setnxgetset.WithFormat(setnxgetset.Milliseconds), setnxgetset.WithSafetyTTL(grace))

	t.Run("SETNX sets PX to the timestamp plus the grace", func(t *testing.T) {
		lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		pttl, _ := rdb.PTTL(ctx, lk.Key()).Result()
		if pttl <= 10*time.Second || pttl > 10*time.Second+grace+time.Second {
			t.Errorf("PTTL = %v, want in (10s, 10s+%v]", pttl, grace)
		}
	})
	t.Run("a takeover of a legacy key with no TTL gives it one", func(t *testing.T) {
		key := conformance.Key(t)
		if err := rdb.Set(ctx, key, time.Now().Add(-time.Second).UnixMilli(), 0).Err(); err != nil {
			t.Fatal(err)
		}
		lk, err := l.Obtain(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatalf("Obtain of an expired legacy key = %v, want a lock", err)
		}
		defer lk.Release(ctx)
		if pttl, _ := rdb.PTTL(ctx, key).Result(); pttl <= 10*time.Second {
			t.Errorf("PTTL after the takeover = %v, want more than 10s", pttl)
		}
	})
	t.Run("a holder that dies right after its takeover leaves the key with an expiry", func(t *testing.T) {
		// Found by the Jepsen harness: a takeover was a GETSET, which strips
		// the TTL, then a PEXPIRE, so a holder that died between the two
		// left a key that never expired.
		key := conformance.Key(t)
		if err := rdb.Set(ctx, key, time.Now().Add(-time.Second).UnixMilli(), 0).Err(); err != nil {
			t.Fatal(err)
		}
		defer rdb.Del(ctx, key)
		client, dies := redistest.GoRedis(t, addr, 3), &diesAfterTakeover{}
		client.AddHook(dies)
		l := newLocker(t, goredis.New(client), setnxgetset.WithFormat(setnxgetset.Milliseconds), setnxgetset.WithSafetyTTL(grace))
		_, err := l.Obtain(ctx, key, 10*time.Second)
		if !dies.dead.Load() {
			t.Fatalf("Obtain of an expired legacy key = %v, and sent no takeover", err)
		}
		if pttl, _ := rdb.PTTL(ctx, key).Result(); pttl <= 10*time.Second {
			t.Errorf("PTTL after a takeover whose holder died = %v, want more than 10s: the timestamp's TTL plus the grace", pttl)
		}
	})
	t.Run("a legacy GETSET strips the TTL and the lock still holds", func(t *testing.T) {
		key := conformance.Key(t)
		lk, err := l.Obtain(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// A legacy loser's GETSET writes its own timestamp and strips the TTL.
		// (Its clock is a little ahead: had it written our very millisecond,
		// nobody could tell the values apart.)
		loser := strconv.FormatInt(time.Now().Add(20*time.Second).UnixMilli(), 10)
		if err := rdb.Do(ctx, "GETSET", key, loser).Err(); err != nil {
			t.Fatal(err)
		}
		if pttl, _ := rdb.PTTL(ctx, key).Result(); pttl != -1 {
			t.Fatalf("PTTL after GETSET = %v, want -1 (no TTL)", pttl)
		}
		if _, err := l.Obtain(ctx, key, 10*time.Second); !errors.Is(err, strategy.ErrNotObtained) {
			t.Errorf("Obtain of a live key with no TTL = %v, want ErrNotObtained", err)
		}
		if err := lk.Release(ctx); !errors.Is(err, strategy.ErrTaken) {
			t.Errorf("Release after a legacy loser overwrote the value = %v, want ErrTaken", err)
		}
		if got, _ := rdb.Get(ctx, key).Result(); got != loser {
			t.Errorf("value after that Release = %q, want the loser's %q left alone", got, loser)
		}
	})
}

// diesAfterTakeover is a go-redis hook that fails every command sent after
// a takeover's write (GETSET, or SET … GET), as if its client died then.
type diesAfterTakeover struct{ dead atomic.Bool }

func (h *diesAfterTakeover) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *diesAfterTakeover) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.dead.Load() {
			err := errors.New("the client died")
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		args := cmd.Args()
		if cmd.Name() == "getset" || (cmd.Name() == "set" && strings.EqualFold(fmt.Sprint(args[len(args)-1]), "get")) {
			h.dead.Store(true)
		}
		return err
	}
}

func (h *diesAfterTakeover) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestClockSkew: a timestamp counts as expired only once it is the skew
// margin in the past, and ValidUntil ends the margin early.
func TestClockSkew(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	key := conformance.Key(t)
	if err := rdb.Set(ctx, key, time.Now().Add(-2*time.Second).UnixMilli(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	ms := setnxgetset.WithFormat(setnxgetset.Milliseconds)
	careful := newLocker(t, goredis.New(rdb), ms, setnxgetset.WithClockSkew(5*time.Second))
	if _, err := careful.Obtain(ctx, key, time.Minute); !errors.Is(err, strategy.ErrNotObtained) {
		t.Errorf("Obtain of a timestamp 2s past with a 5s margin = %v, want ErrNotObtained", err)
	}
	ahead := newLocker(t, goredis.New(rdb), ms, setnxgetset.WithClockSkew(5*time.Second),
		setnxgetset.WithClock(func() time.Time { return time.Now().Add(4 * time.Second) }))
	lk, err := ahead.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain of a timestamp 6s past (by this clock) with a 5s margin = %v, want a lock", err)
	}
	defer lk.Release(ctx)
	if v := time.Until(lk.ValidUntil()); v > time.Minute-5*time.Second {
		t.Errorf("validity = %v, want at most the TTL less the 5s margin", v)
	}
}

// TestFarFutureTimestamp: a timestamp far in the future, written by a client
// whose clock runs ahead, holds the lock until it passes (by our clock), as
// it would for legacy clients; it is not an error.
func TestFarFutureTimestamp(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	key := conformance.Key(t)
	skewed := legacyClient{rdb: rdb, timeout: 10 * time.Second, skew: 365 * 24 * time.Hour}
	if _, ok, err := skewed.tryLock(ctx, key); !ok || err != nil {
		t.Fatalf("skewed legacy tryLock = %v, %v", ok, err)
	}
	written, _ := rdb.Get(ctx, key).Result()
	l := newLocker(t, goredis.New(rdb))
	if _, err := l.Obtain(ctx, key, time.Minute); !errors.Is(err, strategy.ErrNotObtained) || errors.Is(err, setnxgetset.ErrNotTimestamp) {
		t.Errorf("Obtain of a timestamp a year ahead = %v, want ErrNotObtained (held, a valid timestamp)", err)
	}
	if got, _ := rdb.Get(ctx, key).Result(); got != written {
		t.Errorf("value after Obtain = %q, want %q untouched", got, written)
	}
	later := newLocker(t, goredis.New(rdb), setnxgetset.WithClock(func() time.Time { return time.Now().Add(366 * 24 * time.Hour) }))
	lk, err := later.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain once the timestamp has passed = %v, want a lock", err)
	}
	_ = lk.Release(ctx)
}

// TestRefresh: a compare-and-set of a new timestamp, which legacy readers see
// and which becomes the handle's token.
func TestRefresh(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	l := newLocker(t, goredis.New(rdb), setnxgetset.WithFormat(setnxgetset.Milliseconds))
	// Far longer than a loaded machine's stall between the calls: a lock
	// that expired before its Refresh would fail the test for nothing.
	lk, err := l.Obtain(ctx, conformance.Key(t), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	before := lk.Token()
	if err := lk.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("Refresh = %v, want nil", err)
	}
	stored, _ := rdb.Get(ctx, lk.Key()).Result()
	if stored == before || stored != lk.Token() {
		t.Errorf("after Refresh the stored value is the new token = %t, and differs from the old = %t; want both", stored == lk.Token(), stored != before)
	}
	n, err := strconv.ParseInt(stored, 10, 64)
	if err != nil || time.UnixMilli(n).Before(time.Now().Add(50*time.Second)) {
		t.Errorf("stored value after Refresh(1m) = %q, want a millisecond timestamp about a minute ahead", stored)
	}
}

// TestNoLegacyClientLeft checks the operator's recipe of the migration
// guide, docs/migration.md: this strategy (over every driver) never sends the SETNX command,
// so cmdstat_setnx in INFO commandstats counts legacy clients only.
func TestNoLegacyClientLeft(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	setnxCalls := func() string {
		info, err := srv.Command(ctx, "INFO", "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(line, "cmdstat_setnx:") {
				return line
			}
		}
		return "none"
	}
	for _, d := range redistest.Drivers() {
		l := newLocker(t, d.Conn(t, srv.Addr))
		key := conformance.Key(t)
		for range 3 {
			// A lock of a second was found expired by its Release under -race
			// on two busy cores (.ci/soak): the test counts commands, and
			// needs no short TTL.
			lk, err := l.Obtain(ctx, key, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := setnxCalls(); got != "none" {
		t.Errorf("after this strategy ran on every driver, cmdstat_setnx = %s, want none", got)
	}
	legacy := legacyClient{rdb: redistest.GoRedis(t, srv.Addr, 3), timeout: 10 * time.Second}
	if _, _, err := legacy.tryLock(ctx, conformance.Key(t)); err != nil {
		t.Fatal(err)
	}
	if got := setnxCalls(); !strings.HasPrefix(got, "cmdstat_setnx:calls=1,") {
		t.Errorf("after one legacy attempt, cmdstat_setnx = %s, want calls=1", got)
	}
}

// raceConn injects events into the commands the strategy sends.
type raceConn struct {
	driver.Conn
	setNX  func() error // runs instead of SetNX when set
	getSet func()       // runs before GetSet
}

func (c raceConn) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if c.setNX != nil {
		return false, c.setNX()
	}
	return c.Conn.SetNX(ctx, key, value, ttl)
}

func (c raceConn) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	if c.getSet != nil {
		c.getSet()
	}
	return c.Conn.GetSet(ctx, key, value)
}

// TestSameSecondValues: timestamps are not unique, so nothing is ever
// deleted or restored by comparing a value that another holder may share.
func TestSameSecondValues(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	fixed := time.Now()
	clock := setnxgetset.WithClock(func() time.Time { return fixed })

	t.Run("a lost reply is not cleaned up by value", func(t *testing.T) {
		key := conformance.Key(t)
		holder, err := newLocker(t, goredis.New(rdb), clock).Obtain(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Release(ctx)
		lost := raceConn{Conn: goredis.New(rdb), setNX: func() error { return errors.New("read: connection reset by peer") }}
		if _, err := newLocker(t, lost, clock).Obtain(ctx, key, time.Minute); err == nil {
			t.Fatal("Obtain over a failing connection = nil error, want the error")
		}
		if got, _ := rdb.Get(ctx, key).Result(); got != holder.Token() {
			t.Errorf("holder's key after another client's failed attempt in the same second = %q, want its value %q", got, holder.Token())
		}
	})

	t.Run("a losing takeover does not restore over an identical winner", func(t *testing.T) {
		key := conformance.Key(t)
		expired := setnxgetset.Seconds.Encode(fixed.Add(-time.Hour), time.Second)
		if err := rdb.Set(ctx, key, expired, 0).Err(); err != nil {
			t.Fatal(err)
		}
		winner := setnxgetset.Seconds.Encode(fixed, time.Minute) // what we are about to write too
		racing := raceConn{Conn: goredis.New(rdb), getSet: func() {
			_ = rdb.Do(ctx, "GETSET", key, winner).Err() // a legacy client wins the takeover first
		}}
		if _, err := newLocker(t, racing, clock).Obtain(ctx, key, time.Minute); !errors.Is(err, strategy.ErrNotObtained) {
			t.Fatalf("Obtain losing the takeover = %v, want ErrNotObtained", err)
		}
		if got, _ := rdb.Get(ctx, key).Result(); got != winner {
			t.Errorf("value after losing to a same-second winner = %q, want the winner's %q (not the expired %q put back)", got, winner, expired)
		}
	})

	t.Run("a losing takeover restores a different winner's value", func(t *testing.T) {
		key := conformance.Key(t)
		expired := setnxgetset.Seconds.Encode(fixed.Add(-time.Hour), time.Second)
		if err := rdb.Set(ctx, key, expired, 0).Err(); err != nil {
			t.Fatal(err)
		}
		winner := setnxgetset.Seconds.Encode(fixed.Add(5*time.Second), time.Minute)
		racing := raceConn{Conn: goredis.New(rdb), getSet: func() {
			_ = rdb.Do(ctx, "GETSET", key, winner).Err()
		}}
		if _, err := newLocker(t, racing, clock).Obtain(ctx, key, time.Minute); !errors.Is(err, strategy.ErrNotObtained) {
			t.Fatalf("Obtain losing the takeover = %v, want ErrNotObtained", err)
		}
		if got, _ := rdb.Get(ctx, key).Result(); got != winner {
			t.Errorf("value after losing the takeover = %q, want the winner's %q put back", got, winner)
		}
	})
}

// early is a broken Format: its timestamps are a second earlier than the
// expiry they are for.
type early struct{}

func (early) Encode(now time.Time, ttl time.Duration) string {
	return strconv.FormatInt(now.Add(ttl).Unix()-1, 10)
}

func (early) Decode(s string) (time.Time, bool) { return setnxgetset.Seconds.Decode(s) }

// TestTTLLimits: a TTL that the clock-skew margin uses up would give a lock
// whose ValidUntil has already passed, and one too long for the format
// writes a timestamp that neither we nor other clients can read back (TTL
// would say ErrExpired, others ErrNotTimestamp). Obtain, Refresh and Do
// refuse both with an *ArgumentError that names the limit, before anything
// is written. The check reads back what the format writes, so it holds for
// custom formats too.
func TestTTLLimits(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	const century = 100 * 365 * 24 * time.Hour
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			conn := d.Conn(t, srv.Addr)
			refused := func(t *testing.T, l *lock.Locker, ttl time.Duration, name, limit string) {
				t.Helper()
				key := conformance.Key(t)
				lk, err := l.Obtain(ctx, key, ttl)
				var ae *strategy.ArgumentError
				if !errors.As(err, &ae) || ae.Name != name || !strings.Contains(ae.Reason, limit) {
					t.Errorf("Obtain(%v) = %v, %v; want an ArgumentError named %s that says %q", ttl, lk, err, name, limit)
				}
				t.Log(err)
				if _, ok, err := conn.Get(ctx, key); ok || err != nil {
					t.Errorf("after Obtain(%v): the key exists = %v (%v), want false", ttl, ok, err)
				}
				ran := false
				err = lock.Do(ctx, l, key, ttl, func(context.Context) error { ran = true; return nil })
				if !errors.As(err, &ae) || ae.Name != name || ran {
					t.Errorf("Do(%v) = %v, fn ran = %v; want an ArgumentError named %s, and fn not run", ttl, err, ran, name)
				}
			}
			skewed := newLocker(t, conn, setnxgetset.WithClockSkew(time.Second))
			t.Run("no more than the clock skew", func(t *testing.T) {
				refused(t, skewed, time.Second, "ttl", "clock skew of WithClockSkew, 1s")
				refused(t, skewed, time.Millisecond, "ttl", "clock skew of WithClockSkew, 1s")
			})
			for _, f := range []setnxgetset.Format{setnxgetset.Seconds, setnxgetset.Milliseconds, setnxgetset.FloatSeconds} {
				t.Run(fmt.Sprintf("a century in %v", f), func(t *testing.T) {
					refused(t, newLocker(t, conn, setnxgetset.WithFormat(f)), century, "ttl", "no time after 2116-02-20T23:53:38Z")
				})
			}
			t.Run("a format that writes early", func(t *testing.T) {
				refused(t, newLocker(t, conn, setnxgetset.WithFormat(early{})), time.Minute, "format", "earlier than now+ttl")
			})

			l := newLocker(t, conn, setnxgetset.WithClockSkew(time.Second))
			for _, tc := range []struct {
				name string
				l    *lock.Locker
				ttl  time.Duration
			}{
				{"just more than the clock skew", l, time.Second + time.Millisecond},
				{"80 years in seconds", l, 80 * 365 * 24 * time.Hour},
				{"a century in nanoseconds, which read back", newLocker(t, conn, setnxgetset.WithFormat(nanos{})), century},
			} {
				t.Run(tc.name, func(t *testing.T) {
					key := conformance.Key(t)
					lk, err := tc.l.Obtain(ctx, key, tc.ttl)
					if err != nil {
						t.Fatalf("Obtain(%v) = %v, want a lock", tc.ttl, err)
					}
					defer lk.Release(ctx)
					if ttl, err := lk.TTL(ctx); err != nil || ttl < tc.ttl-time.Second {
						t.Errorf("TTL = %v, %v; want about %v, nil", ttl, err, tc.ttl)
					}
					if _, err := tc.l.Obtain(ctx, key, time.Minute); !errors.Is(err, strategy.ErrNotObtained) || errors.Is(err, setnxgetset.ErrNotTimestamp) {
						t.Errorf("another Obtain = %v, want ErrNotObtained: held, under a timestamp", err)
					}
				})
			}

			t.Run("Refresh", func(t *testing.T) {
				lk, err := l.Obtain(ctx, conformance.Key(t), time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Release(ctx)
				for _, ttl := range []time.Duration{time.Second, century} {
					var ae *strategy.ArgumentError
					if err := lk.Refresh(ctx, ttl); !errors.As(err, &ae) || ae.Name != "ttl" {
						t.Errorf("Refresh(%v) = %v, want an ArgumentError named ttl", ttl, err)
					}
					if got, _, _ := conn.Get(ctx, lk.Key()); got != lk.Token() {
						t.Errorf("after Refresh(%v): the stored value changed, want it untouched", ttl)
					}
				}
			})
		})
	}
}

// lossyConn loses the reply of the first script that succeeds once lose is
// set, as a timeout under load does: the script was applied.
type lossyConn struct {
	driver.Conn
	lose atomic.Bool
}

func (c *lossyConn) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	return c.lost(c.Conn.EvalSha(ctx, sha1, keys, args...))
}

func (c *lossyConn) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	return c.lost(c.Conn.Eval(ctx, src, keys, args...))
}

func (c *lossyConn) lost(v any, err error) (any, error) {
	if err == nil && c.lose.CompareAndSwap(true, false) {
		return nil, context.DeadlineExceeded
	}
	return v, err
}

// TestLostRefreshReply: a refresh whose new timestamp landed but whose reply
// was lost leaves the lock ours; the handle finds it under that timestamp.
func TestLostRefreshReply(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			for _, next := range []struct {
				name string
				op   func(lk *lock.Lock) error
			}{
				{"then Refresh and Release succeed", func(lk *lock.Lock) error {
					if err := lk.Refresh(ctx, 30*time.Second); err != nil {
						return fmt.Errorf("Refresh = %w, want nil", err)
					}
					return nil
				}},
				{"then TTL and Release succeed", func(lk *lock.Lock) error {
					if _, err := lk.TTL(ctx); err != nil {
						return fmt.Errorf("TTL = %w, want nil", err)
					}
					return nil
				}},
				{"then Release succeeds", func(*lock.Lock) error { return nil }},
			} {
				t.Run(next.name, func(t *testing.T) {
					conn := &lossyConn{Conn: d.Conn(t, addr)}
					l := newLocker(t, conn, setnxgetset.WithFormat(setnxgetset.Milliseconds), setnxgetset.WithSafetyTTL(time.Minute))
					lk, err := l.Obtain(ctx, conformance.Key(t), 10*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					conn.lose.Store(true)
					// A longer TTL: a new timestamp even in the same millisecond.
					if err := lk.Refresh(ctx, 20*time.Second); !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("Refresh with its reply lost = %v, want context.DeadlineExceeded", err)
					}
					if err := next.op(lk); err != nil {
						t.Fatal(err)
					}
					if err := lk.Release(ctx); err != nil {
						t.Fatalf("Release = %v, want nil", err)
					}
					if n, err := rdb.Exists(ctx, lk.Key()).Result(); err != nil || n != 0 {
						t.Errorf("after Release, EXISTS = %d, %v; want 0", n, err)
					}
				})
			}
		})
	}
}

// TestSeveralKeys: ObtainMany of two keys or more is refused with an
// *ArgumentError named "keys", and writes nothing; of one key (once
// duplicates are removed) it is an Obtain.
func TestSeveralKeys(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	l := newLocker(t, goredis.New(rdb))
	key := conformance.Key(t)
	t.Run("two keys are refused", func(t *testing.T) {
		keys := []string{key + ":a", key + ":b"}
		_, err := l.ObtainMany(ctx, keys, time.Minute)
		if ae := (*lock.ArgumentError)(nil); !errors.As(err, &ae) || ae.Name != "keys" {
			t.Fatalf("ObtainMany of two keys = %v, want an *ArgumentError named keys", err)
		}
		if n, _ := rdb.Exists(ctx, keys...).Result(); n != 0 {
			t.Errorf("keys written = %d, want 0", n)
		}
	})
	t.Run("one key is an Obtain", func(t *testing.T) {
		lk, err := l.ObtainMany(ctx, []string{key, key}, time.Minute)
		if err != nil {
			t.Fatalf("ObtainMany of one key twice = %v, want the lock", err)
		}
		if got := lk.Keys(); len(got) != 1 || got[0] != key {
			t.Errorf("Keys() = %q, want [%q]", got, key)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release = %v, want nil", err)
		}
	})
}
