package bench

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

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
