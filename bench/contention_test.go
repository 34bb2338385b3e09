package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The contention workload: contenders take turns on one key, each holding
// the lock for hold, until acquisitions locks were taken in all.
const (
	hold              = time.Millisecond
	acquisitions      = 2000
	shortAcquisitions = 100 // with -short, for CI
)

// A shape is how the contention workload's contenders are laid out: each
// is a mutex of its own, with clients of its own (a Locker and its go-redis
// client or redigo pool, say), run by a goroutine or by an OS process.
type shape struct {
	name       string
	contenders int
	procs      bool                   // a process per contender; otherwise a goroutine
	has        func(c contender) bool // whether the shape runs c
}

var shapes = []shape{
	{"8-lockers", 8, false, func(contender) bool { return true }},
	{"8-procs", 8, true, isSingle},
	{"64-lockers", 64, false, func(c contender) bool { return isSingle(c) || c.name == "bsm-redislock" }},
}

// isSingle reports whether c is locksmith's single strategy, waiting by
// notification or by polling.
func isSingle(c contender) bool { return c.name == "single" || c.name == "single-poll" }

// BenchmarkContention runs the contention workload once per iteration for
// every shape and every contender that the shape runs
// (BenchmarkContention/<shape>/<driver>/<name>), and reports, for the last
// run:
//
//   - acq/s: acquisitions per second;
//   - handoff-p50-us, handoff-p99-us: from the moment a holder starts to
//     release to the moment the next holder's obtain returns;
//   - wait-p50-ms, wait-p99-ms, wait-max-ms: how long an obtain waited;
//   - ideal-ms: the fair ideal, (contenders − 1) × (hold + the median
//     handoff): every wait of a FIFO queue, the worst included (see report,
//     which also gives a semaphore's);
//   - worst/ideal, p99/ideal: the longest wait, and the 99th percentile,
//     over the fair ideal;
//   - max-passed: the most acquisitions by others while one obtain waited;
//     in a FIFO queue, at most contenders − 1;
//   - other-%: the share of acquisitions that went to a contender other
//     than the one that released last;
//   - cmds/acq: the commands the clients sent (lock commands, failed
//     attempts and releases, a subscriber connection's SUBSCRIBE; not
//     connection handshakes), per acquisition;
//   - acqs: the acquisitions of the run;
//   - wake-message, wake-subscribed, wake-resubscribed, wake-timer,
//     missed: why locksmith's waiters woke, and how many notifications
//     were lost (lock.Hooks Wait), in the whole run;
//   - overlaps: acquisitions whose holding time, from obtain's return to
//     the call of release, intersects another's; they fail the benchmark.
//
// With -short it takes shortAcquisitions locks instead of acquisitions.
//
//	go test -run '^$' -bench Contention -benchtime 1x
func BenchmarkContention(b *testing.B) {
	addrs := servers(b)
	n := acquisitions
	if testing.Short() {
		n = shortAcquisitions
	}
	for _, s := range shapes {
		for _, c := range contenders() {
			if c.uncontendedOnly || !s.has(c) {
				continue
			}
			b.Run(s.name+"/"+c.driver+"/"+c.name, func(b *testing.B) {
				if c.notifies && !subscribes(b, c.driver, addrs[0]) {
					b.Skipf("the %s driver cannot subscribe: its waiters would poll every %v", c.driver, notifyTimer)
				}
				key := "contend:" + s.name + "/" + c.driver + "/" + c.name
				var r contention
				for b.Loop() {
					if s.procs {
						r = contendProcs(b, c, addrs[:c.nodes], key, s.contenders, n)
					} else {
						r = contend(b, c, addrs[:c.nodes], key, s.contenders, n)
					}
				}
				r.report(b, s.contenders, 1)
			})
		}
	}
}

// turn is one acquisition.
type turn struct {
	g                 int       // the contender that took it
	permit            int       // the semaphore permit it held (Lock.Permit); 0 for a plain lock
	asked, got, letGo time.Time // obtain called and returned; release called
}

// contention is what one run of the workload measured.
type contention struct {
	turns   []turn
	elapsed time.Duration
	tally   tally
}

// tally is what the clients of a run's contenders counted.
type tally struct {
	Commands int64
	Wakes    [len(wakeReasons)]int64 // by wakeReasons
	Missed   int64
}

// tally returns what cs counted.
func (cs *counters) tally() tally {
	t := tally{Commands: cs.sent.Load(), Missed: cs.missed.Load()}
	for i := range t.Wakes {
		t.Wakes[i] = cs.wakes[i].Load()
	}
	return t
}

// add adds u to t.
func (t *tally) add(u tally) {
	t.Commands += u.Commands
	t.Missed += u.Missed
	for i := range t.Wakes {
		t.Wakes[i] += u.Wakes[i]
	}
}

// contend runs the workload with k contenders of c, each a mutex of its
// own run by a goroutine, until they took key n times.
func contend(b *testing.B, c contender, addrs []string, key string, k, n int) contention {
	cs := &counters{}
	ms := make([]mutex, k)
	for g := range ms {
		ms[g] = c.new(b, addrs, cs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		turns = make([]turn, 0, n)
		left  atomic.Int64
		wg    sync.WaitGroup
	)
	left.Store(int64(n))
	start := time.Now()
	for g, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := take(ctx, m, key, func() bool { return left.Add(-1) >= 0 }, func(t turn) {
				t.g = g
				mu.Lock()
				turns = append(turns, t)
				mu.Unlock()
			})
			if err != nil {
				b.Errorf("contender %d: %v", g, err)
			}
		}()
	}
	wg.Wait()
	return contention{turns: turns, elapsed: time.Since(start), tally: cs.tally()}
}

