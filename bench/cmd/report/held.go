package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// heldModes are BenchmarkHeld's modes, in the order of the rows.
var heldModes = []string{"batched", "unbatched"}

// heldReference are the reference figures of held locks, measured
// unbatched at an older commit (before batched refresh), by number of
// locks: goroutines per lock, heap KB per lock, server commands per second,
// client CPU %.
var heldReference = map[int][4]float64{
	100:   {1.0, 2.6, 306, 1.7},
	1000:  {1.0, 2.0, 3007, 8.2},
	10000: {1.0, 2.0, 30007, 57.8},
}

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

// heldSection writes BenchmarkHeld's table, with the reference rows
// measured unbatched at an older commit, and its targets.
func heldSection(b *strings.Builder, r results) {
	b.WriteString("### Held locks, refreshed in the background\n\n" +
		"BenchmarkHeld: n locks held by one Locker of `single` over one go-redis client and one server, each refreshed in the background (`StartRefresh`, TTL 3 s, so a refresh every second), measured over 6 s after 3 s of settling (3 s after 1 s with `-short`, which holds at most 1000). `batched`: the Locker refreshes them together, in batches: one script per 1000 locks, all a batch's scripts in one round trip (go-redis pipelines them); `unbatched`: the same Strategy with `strategy.Batcher` hidden, a goroutine and a script per lock and refresh. Goroutines, heap and stack per lock: at the end of the window, less before the locks were obtained (heap: live after a GC; stack: the goroutines' stacks, which the heap leaves out); KB are 1000 bytes. Connections: the client pool's, at the end of the window (each holds go-redis's 32 KiB read and 32 KiB write buffers, which the heap counts: at 100 locks, one more connection is some 650 bytes per lock). Server commands: what the server ran per second (INFO commandstats), the scripts' own commands included; round trips: the client's, per second, counted by a go-redis hook (a command, or a pipeline of several; handshakes left out); refreshes: the locks refreshed (the PEXPIRE calls of the scripts) per lock and second, 1 when each is refreshed once per interval; round trips and scripts per round: the round trips, and the scripts the server received (EVALSHA and EVAL), over the refreshes ÷ n, those that refreshing every lock once takes. Batched refreshes come in bursts, a few per interval, so a 6 s window catches one burst more or less than the average, and the rates per second vary by up to a sixth between runs; the figures per round do not. Client CPU: the benchmark process's CPU time over the window, in % of one core. Lost: locks whose `Err` was not nil at the end (one fails the benchmark). The rows *reference, unbatched* are figures for unbatched locks measured before batched refresh, at an older commit; – is a figure they do not give.\n\n" +
		"| Locks | Mode | goroutines/lock | heap KB/lock | stack KB/lock | connections | server cmds/s | round trips/s | refreshes/lock/s | round trips/round | scripts/round | client CPU % | lost |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	last := 0
	reference := func(n int) {
		if ref, ok := heldReference[n]; ok {
			fmt.Fprintf(b, "| %d | *reference, unbatched* | %.1f | %.1f | – | – | %.0f | – | – | – | – | %.1f | – |\n", n, ref[0], ref[1], ref[2], ref[3])
		}
	}
	for _, c := range r.heldCases() {
		if last != 0 && c.n != last {
			reference(last)
		}
		last = c.n
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
		rtFormat := "%.1f"
		if rt >= 100 {
			rtFormat = "%.0f"
		}
		lost, lok := get("lost")
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.n, c.mode,
			fig(gor, gok, "%.2f"), fig(heap/1e3, hok, "%.1f"), fig(stack/1e3, sok, "%.1f"), fig(conns, nok, "%.0f"), fig(cmds, cok, "%.0f"),
			fig(rt, rok, rtFormat), fig(refreshes, fok, "%.2f"), fig(round, dok, "%.0f"), fig(scripts, tok, "%.0f"), fig(cpu, pok, "%.1f"), fig(lost, lok, "%.0f"))
	}
	if last != 0 {
		reference(last)
	}
	b.WriteString("\n")

	b.WriteString("#### Targets: held locks\n\n" +
		"Round trips per refresh interval must grow with the number of servers, not of locks: with one server, one per round of refreshes (every lock refreshed once) up to 1000 locks, read from the round trips per round, which the window's bursts do not skew. A script carries at most 1000 locks, and the Locker sends the locks due together in batches of at most 1000, each with its own deadline, four at once (so that a machine too busy to refresh them all loses the fewest: docs/design/batched-refresh.md), so more locks on a server take a round trip per 1000 a round, one per script, and one more for the sends that split a round (the refreshes come in a few bursts an interval): at most ⌈n ÷ 1000⌉ + 1. And 10,000 held locks must cost at most 10 % of a core. Batched rows only.\n\n" +
		"| Target | Bound | Measured |\n|---|--:|--:|\n")
	for _, c := range r.heldCases() {
		if c.mode != "batched" {
			continue
		}
		round, ok := r.median(c.bench(), "roundtrips/round")
		bound := 1.0
		if c.n > 1000 {
			bound = float64((c.n+999)/1000 + 1)
		}
		heldTarget(b, fmt.Sprintf("%d locks, one server: round trips per round of refreshes", c.n), round, ok, bound, "%.2f", "")
		if c.n == 10000 {
			cpu, ok := r.median(c.bench(), "client-cpu-%")
			heldTarget(b, "10,000 locks: client CPU", cpu, ok, 10, "%.1f", " %")
		}
	}
	b.WriteString("\n")
}

// heldTarget writes a row of the held targets: v, as format shows it, must
// be at most bound (10.004 round trips per round, shown 10.00, meet a bound
// of 10: a lock whose refresh failed in a batch would count in its script
// and not in the PEXPIRE calls).
func heldTarget(b *strings.Builder, what string, v float64, ok bool, bound float64, format, unit string) {
	shown, _ := strconv.ParseFloat(fmt.Sprintf(format, v), 64)
	mark := " ✅"
	if shown > bound {
		mark = " ❌"
	}
	if !ok {
		mark, unit = "", ""
	}
	fmt.Fprintf(b, "| %s | ≤ %g%s | %s%s%s |\n", what, bound, unit, fig(v, ok, format), unit, mark)
}
