package bench

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The contention workload: goroutines take turns on one key, each holding
// the lock for hold, until acquisitions locks were taken in all.
const (
	goroutines   = 8
	hold         = time.Millisecond
	acquisitions = 2000
)

// BenchmarkContention runs the contention workload once per iteration for
// every contender that CanContend (BenchmarkContention/<driver>/<name>),
// and reports, for the last run:
//
//   - acq/s: acquisitions per second;
//   - handoff-p50-us, handoff-p99-us: from the moment a holder starts to
//     release to the moment the next holder's obtain returns;
//   - wait-p99-ms, wait-max-ms: how long an obtain waited;
//   - other-%: the share of acquisitions that went to a goroutine other
//     than the one that released last;
//   - cmds/acq: the commands the clients sent (lock commands, failed
//     attempts and releases; not connection handshakes), per acquisition;
//   - overlaps: acquisitions made while another goroutine held the lock,
//     which fail the benchmark.
//
// With -short it takes 100 locks instead of 2000, for CI.
//
//	go test -run '^$' -bench Contention -benchtime 1x
func BenchmarkContention(b *testing.B) {
	addrs := servers(b)
	n := acquisitions
	if testing.Short() {
		n = 100
	}
	for _, c := range contenders() {
		if c.uncontendedOnly {
			continue
		}
		b.Run(c.driver+"/"+c.name, func(b *testing.B) {
			var sent atomic.Int64
			m := c.new(b, addrs[:c.nodes], &sent)
			key := "contend:" + c.driver + "/" + c.name
			var r contention
			for b.Loop() {
				sent.Store(0)
				r = contend(b, m, key, n)
				r.commands = sent.Load()
			}
			r.report(b)
		})
	}
}

// turn is one acquisition.
type turn struct {
	g                 int       // the goroutine that took it
	asked, got, letGo time.Time // obtain called and returned; release called
}

// contention is what one run of the workload measured.
type contention struct {
	turns    []turn // in the order the lock was taken
	elapsed  time.Duration
	overlaps int64
	commands int64
}

// contend runs the workload: n acquisitions of key by goroutines goroutines.
func contend(b *testing.B, m mutex, key string, n int) contention {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		turns    = make([]turn, 0, n)
		left     atomic.Int64
		holders  atomic.Int64
		overlaps atomic.Int64
		wg       sync.WaitGroup
	)
	left.Store(int64(n))
	start := time.Now()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				asked := time.Now()
				h, err := m.obtain(ctx, key, true)
				if err != nil {
					b.Errorf("goroutine %d: obtain: %v", g, err)
					return
				}
				got := time.Now()
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				mu.Lock()
				i := len(turns)
				turns = append(turns, turn{g: g, asked: asked, got: got})
				mu.Unlock()

				time.Sleep(hold)

				// The lock is still ours in Redis until Release's command
				// lands, so leaving the count first cannot hide an overlap.
				holders.Add(-1)
				letGo := time.Now()
				mu.Lock()
				turns[i].letGo = letGo
				mu.Unlock()
				if err := h.Release(ctx); err != nil {
					b.Errorf("goroutine %d: release: %v", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	r := contention{turns: turns, elapsed: time.Since(start), overlaps: overlaps.Load()}
	if r.overlaps > 0 {
		b.Errorf("%d acquisitions overlapped another holder", r.overlaps)
	}
	return r
}

// report records the run's figures as the benchmark's metrics.
func (r contention) report(b *testing.B) {
	n := len(r.turns)
	if n < 2 {
		return
	}
	var handoffs, waits []time.Duration
	other := 0
	for i, t := range r.turns {
		waits = append(waits, t.got.Sub(t.asked))
		if i == 0 {
			continue
		}
		prev := r.turns[i-1]
		handoffs = append(handoffs, t.got.Sub(prev.letGo))
		if t.g != prev.g {
			other++
		}
	}
	slices.Sort(handoffs)
	slices.Sort(waits)
	b.ReportMetric(0, "ns/op") // one op is the whole workload: meaningless
	b.ReportMetric(float64(n)/r.elapsed.Seconds(), "acq/s")
	b.ReportMetric(micros(quantile(handoffs, 0.50)), "handoff-p50-us")
	b.ReportMetric(micros(quantile(handoffs, 0.99)), "handoff-p99-us")
	b.ReportMetric(micros(quantile(waits, 0.99))/1000, "wait-p99-ms")
	b.ReportMetric(micros(waits[len(waits)-1])/1000, "wait-max-ms")
	b.ReportMetric(100*float64(other)/float64(n-1), "other-%")
	b.ReportMetric(float64(r.commands)/float64(n), "cmds/acq")
	b.ReportMetric(float64(r.overlaps), "overlaps")
}

// quantile returns the q-quantile of sorted, by the nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
