package main

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// uncontended writes BenchmarkLock's figures and BenchmarkInterleaved's
// beside them: a row per contender.
func uncontended(b *strings.Builder, r results) {
	header(b, "Uncontended: one acquire and release",
		"BenchmarkLock runs each contender on its own, seconds apart from the others: serially (one goroutine, one key: the time of an acquire and release) and in parallel (4 × GOMAXPROCS goroutines, a key each: the throughput). "+
			"BenchmarkInterleaved runs the same cases with the contenders of a driver taking turns with its raw baseline in a random order, one acquire and release each (serial) or a 10 ms slice each (parallel), the one-node contenders and the quorum ones in separate groups, so that the load of a shared machine hits them alike: its ratios, the median over the rounds of the ratio within each round, are the steadier ones, and the targets read them. "+
			"× raw: against the raw baseline of the same driver, time for serial (lower is better), throughput for parallel (higher is better). "+
			"B/op, allocs/op and CPU: BenchmarkLock's serial case; CPU is the time per operation in the benchmark's process (getrusage) and in the servers it used (INFO CPU).",
		[]string{"Driver", "Contender", "Serial µs/op", "× raw", "Parallel kop/s", "× raw", "Interleaved serial µs/op", "× raw", "Interleaved parallel kop/s", "× raw",
			"B/op", "allocs/op", "allocs − raw", "CPU µs/op: client + servers"}, 2)
	for _, c := range r.cases("BenchmarkLock", contenders) {
		driver, name, _ := strings.Cut(c, "/")
		s, base := "BenchmarkLock/"+c+"/serial", "BenchmarkLock/"+driver+"/raw/serial" // the baseline of its driver
		ns, ok := r.median(s, "ns/op")
		bns, bok := r.median(base, "ns/op")
		pns, pok := r.median("BenchmarkLock/"+c+"/parallel", "ns/op")
		pbns, pbok := r.median("BenchmarkLock/"+driver+"/raw/parallel", "ns/op")
		ins, ix, iok := r.versus(c, "raw", "serial")
		ipns, ipx, ipok := r.versus(c, "raw", "parallel")
		allocs, aok := r.median(s, "allocs/op")
		ballocs, baok := r.median(base, "allocs/op")
		row(b, driver, name,
			fig(ns/1e3, ok, "%.1f"), fig(ns/bns, ok && bok, "%.2f"),
			fig(1e6/pns, pok, "%.1f"), fig(pbns/pns, pok && pbok, "%.2f"),
			fig(ins/1e3, iok, "%.1f"), fig(ix, iok, "%.2f"),
			fig(1e6/ipns, ipok, "%.1f"), fig(1/ipx, ipok, "%.2f"),
			r.cell(s, "B/op", "%.0f"), fig(allocs, aok, "%.0f"), fig(allocs-ballocs, aok && baok, "%+.0f"), r.cpu(s))
	}
	b.WriteString("\n")
}

// multiKey writes BenchmarkMultiKey's table: a lock of several keys
// against taking them one by one, each pair from the same iterations; a
// row per driver and strategy, and columns for each number of keys.
func multiKey(b *strings.Builder, r results) {
	var cases []string // driver/strategy
	var counts []int
	for name := range r {
		rest, ok := strings.CutPrefix(name, "BenchmarkMultiKey/")
		if n, err := strconv.Atoi(strings.TrimSuffix(path.Base(rest), "-keys")); ok && err == nil {
			cases, counts = append(cases, path.Dir(rest)), append(counts, n)
		}
	}
	slices.SortFunc(cases, byRank(contenders))
	slices.Sort(counts)
	cases, counts = slices.Compact(cases), slices.Compact(counts)
	if len(counts) == 0 {
		counts = []int{2, 10} // the head of an empty table
	}
	columns := []string{"Driver", "Strategy"}
	for _, n := range counts {
		columns = append(columns, fmt.Sprintf("%d keys: one lock µs", n), "separate µs", "× separate")
	}
	header(b, "Several keys: one lock against separate locks",
		"BenchmarkMultiKey: one ObtainMany of n keys sharing a hash tag and its Release ([Locks on several keys](../docs/multi-key.md)), against n Obtain calls in the keys' order and n Releases, which take the same keys one by one, without atomicity; uncontended, the two taking turns in a random order within each iteration. "+
			"Time per iteration, median over the rounds; × separate: one lock's time over the separate locks'. No peer is measured: bsm/redislock's `ObtainMulti` came after v0.9.4, the newest version the Go module proxy serves here.",
		columns, 2)
	for _, c := range cases {
		driver, strategy, _ := strings.Cut(c, "/")
		cells := []string{driver, strategy}
		for _, n := range counts {
			bench := fmt.Sprintf("BenchmarkMultiKey/%s/%d-keys", c, n)
			one, ook := r.median(bench, "one-lock-ns/op")
			sep, sok := r.median(bench, "separate-ns/op")
			cells = append(cells, fig(one/1e3, ook, "%.1f"), fig(sep/1e3, sok, "%.1f"), fig(one/sep, ook && sok, "%.2f"))
		}
		row(b, cells...)
	}
	b.WriteString("\n")
}