// take runs one contender's part of the workload: while next grants it
// another turn, it obtains key with m, waiting, holds it for hold, releases
// it, and hands the turn to done.
func take(ctx context.Context, m mutex, key string, next func() bool, done func(turn)) error {
	for next() {
		t := turn{asked: time.Now()}
		h, err := m.obtain(ctx, key, true)
		if err != nil {
			return fmt.Errorf("obtain: %w", err)
		}
		t.got = time.Now()
		if p, ok := h.(interface{ Permit() (int, bool) }); ok {
			t.permit, _ = p.Permit()
		}
		time.Sleep(hold)
		// The lock is still ours in Redis until Release's command lands, so
		// the interval [got, letGo] lies within the time we held it: two
		// that intersect are an overlap.
		t.letGo = time.Now()
		if err := h.Release(ctx); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		done(t)
	}
	return nil
}

// report records the figures of a run of k contenders for a lock that
// admits permits holders at once (1 for a plain lock, n for a semaphore of
// n) as the benchmark's metrics, and fails the benchmark if an acquisition
// began while permits others held the lock.
//
// A handoff is from the release of a permit to the next acquisition of the
// same permit (Lock.Permit). The fair ideal is the wait of a FIFO queue in
// which every contender asks again as soon as it released: it joins the
// tail behind the k − permits − 1 waiters that the released permit did
// not go to, and is granted the (k − permits)th permit released after it
// asked; permits holders release permits per (hold + handoff), so it
// waits (k ÷ permits − 1) × (hold + the median handoff). With one permit
// that is (k − 1) × (hold + handoff), every waiter's wait, the worst
// included; with several, the releases of the permits are staggered, and
// a FIFO queue's worst wait is ⌈(k − permits) ÷ permits⌉ × (hold +
// handoff), 15/13 of the ideal for 16 contenders and 3 permits.
func (r contention) report(b *testing.B, k, permits int) {
	n := len(r.turns)
	if n < 2 {
		return
	}
	turns := slices.SortedFunc(slices.Values(r.turns), func(x, y turn) int { return x.got.Compare(y.got) })
	var handoffs, waits []time.Duration
	other := 0
	last := map[int]turn{} // by permit, the turn that held it last
	for _, t := range turns {
		waits = append(waits, t.got.Sub(t.asked))
		if prev, ok := last[t.permit]; ok {
			handoffs = append(handoffs, t.got.Sub(prev.letGo))
			if t.g != prev.g {
				other++
			}
		}
		last[t.permit] = t
	}
	passed := 0
	for i, t := range turns {
		first, _ := slices.BinarySearchFunc(turns, t.asked, func(x turn, at time.Time) int { return x.got.Compare(at) })
		passed = max(passed, i-first)
	}
	overlaps := overlapping(turns, permits)
	slices.Sort(handoffs)
	slices.Sort(waits)
	hop := hold + quantile(handoffs, 0.50)
	ideal := time.Duration(float64(hop) * (float64(k)/float64(permits) - 1))
	b.ReportMetric(0, "ns/op") // one op is the whole workload: meaningless
	b.ReportMetric(float64(n), "acqs")
	b.ReportMetric(float64(n)/r.elapsed.Seconds(), "acq/s")
	b.ReportMetric(micros(quantile(handoffs, 0.50)), "handoff-p50-us")
	b.ReportMetric(micros(quantile(handoffs, 0.99)), "handoff-p99-us")
	b.ReportMetric(micros(quantile(waits, 0.50))/1000, "wait-p50-ms")
	b.ReportMetric(micros(quantile(waits, 0.99))/1000, "wait-p99-ms")
	b.ReportMetric(micros(waits[len(waits)-1])/1000, "wait-max-ms")
	b.ReportMetric(micros(ideal)/1000, "ideal-ms")
	b.ReportMetric(float64(waits[len(waits)-1])/float64(ideal), "worst/ideal")
	b.ReportMetric(float64(quantile(waits, 0.99))/float64(ideal), "p99/ideal")
	b.ReportMetric(float64(passed), "max-passed")
	b.ReportMetric(100*float64(other)/float64(len(handoffs)), "other-%")
	b.ReportMetric(float64(r.tally.Commands)/float64(n), "cmds/acq")
	for i, reason := range wakeReasons {
		b.ReportMetric(float64(r.tally.Wakes[i]), "wake-"+reason)
	}
	b.ReportMetric(float64(r.tally.Missed), "missed")
	b.ReportMetric(float64(overlaps), "overlaps")
	if overlaps > 0 {
		b.Errorf("%d acquisitions found %d holders or more already holding", overlaps, permits)
	}
}

// overlapping returns how many of turns, sorted by got, began while limit
// others held the lock: while the holding intervals, [got, letGo], of
// limit turns before them had not ended. The lock stays held in Redis
// until release's command lands, so each interval lies within the real
// holding time, and such a turn is one holder too many.
func overlapping(turns []turn, limit int) int {
	n := 0
	var holding []time.Time // the letGo of the turns that may still hold
	for _, t := range turns {
		holding = slices.DeleteFunc(holding, func(letGo time.Time) bool { return !letGo.After(t.got) })
		if len(holding) >= limit {
			n++
		}
		holding = append(holding, t.letGo)
	}
	return n
}

// quantile returns the q-quantile of sorted, by the nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
