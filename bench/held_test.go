package bench

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/reach"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// Settings of BenchmarkHeld.
const (
	// heldTTL is the TTL of the held locks; auto-refresh refreshes each
	// one every third of it (lock.WithRefreshFraction's default).
	heldTTL = 3 * time.Second
	// heldShortMax is the most locks a case holds with -short.
	heldShortMax = 1000
	// heldInterval is the interval between the refreshes of a lock.
	heldInterval = heldTTL / 3
)

// heldCounts are the numbers of locks that BenchmarkHeld holds.
var heldCounts = []int{100, 1000, 10000}

// The modes of BenchmarkHeld, by the name of its sub-benchmarks.
const (
	heldBatched   = "batched"
	heldUnbatched = "unbatched"
)

// BenchmarkHeld measures what it costs to hold many locks, each refreshed
// in the background (Lock.StartRefresh), by one Locker of single over one
// go-redis client (BenchmarkHeld/<mode>/<n>-locks, n 100, 1000 and 10000):
//
//   - batched: single.New(goredis.New(client)), whose Strategy implements
//     strategy.Batcher: the Locker refreshes its locks together, by one
//     timer, one script per 1000 locks (cas.PerScript), all in one round
//     trip per server (go-redis pipelines them);
//   - unbatched: the same Strategy behind a struct that embeds only
//     strategy.Strategy, which hides strategy.Batcher (and single's other
//     optional interfaces: notification, ObtainMany, shared locks, none of
//     which holding a lock uses), so that the Locker runs a goroutine per
//     lock, each sending its own refreshes, as every Locker did before
//     batching.
//
// A case obtains its n locks (TTL heldTTL, keys of its own) one by one,
// spread over one refresh interval, starts refreshing each as it is
// obtained, lets them settle for one TTL, and then measures over a window
// of two TTLs (with -short: at most heldShortMax locks, one refresh
// interval of settling and a window of one TTL). It reports:
//
//   - goroutines/lock: the goroutines at the end of the window, less those
//     before the locks were obtained, per lock;
//   - heap-B/lock: the live heap (HeapAlloc after runtime.GC) at the end of
//     the window, less the one before, per lock;
//   - stack-B/lock: the same for the goroutines' stacks (StackInuse), which
//     HeapAlloc leaves out;
//   - server-cmds/s: the commands the server ran per second over the
//     window, by its INFO commandstats, those that the scripts ran
//     included (INFO itself and handshakes left out);
//   - roundtrips/s: the client's round trips per second, counted by a
//     go-redis hook: a command, or a pipeline of several (handshakes left
//     out);
//   - refreshes/lock/s: the PEXPIRE calls the scripts ran (one per lock
//     refreshed) per lock and second: 1 when each lock is refreshed once
//     per refresh interval (1 s), more when batches take some early;
//   - roundtrips/round and scripts/round: the round trips, and the scripts
//     the server received (EVALSHA and EVAL), per round of refreshes: over
//     the PEXPIRE calls ÷ n. The refreshes of batched locks
//     come in bursts, a few per interval, so a window holds one burst more
//     or less than the average, and the rates above vary by up to a sixth
//     between runs; this ratio does not;
//   - client-cpu-%: the CPU time of this process over the window, as a
//     percentage of the window's wall time (100 is one core);
//   - conns: the connections of the client's pool at the end of the
//     window (each holds buffers on the heap);
//   - lost: the locks whose Err is not nil at the end, which fail the
//     benchmark.
//
// Then it releases every lock and checks that none of its keys is left.
// b.N is ignored beyond running the measurement once per iteration:
//
//	go test -run '^$' -bench Held -benchtime 1x
func BenchmarkHeld(b *testing.B) {
	addr := redistest.Start(b, 1)[0].Addr // a server of its own: its commandstats count this benchmark only
	probe := goRedis(b, addr, nil)        // for INFO commandstats and the check of the keys left
	settle, window := heldTTL, 2*heldTTL
	if testing.Short() {
		settle, window = heldTTL/3, heldTTL
	}
	for _, n := range heldCounts {
		if testing.Short() && n > heldShortMax {
			continue
		}
		for _, mode := range []string{heldBatched, heldUnbatched} {
			b.Run(mode+"/"+strconv.Itoa(n)+"-locks", func(b *testing.B) {
				var m heldFigures
				for b.Loop() {
					m = holdMany(b, addr, probe, mode, n, settle, window)
				}
				b.ReportMetric(0, "ns/op") // an iteration is a fixed workload
				b.ReportMetric(m.goroutines, "goroutines/lock")
				b.ReportMetric(m.heap, "heap-B/lock")
				b.ReportMetric(m.stack, "stack-B/lock")
				b.ReportMetric(m.serverCmds, "server-cmds/s")
				b.ReportMetric(m.roundTrips, "roundtrips/s")
				b.ReportMetric(m.perRound, "roundtrips/round")
				b.ReportMetric(m.scriptsPerRound, "scripts/round")
				b.ReportMetric(m.refreshes, "refreshes/lock/s")
				b.ReportMetric(m.cpu, "client-cpu-%")
				b.ReportMetric(m.conns, "conns")
				b.ReportMetric(float64(m.lost), "lost")
			})
		}
	}
}

