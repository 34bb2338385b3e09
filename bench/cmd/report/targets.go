package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// targetsTitle is the heading of the targets table, whose rows -only
// rewrites for its section.
const targetsTitle = "Targets"

// A target is a row of the targets table: a bound on figures of the
// report, and for each driver its cell, the figures and whether they meet
// it.
type target struct {
	what, bound string
	// part is the section whose run alone (-only) measures the figures;
	// "" for those of the full run only.
	part string
	cell cell
}

// A figure reads a figure of the results for a driver, and whether it was
// measured.
type figure func(r results, driver string) (float64, bool)

// check formats v and says whether it meets limit: at most limit if
// atMost, otherwise at least, as the figure is shown (1.004 shown 1.00
// meets a bound of 1); "–" when it was not measured.
func check(v float64, ok bool, limit float64, atMost bool, format string) string {
	if !ok {
		return "–"
	}
	s := fmt.Sprintf(format, v)
	shown, _ := strconv.ParseFloat(s, 64)
	met := shown <= limit
	if !atMost {
		met = shown >= limit
	}
	if !met {
		return s + " ❌"
	}
	return s + " ✅"
}

// A cell is a target's cell for a driver.
type cell func(r results, driver string) string

// bounded is the cell of a target on one figure.
func bounded(f figure, limit float64, atMost bool, format string) cell {
	return func(r results, driver string) string {
		v, ok := f(r, driver)
		return check(v, ok, limit, atMost, format)
	}
}

// each is the cell of a target on several figures, each against its
// bound: "a / b", or "–" when none was measured.
func each(cells ...cell) cell {
	return func(r results, driver string) string {
		var s []string
		for _, c := range cells {
			s = append(s, c(r, driver))
		}
		if slices.IndexFunc(s, func(c string) bool { return c != "–" }) < 0 {
			return "–"
		}
		return strings.Join(s, " / ")
	}
}

// timeRatio compares the interleaved times of two contenders of a group in
// mode: the median over the rounds of num's time over den's, which took
// turns in each round, or with inverse of den's over num's (a throughput
// ratio).
func timeRatio(num, den, mode string, inverse bool) figure {
	return func(r results, driver string) (float64, bool) {
		_, x, ok := r.versus(driver+"/"+num, den, mode)
		if inverse {
			x = 1 / x
		}
		return x, ok
	}
}

// in reads unit of the benchmark bench, whose * is the driver.
func in(bench, unit string) figure {
	return func(r results, driver string) (float64, bool) {
		return r.median(strings.Replace(bench, "*", driver, 1), unit)
	}
}

// combine is f of the figures a and b, measured if both were and f's
// value is finite.
func combine(f func(a, b float64) float64, a, b figure) figure {
	return func(r results, driver string) (float64, bool) {
		x, ok1 := a(r, driver)
		y, ok2 := b(r, driver)
		v := f(x, y)
		return v, ok1 && ok2 && !math.IsInf(v, 0) && !math.IsNaN(v)
	}
}

func quotient(a, b float64) float64 { return a / b }

func difference(a, b float64) float64 { return a - b }

// only restricts a figure to the column of one driver.
func only(driver string, f figure) figure {
	return func(r results, column string) (float64, bool) {
		if column != driver {
			return 0, false
		}
		return f(r, column)
	}
}

// inShapes is the cell of a target on a figure of single in each of shapes.
func inShapes(unit string, limit float64, atMost bool, format string, shapes ...string) cell {
	var cells []cell
	for _, s := range shapes {
		cells = append(cells, bounded(in("BenchmarkContention/"+s+"/*/single", unit), limit, atMost, format))
	}
	return each(cells...)
}

// heldFig reads a figure of BenchmarkHeld's batched locks, n of them.
func heldFig(n int, unit string) figure {
	return only("goredis", in(heldCase{"batched", n}.bench(), unit))
}

// allocs reads the allocations of contender name in BenchmarkLock, serially.
func allocs(name string) figure { return in("BenchmarkLock/*/"+name+"/serial", "allocs/op") }

