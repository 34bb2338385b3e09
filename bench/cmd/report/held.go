package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// heldTitle is the heading of BenchmarkHeld's section, which -only held
// rewrites.
const heldTitle = "Held locks, refreshed in the background"

// heldModes are BenchmarkHeld's modes, in the order of the rows.
var heldModes = []string{"batched", "unbatched"}

// heldCase is one case of BenchmarkHeld: <mode>/<n>-locks.
type heldCase struct {
	mode string
	n    int
}

// heldCases returns the cases of BenchmarkHeld that ran, by number of
// locks and then mode.
func (r results) heldCases() []heldCase {
	var cs []heldCase
	for name := range r {
		rest, ok := strings.CutPrefix(name, "BenchmarkHeld/")
		if !ok {
			continue
		}
		mode, locks, _ := strings.Cut(rest, "/")
		n, err := strconv.Atoi(strings.TrimSuffix(locks, "-locks"))
		if err == nil {
			cs = append(cs, heldCase{mode, n})
		}
	}
	slices.SortFunc(cs, func(a, b heldCase) int {
		return cmp.Or(a.n-b.n, slices.Index(heldModes, a.mode)-slices.Index(heldModes, b.mode))
	})
	return cs
}

func (c heldCase) bench() string {
	return "BenchmarkHeld/" + c.mode + "/" + strconv.Itoa(c.n) + "-locks"
}

// heldSection writes BenchmarkHeld's table.
func heldSection(b *strings.Builder, r results, intro string) {
	header(b, heldTitle,
		intro+"BenchmarkHeld: n locks held by one Locker of `single` over one go-redis client and one server, each refreshed in the background (`StartRefresh`, TTL 3 s, so a refresh every second), measured over 6 s after 3 s of settling (3 s after 1 s with `-short`, which holds at most 1000). "+
			"`batched`: the Locker refreshes them together ([batched refresh](../docs/design/batched-refresh.md)), the locks due at once in batches of at most 1000, each batch one script and one round trip, four on their way at once; `unbatched`: the same Strategy with `strategy.Batcher` hidden, a goroutine and a script per lock and refresh. "+
			"Goroutines, heap and stack per lock: at the end of the window, less before the locks were obtained (heap: live after a GC; stack: the goroutines' stacks, which the heap leaves out); KB are 1000 bytes. "+
			"Connections: the client pool's at the end (each holds go-redis's 32 KiB read and 32 KiB write buffers, which the heap counts: at 100 locks, one more connection is some 650 bytes per lock). "+
			"Server commands: what the server ran per second (INFO commandstats), the scripts' own included; round trips: the client's per second (a command, or a pipeline of several); refreshes: the locks refreshed (the scripts' PEXPIRE calls) per lock and second, 1 when each is refreshed once per interval; "+
			"round trips and scripts per round: those that refreshing every lock once takes (over the refreshes ÷ n). Batched refreshes come in bursts, so the rates per second vary by up to a sixth between runs; the figures per round do not. "+
			"Client CPU: the benchmark process's CPU time over the window, in % of one core. Lost: locks whose `Err` was not nil at the end; one fails the benchmark.",
		titles([]string{"Locks", "Mode"}, heldColumns), 2)
	for _, c := range r.heldCases() {
		row(b, r.cells(c.bench(), []string{strconv.Itoa(c.n), c.mode}, heldColumns)...)
	}
	b.WriteString("\n")
}

// heldColumns are the figures of BenchmarkHeld's table; KB are 1000 bytes.
var heldColumns = []column{
	{"goroutines/lock", "goroutines/lock", "%.2f", 0}, {"heap KB/lock", "heap-B/lock", "%.1f", 1e3}, {"stack KB/lock", "stack-B/lock", "%.1f", 1e3},
	{"connections", "conns", "%.0f", 0}, {"server cmds/s", "server-cmds/s", "%.0f", 0}, {"round trips/s", "roundtrips/s", "", 0},
	{"refreshes/lock/s", "refreshes/lock/s", "%.2f", 0}, {"round trips/round", "roundtrips/round", "", 0}, {"scripts/round", "scripts/round", "%.0f", 0},
	{"client CPU %", "client-cpu-%", "%.1f", 0}, {"lost", "lost", "%.0f", 0},
}

// heldRoundTrips is the most round trips per round of refreshes that n
// batched locks on one server may take: one up to a script's 1000 locks,
// and beyond, one per 1000 and one more for the sends that split a round
// (its refreshes come in a few bursts an interval).
func heldRoundTrips(n int) float64 {
	if n <= 1000 {
		return 1
	}
	return float64((n+999)/1000 + 1)
}

// heldRounds is the target of the held locks' round trips: 100, 1000 and
// 10,000 locks, each against its bound.
func heldRounds() target {
	var bounds []string
	var cells []cell
	for _, n := range []int{100, 1000, 10000} {
		bounds = append(bounds, fmt.Sprintf("%g", heldRoundTrips(n)))
		cells = append(cells, bounded(heldFig(n, "roundtrips/round"), heldRoundTrips(n), true, "%.2f"))
	}
	return target{"held locks on one server: round trips per round of refreshes, 100 / 1000 / 10,000 locks", "≤ " + strings.Join(bounds, " / "), "held", each(cells...)}
}