// heldFigures are the figures of one run of BenchmarkHeld.
type heldFigures struct {
	goroutines, heap, stack, serverCmds, roundTrips, perRound, scriptsPerRound, refreshes, cpu, conns float64
	lost                                                                                              int
}

// unbatched hides every method of a Strategy but those of
// strategy.Strategy: the Locker sees no strategy.Batcher, and refreshes
// each lock with its own goroutine.
type unbatched struct{ strategy.Strategy }

// holdMany runs one case of BenchmarkHeld: n locks held in mode, measured
// after settle over window. It fails b if a lock is lost or a key left.
func holdMany(b *testing.B, addr string, probe *redis.Client, mode string, n int, settle, window time.Duration) heldFigures {
	ctx := context.Background()
	client := goRedis(b, addr, nil) // a client of its own, made before the baseline
	var trips atomic.Int64
	client.AddHook(tripHook{&trips})
	conn := goredis.New(client)
	var l *lock.Locker
	switch mode {
	case heldBatched:
		var err error
		if l, err = single.New(conn); err != nil {
			b.Fatal(err)
		}
	case heldUnbatched:
		batched, err := single.New(conn)
		if err != nil {
			b.Fatal(err)
		}
		l = lock.New(unbatched{reach.Strategy(batched)})
	}
	prefix := "held:" + mode + "/" + strconv.Itoa(n) + ":"
	refreshing, stop := context.WithCancel(ctx)
	defer stop()

	// One acquire and release first, so that the client's connection is
	// open before the baseline.
	if lk, err := l.Obtain(ctx, prefix+"warm-up", heldTTL); err != nil {
		b.Fatal(err)
	} else if err := lk.Release(ctx); err != nil {
		b.Fatal(err)
	}
	goroutines := runtime.NumGoroutine()
	heap, stack := memory()

	// The locks are obtained one by one, spread over one refresh interval
	// (or as fast as they come, if slower), as locks taken at random
	// moments would be: their refreshes fall due at as many moments.
	locks := make([]*lock.Lock, n)
	start := time.Now()
	for i := range locks {
		time.Sleep(time.Until(start.Add(time.Duration(i) * heldInterval / time.Duration(n))))
		lk, err := l.Obtain(ctx, prefix+strconv.Itoa(i), heldTTL)
		if err != nil {
			b.Fatal(err)
		}
		locks[i] = lk
		if err := lk.StartRefresh(refreshing); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(settle)

	calls, tripsBefore, cpu, start := commandStats(b, probe), trips.Load(), processCPU(), time.Now()
	time.Sleep(window)
	after, tripsAfter, cpuAfter, wall := commandStats(b, probe), trips.Load(), processCPU(), time.Since(start)
	var m heldFigures
	m.goroutines = float64(runtime.NumGoroutine()-goroutines) / float64(n)
	heapAfter, stackAfter := memory()
	m.heap = float64(int64(heapAfter)-int64(heap)) / float64(n)
	m.stack = float64(int64(stackAfter)-int64(stack)) / float64(n)
	m.conns = float64(client.PoolStats().TotalConns)
	var cmds, scripts, pexpires int64
	for cmd, v := range after {
		v -= calls[cmd]
		cmds += v
		switch cmd {
		case "evalsha", "eval":
			scripts += v
		case "pexpire": // one per lock refreshed, batched or not
			pexpires += v
		}
	}
	m.serverCmds = float64(cmds) / wall.Seconds()
	m.roundTrips = float64(tripsAfter-tripsBefore) / wall.Seconds()
	m.refreshes = float64(pexpires) / float64(n) / wall.Seconds()
	if pexpires > 0 {
		rounds := float64(pexpires) / float64(n)
		m.perRound, m.scriptsPerRound = float64(tripsAfter-tripsBefore)/rounds, float64(scripts)/rounds
	}
	m.cpu = 100 * float64(cpuAfter-cpu) / float64(wall)
	var lost error
	for _, lk := range locks {
		if err := lk.Err(); err != nil {
			m.lost++
			lost = err
		}
	}
	if m.lost > 0 {
		b.Fatalf("%d of %d locks lost while held, the last by: %v", m.lost, n, lost)
	}

	for _, lk := range locks {
		if err := lk.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var left []string
	iter := probe.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		left = append(left, iter.Val())
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	if len(left) > 0 {
		b.Fatalf("%d keys left after releasing every lock, such as %q", len(left), left[0])
	}
	return m
}

// memory returns the heap that is live after a garbage collection, and the
// memory of the goroutines' stacks.
func memory() (heap, stack uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}