// targets are the rows of the targets table.
var targets = []target{
	{"single time ÷ raw time", "≤ 1.1×", "", bounded(timeRatio("single", "raw", "serial", false), 1.1, true, "%.2f")},
	{"single parallel throughput ÷ raw's", "≥ 0.95×", "", bounded(timeRatio("single", "raw", "parallel", true), 0.95, false, "%.2f")},
	{"single allocs − raw allocs", "≤ +5", "", bounded(combine(difference, allocs("single"), allocs("raw")), 5, true, "%+.0f")},
	{"single over rueidis: parallel throughput ÷ raw go-redis's (BenchmarkLock)", "≥ 1.5×", "", bounded(only("rueidis",
		combine(quotient, in("BenchmarkLock/goredis/raw/parallel", "ns/op"), in("BenchmarkLock/*/single/parallel", "ns/op"))), 1.5, false, "%.2f")},
	{"single-noscript time ÷ raw time, serial / parallel", "≤ 2×", "noscript", each(bounded(timeRatio("single-noscript", "raw", "serial", false), 2, true, "%.2f"),
		bounded(timeRatio("single-noscript", "raw", "parallel", false), 2, true, "%.2f"))},
	{"redlock-5 allocs ÷ redsync-5 allocs", "≤ 1×", "", bounded(combine(quotient, allocs("redlock-5"), allocs("redsync-5")), 1, true, "%.2f")},
	{"redlock-5 parallel throughput ÷ redsync-5's", "≥ 1×", "", bounded(timeRatio("redlock-5", "redsync-5", "parallel", true), 1, false, "%.2f")},
	{"redlock-3 with one node stalled: time ÷ all up", "≤ 2×", "stalled", bounded(in("BenchmarkStalledNode/*", "stalled-ratio"), 2, true, "%.2f")},
	{"otel-sdk time ÷ single time", "≤ 1.1×", "", bounded(timeRatio("otel-sdk", "single", "serial", false), 1.1, true, "%.2f")},
	{"single waiting, 8 Lockers / 8 processes: handoff to another waiter", "≥ 80 %", "", inShapes("other-%", 80, false, "%.0f", "8-lockers", "8-procs")},
	{"single waiting, 8 Lockers / 8 processes / 64 Lockers: commands per acquisition", "≤ 4", "", inShapes("cmds/acq", 4, true, "%.2f", "8-lockers", "8-procs", "64-lockers")},
	{"single waiting, 8 Lockers / 8 processes: worst wait ÷ fair ideal", "≤ 3×", "", inShapes("worst/ideal", 3, true, "%.2f", "8-lockers", "8-procs")},
	{"single waiting, 8 Lockers / 8 processes: handoff p99", "≤ 1000 µs", "", inShapes("handoff-p99-us", 1000, true, "%.0f", "8-lockers", "8-procs")},
	heldRounds(),
	{"10,000 held locks: client CPU", "≤ 10 %", "held", bounded(heldFig(10000, "client-cpu-%"), 10, true, "%.1f")},
}

// targetRow renders the row of t.
func targetRow(r results, t target) string {
	cells := []string{t.what, t.bound}
	for _, d := range driverNames {
		cells = append(cells, t.cell(r, d))
	}
	return "| " + strings.Join(cells, " | ") + " |\n"
}

// targetRows renders the rows of the targets that the section part
// measures.
func targetRows(r results, part string) []string {
	var rows []string
	for _, t := range targets {
		if t.part == part {
			rows = append(rows, targetRow(r, t))
		}
	}
	return rows
}

// targetsTable writes the targets table.
func targetsTable(b *strings.Builder, r results) {
	header(b, targetsTitle,
		"The bounds that the figures above are held to: ✅ met, ❌ missed, – not measured (redsync and bsm/redislock have no rueidis adapter, the OpenTelemetry contenders and BenchmarkHeld run over go-redis only, and the contention benchmarks have no rueidis row). "+
			"Times and parallel throughputs are the interleaved ratios (the median over the rounds of the ratio between two contenders that took turns in the same round), allocations BenchmarkLock's; a cell with several figures gives one for each case that the target names, in its order. "+
			"A section run alone rewrites its rows here.",
		append([]string{"Target", "Bound"}, driverNames...), 1)
	for _, t := range targets {
		b.WriteString(targetRow(r, t))
	}
	b.WriteString("\n")
}
