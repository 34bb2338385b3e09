package bench

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// BenchmarkStalledNode measures Redlock-3's Obtain and Release of one key,
// again and again, with one node stalled (SIGSTOP) against the same with
// every node up, over each driver: a Locker over three servers, and one
// over two of them and a fourth server that is paused for the whole case.
// The two take turns within each iteration, in a random order, as
// BenchmarkInterleaved's contenders do, and report their time per cycle
// as all-up-ns/op and stalled-ns/op, and stalled-ratio, the ratio of the
// two over the iteration of the round. The node timeout is 500ms, as
// redlock-3's elsewhere. Once the case ends, the server resumes, and the
// clean-ups that the stalled node held back end before the next case.
//
//	go test -run '^$' -bench StalledNode -benchtime 300ms
func BenchmarkStalledNode(b *testing.B) {
	srv := redistest.Start(b, 4)
	stalled := srv[3]
	for _, d := range drivers {
		b.Run(d, func(b *testing.B) {
			ctx := context.Background()
			over := func(servers ...*redistest.Server) *lock.Locker {
				conns := make([]driver.Conn, len(servers))
				for i, s := range servers {
					conns[i] = conn(b, d, s.Addr, nil)
				}
				l, err := redlock.New(conns, redlock.WithNodeTimeout(500*time.Millisecond))
				if err != nil {
					b.Fatal(err)
				}
				return l
			}
			ways := []struct {
				name string
				l    *lock.Locker
				key  string
			}{
				{"all-up", over(srv[0], srv[1], srv[2]), "stalled-node:" + d + "/all-up"},
				{"stalled", over(srv[0], srv[1], stalled), "stalled-node:" + d + "/stalled"},
			}
			cycle := func(k int) {
				lk, err := ways[k].l.Obtain(ctx, ways[k].key, ttl)
				if err == nil {
					err = lk.Release(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			for k := range ways {
				cycle(k) // every node up: the first contact
			}
			stalled.Pause()
			defer func() {
				stalled.Resume()
				for _, w := range ways {
					_ = w.l.Close() // waits for the calls to the stalled node
				}
			}()
			spent := make([]time.Duration, len(ways))
			iterations := 0
			for b.Loop() {
				for _, k := range rand.Perm(len(ways)) {
					start := time.Now()
					cycle(k)
					spent[k] += time.Since(start)
				}
				iterations++
			}
			b.ReportMetric(0, "ns/op") // an iteration runs both ways
			for k, w := range ways {
				b.ReportMetric(float64(spent[k].Nanoseconds())/float64(iterations), w.name+"-ns/op")
			}
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "stalled-ratio")
		})
	}
}
