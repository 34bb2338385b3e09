package bench

import (
	"cmp"
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// servers starts the five servers that every benchmark shares: single-node
// contenders use the first, Redlock and redsync the first three or five.
// Each contender locks keys of its own.
func servers(b *testing.B) []string {
	addrs := make([]string, 5)
	for i, s := range redistest.Start(b, len(addrs)) {
		addrs[i] = s.Addr
	}
	return addrs
}

// cycle obtains key, in one attempt, and releases it.
func cycle(m mutex, key string) error {
	ctx := context.Background()
	h, err := m.obtain(ctx, key, false)
	if err != nil {
		return err
	}
	return h.Release(ctx)
}

// parallelism is how many goroutines per GOMAXPROCS the parallel cases run.
const parallelism = 4

// BenchmarkLock measures an uncontended acquire and release for every
// contender (BenchmarkLock/<driver>/<contender>/<mode>): serially on one
// key, and from parallelism × GOMAXPROCS goroutines on a key each, where
// ns/op is the inverse of the throughput.
//
//	go test -run '^$' -bench Lock -benchtime 300ms
func BenchmarkLock(b *testing.B) {
	addrs := servers(b)
	probes := make([]*redis.Client, len(addrs)) // for INFO CPU
	for i, a := range addrs {
		probes[i] = goRedis(b, a, nil)
	}
	for _, c := range contenders() {
		if c.contendedOnly {
			continue
		}
		m := c.new(b, addrs[:c.nodes], nil)
		key := "bench:" + c.driver + "/" + c.name
		// One cycle before the timing, so that what a client sets up at its
		// first commands (rueidis's pipe, a strategy's first contact) is
		// not counted in the figures of the few hundred cycles of a round.
		if err := cycle(m, key); err != nil {
			b.Fatal(err)
		}
		b.Run(c.driver+"/"+c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			cpu := meterCPU(probes[:c.nodes])
			for b.Loop() {
				if err := cycle(m, key); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
		b.Run(c.driver+"/"+c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(parallelism)
			cpu := meterCPU(probes[:c.nodes])
			var g atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				key := key + ":" + strconv.FormatInt(g.Add(1), 10)
				for pb.Next() {
					if err := cycle(m, key); err != nil {
						b.Error(err)
						return
					}
				}
			})
			cpu.report(b)
		})
	}
}

// BenchmarkInterleaved runs contenders in turn, so that the drift of a
// noisy machine hits them all alike, and reports each one's time per
// operation as <contender>-ns/op. The ratios between contenders that it
// gives are steadier than those of separate benchmarks, which run seconds
// apart. The order is random, so that no contender always follows the
// same one. Each group of a driver's contenders (see groups) takes turns
// with the raw baseline:
//
//   - <driver>/<group>/serial: each iteration runs one acquire and release
//     of every contender.
//   - <driver>/<group>/parallel: each iteration runs every contender for a
//     slice of 10ms, from parallelism × GOMAXPROCS goroutines on a key each,
//     as BenchmarkLock's parallel cases do; ns/op is the inverse of the
//     throughput.
//
// Run it with
//
//	go test -run '^$' -bench Interleaved -benchtime 300ms
func BenchmarkInterleaved(b *testing.B) {
	addrs := servers(b)
	for _, d := range drivers {
		for _, g := range groups {
			var names []string
			var ms []mutex
			for _, c := range contenders() {
				if c.driver == d && !c.contendedOnly && (c.name == "raw" || g.has(c)) {
					names = append(names, c.name)
					ms = append(ms, c.new(b, addrs[:c.nodes], nil))
				}
			}
			interleave := func(b *testing.B, run func(k int) (ops int, err error)) {
				spent := make([]time.Duration, len(ms))
				ops := make([]int, len(ms))
				for b.Loop() {
					for _, k := range rand.Perm(len(ms)) {
						start := time.Now()
						n, err := run(k)
						if err != nil {
							b.Fatal(err)
						}
						spent[k] += time.Since(start)
						ops[k] += n
					}
				}
				b.ReportMetric(0, "ns/op") // an iteration runs every contender
				for k, name := range names {
					b.ReportMetric(float64(spent[k].Nanoseconds())/float64(ops[k]), name+"-ns/op")
				}
			}
			prefix := d + "/" + g.name
			b.Run(prefix+"/serial", func(b *testing.B) {
				interleave(b, func(k int) (int, error) { return 1, cycle(ms[k], "interleaved:"+prefix+"/"+names[k]) })
			})
			b.Run(prefix+"/parallel", func(b *testing.B) {
				interleave(b, func(k int) (int, error) {
					return slice(ms[k], "interleaved:"+prefix+"/"+names[k], 10*time.Millisecond)
				})
			})
		}
	}
}

// groups are the contenders that BenchmarkInterleaved runs together: those
// on one server, and those on a quorum of servers, whose heavier work
// (several times the CPU per operation) would blur the figures of the
// light ones.
var groups = []struct {
	name string
	has  func(contender) bool
}{
	{"one-node", func(c contender) bool { return c.nodes == 1 }},
	{"quorum", func(c contender) bool { return c.nodes > 1 }},
}

// slice runs acquire and release cycles of m from parallelism × GOMAXPROCS
// goroutines, each on a key of its own, for d, and returns how many they
// completed.
func slice(m mutex, key string, d time.Duration) (int, error) {
	var (
		ops   atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	end := time.Now().Add(d)
	for g := range parallelism * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := key + ":" + strconv.Itoa(g)
			for time.Now().Before(end) {
				if err := cycle(m, key); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
					return
				}
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(ops.Load()), first
}