// shapes are the layouts of the contention benchmark, by the name of its
// sub-benchmarks.
var shapes = []string{"8-lockers", "8-procs", "64-lockers"}

// wakeUnits are the reasons a waiter of locksmith woke, as
// BenchmarkContention reports them.
var wakeUnits = []string{"wake-message", "wake-subscribed", "wake-resubscribed", "wake-timer"}

// contended writes BenchmarkContention's table: a row per shape and
// contender.
func contended(b *strings.Builder, r results) {
	header(b, "Contention: one key, 1 ms holds",
		"BenchmarkContention: contenders take one key in turn, each holding it for 1 ms, until 2000 locks were taken in all (100 with `-short`). Each contender is a lock with clients of its own, as separate servers would be. "+
			"Shapes: `8-lockers`, 8 contenders in the benchmark's process, every contender; `8-procs`, 8 OS processes (the benchmark runs its own binary again), `single` and `single-poll`; `64-lockers`, 64 in one process, to show whether the cost per acquisition grows with the waiters. "+
			"`single` waits by notification, with a 200 ms timer; the others poll every 1 ms, but for `bsm-redislock-10ms` (10 ms) and `redsync-default` (redsync's default, 50 to 250 ms at random). "+
			"Handoff: from a holder starting to release to the next holder's obtain returning. Worst ÷ ideal: the longest wait over the fair ideal, (contenders − 1) × (hold + median handoff), which a FIFO queue's last waiter waits. "+
			"Most passed: the most acquisitions by others while one obtain waited (at most contenders − 1 in FIFO order). Other: acquisitions that went to a contender other than the last releaser. "+
			"Commands: what the clients sent per acquisition, failed attempts, releases and a subscriber's SUBSCRIBE included, handshakes left out (not counted over rueidis, which has no hooks: no rueidis row). "+
			"Woke: why locksmith's notified waiters woke over the run (lock.Hooks Wait): a message naming the waiter, the confirmation of its subscription, a resubscription after a failure, or its timer; missed: locks obtained after a timer woke the waiter before the holder's key would have expired (a notification lost, or beaten by the timer). "+
			"Overlaps: turns whose holding intervals, from obtain's return to the call of release, intersect; one fails the benchmark.",
		titles([]string{"Shape", "Driver", "Contender"}, contendedColumns, "woke: message / subscribed / resubscribed / timer", "missed", "overlaps"), 3)
	for _, s := range shapes {
		for _, c := range r.cases("BenchmarkContention/"+s, contenders) {
			bench := "BenchmarkContention/" + s + "/" + c
			driver, name, _ := strings.Cut(c, "/")
			woke, missed := "–", "–"
			var wakes []string
			total := 0.0
			for _, unit := range wakeUnits {
				v, ok := r.median(bench, unit)
				total += v
				wakes = append(wakes, fig(v, ok, "%.0f"))
			}
			if total > 0 { // a contender that waited by notification
				woke = strings.Join(wakes, " / ")
				missed = r.cell(bench, "missed", "%.0f")
			}
			cells := r.cells(bench, []string{s, driver, name}, contendedColumns)
			row(b, append(cells, woke, missed, r.cell(bench, "overlaps", "%.0f"))...)
		}
	}
	b.WriteString("\n")
}

// contendedColumns are the figures of BenchmarkContention's table, but for
// the wakes.
var contendedColumns = []column{
	{"acq/s", "acq/s", "%.0f", 0}, {"handoff p50 µs", "handoff-p50-us", "%.0f", 0}, {"handoff p99 µs", "handoff-p99-us", "%.0f", 0},
	{"wait p99 ms", "wait-p99-ms", "%.1f", 0}, {"wait max ms", "wait-max-ms", "%.1f", 0}, {"worst ÷ ideal", "worst/ideal", "%.1f", 0},
	{"most passed", "max-passed", "%.0f", 0}, {"other %", "other-%", "%.0f", 0}, {"commands/acq", "cmds/acq", "%.1f", 0},
}

// semaphoreTitle is the heading of the semaphores' section, which -only
// semaphore rewrites.
const semaphoreTitle = "Semaphores"

// semaphoreWays are the locks of BenchmarkSemaphore and
// BenchmarkSemaphoreContention, in the order of their rows.
var semaphoreWays = []string{"plain", "3-permits", "3-permits-2-held", "1000-permits-999-held", "3-permits-poll"}

