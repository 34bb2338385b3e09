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
		[]string{"Locks", "Mode", "goroutines/lock", "heap KB/lock", "stack KB/lock", "connections", "server cmds/s", "round trips/s", "refreshes/lock/s", "round trips/round", "scripts/round", "client CPU %", "lost"}, 2)
	for _, c := range r.heldCases() {
		bench := c.bench()
		get := func(unit string) (float64, bool) { return r.median(bench, unit) }
		gor, gok := get("goroutines/lock")
		heap, hok := get("heap-B/lock")
		stack, sok := get("stack-B/lock")
		cmds, cok := get("server-cmds/s")
		rt, rok := get("roundtrips/s")
		cpu, pok := get("client-cpu-%")
		conns, nok := get("conns")
		refreshes, fok := get("refreshes/lock/s")
		round, dok := get("roundtrips/round")
		scripts, tok := get("scripts/round")
		lost, lok := get("lost")
		rtFormat, roundFormat := "%.1f", "%.1f"
		if rt >= 100 {
			rtFormat = "%.0f"
		}
		if round >= 100 {
			roundFormat = "%.0f"
		}
		row(b, strconv.Itoa(c.n), c.mode,
			fig(gor, gok, "%.2f"), fig(heap/1e3, hok, "%.1f"), fig(stack/1e3, sok, "%.1f"), fig(conns, nok, "%.0f"), fig(cmds, cok, "%.0f"),
			fig(rt, rok, rtFormat), fig(refreshes, fok, "%.2f"), fig(round, dok, roundFormat), fig(scripts, tok, "%.0f"), fig(cpu, pok, "%.1f"), fig(lost, lok, "%.0f"))
	}
	b.WriteString("\n")
}

// heldCounts are the numbers of locks of BenchmarkHeld's targets.
var heldCounts = []int{100, 1000, 10000}

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

// heldBounds writes the bounds of heldRoundTrips for heldCounts.
func heldBounds() string {
	var s []string
	for _, n := range heldCounts {
		s = append(s, fmt.Sprintf("%g", heldRoundTrips(n)))
	}
	return "≤ " + strings.Join(s, " / ")
}
