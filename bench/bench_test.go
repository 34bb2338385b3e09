package bench

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/internal/redistest"
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
		m := c.new(b, addrs[:c.nodes], nil)
		key := "bench:" + c.driver + "/" + c.name
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

// BenchmarkInterleaved runs every contender of a driver in turn, one
// acquire and release each per iteration, in a random order (so that no
// contender always follows the same one), so that the drift of a noisy
// machine hits them all alike, and reports each one's time per operation
// as <contender>-ns/op. The ratios between contenders that it gives are
// steadier than those of separate benchmarks.
//
//	go test -run '^$' -bench Interleaved -benchtime 300ms
func BenchmarkInterleaved(b *testing.B) {
	addrs := servers(b)
	for _, d := range []string{goredisDriver, redigoDriver} {
		var names []string
		var ms []mutex
		for _, c := range contenders() {
			if c.driver == d {
				names = append(names, c.name)
				ms = append(ms, c.new(b, addrs[:c.nodes], nil))
			}
		}
		b.Run(d, func(b *testing.B) {
			spent := make([]time.Duration, len(ms))
			i := 0
			for b.Loop() {
				for _, k := range rand.Perm(len(ms)) {
					start := time.Now()
					if err := cycle(ms[k], "interleaved:"+d+"/"+names[k]); err != nil {
						b.Fatal(err)
					}
					spent[k] += time.Since(start)
				}
				i++
			}
			b.ReportMetric(0, "ns/op") // an iteration runs every contender
			for k, name := range names {
				b.ReportMetric(float64(spent[k].Nanoseconds())/float64(i), name+"-ns/op")
			}
		})
	}
}