// semaphoreSection writes BenchmarkSemaphore's table, one permit of a
// semaphore against a plain lock, uncontended, and
// BenchmarkSemaphoreContention's, if it ran.
func semaphoreSection(b *strings.Builder, r results, intro string) {
	header(b, semaphoreTitle,
		intro+"BenchmarkSemaphore ([Semaphores and read-write locks](../docs/semaphores.md)), uncontended: one goroutine takes one permit of a semaphore of 3 (`lock.WithPermits(3)`) and releases it, and in the same round a plain lock of the same kind of Locker (`single`, one attempt) does the same; "+
			"then the same while another Locker holds every permit but one, of 3 (`3-permits-2-held`) and of 1000 (`1000-permits-999-held`). "+
			"Time: median over the rounds; × plain: median over the rounds of the ratio to the plain lock of the same round. Commands: what the client sent per acquire and release, a script counting as one (not counted over rueidis). "+
			"Server calls: what the server ran (INFO commandstats), the commands that the scripts ran included. Script µs: the server's time in the scripts (the usec of EVALSHA). CPU: in the benchmark's process and in the server (INFO CPU).",
		[]string{"Driver", "Lock", "µs/op", "× plain", "B/op", "allocs/op", "allocs − plain", "commands/op", "server calls/op", "script µs/op", "CPU µs/op: client + server"}, 2)
	for _, c := range r.cases("BenchmarkSemaphore", semaphoreWays) {
		bench := "BenchmarkSemaphore/" + c
		driver, way, _ := strings.Cut(c, "/")
		plain := "BenchmarkSemaphore/" + driver + "/plain"
		ns, ok := r.median(bench, "ns/op")
		x := perRound(r[bench]["ns/op"], r[plain]["ns/op"])
		allocs, aok := r.median(bench, "allocs/op")
		pallocs, paok := r.median(plain, "allocs/op")
		row(b, driver, way,
			fig(ns/1e3, ok, "%.1f"), fig(median(x), len(x) > 0, "%.2f"), r.cell(bench, "B/op", "%.0f"),
			fig(allocs, aok, "%.0f"), fig(allocs-pallocs, aok && paok, "%+.0f"), r.cell(bench, "cmds/op", "%.1f"),
			r.cell(bench, "server-calls/op", "%.1f"), r.cell(bench, "script-us/op", "%.0f"), r.cpu(bench))
	}
	b.WriteString("\n")
	contended := r.cases("BenchmarkSemaphoreContention", semaphoreWays)
	if len(contended) == 0 {
		return
	}
	b.WriteString("BenchmarkSemaphoreContention: 16 contenders, each a Locker of `single` over a client of its own, take permits of a semaphore of 3, each holding one for 1 ms, until 2000 were taken in all (100 with `-short`): `3-permits` waits by notification, with a 200 ms timer, `3-permits-poll` polls every 1 ms, and `plain`, for reference, is a plain lock of the same contenders, waiting by notification. " +
		"The figures are BenchmarkContention's, but for these. Handoff: from the release of a permit to its next acquisition returning. Fair ideal: the wait in a FIFO queue of contenders that ask again as soon as they released, (contenders ÷ permits − 1) × (hold + median handoff): 4.33 holds and handoffs for the semaphore, 15 for the plain lock; with 3 permits, released at staggered times, a FIFO queue's waits spread around it, up to 5 holds and handoffs (1.15 × the ideal). " +
		"Server calls: what the server ran per acquisition. Timer: waiters woken by their timer rather than a message. Overlaps: acquisitions that began while as many others as the lock admits held it.\n\n")
	columns := []column{
		{"acq/s", "acq/s", "%.0f", 0}, {"handoff p50 µs", "handoff-p50-us", "%.0f", 0}, {"handoff p99 µs", "handoff-p99-us", "%.0f", 0},
		{"wait p50 ms", "wait-p50-ms", "%.1f", 0}, {"wait p99 ms", "wait-p99-ms", "%.1f", 0}, {"wait max ms", "wait-max-ms", "%.1f", 0}, {"fair ideal ms", "ideal-ms", "%.1f", 0},
		{"p99 ÷ ideal", "p99/ideal", "%.2f", 0}, {"worst ÷ ideal", "worst/ideal", "%.2f", 0}, {"most passed", "max-passed", "%.0f", 0},
		{"commands/acq", "cmds/acq", "%.1f", 0}, {"server calls/acq", "server-calls/acq", "%.1f", 0}, {"timer", "wake-timer", "%.0f", 0},
		{"overlaps", "overlaps", "%.0f", 0},
	}
	table(b, titles([]string{"Driver", "Lock"}, columns), 2)
	for _, c := range contended {
		driver, way, _ := strings.Cut(c, "/")
		row(b, r.cells("BenchmarkSemaphoreContention/"+c, []string{driver, way}, columns)...)
	}
	b.WriteString("\n")
}
