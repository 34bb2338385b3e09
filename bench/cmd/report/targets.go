package main

import (
	"fmt"
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
	cell func(r results, driver string) string
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

// bounded is the cell of a target on one figure.
func bounded(f figure, limit float64, atMost bool, format string) func(results, string) string {
	return func(r results, driver string) string {
		v, ok := f(r, driver)
		return check(v, ok, limit, atMost, format)
	}
}

// each is the cell of a target on several figures, each against the same
// bound: "a / b", or "–" when none was measured.
func each(fs []figure, limit float64, atMost bool, format string) func(results, string) string {
	return func(r results, driver string) string {
		var cells []string
		measured := false
		for _, f := range fs {
			v, ok := f(r, driver)
			measured = measured || ok
			cells = append(cells, check(v, ok, limit, atMost, format))
		}
		if !measured {
			return "–"
		}
		return strings.Join(cells, " / ")
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

// allocRatio compares the allocations of two contenders, serially.
func allocRatio(num, den string) figure {
	return func(r results, driver string) (float64, bool) {
		n, ok1 := r.median("BenchmarkLock/"+driver+"/"+num+"/serial", "allocs/op")
		d, ok2 := r.median("BenchmarkLock/"+driver+"/"+den+"/serial", "allocs/op")
		return n / d, ok1 && ok2 && d != 0
	}
}

// allocsOver is the allocations of a contender less those of another,
// serially.
func allocsOver(a, b string) figure {
	return func(r results, driver string) (float64, bool) {
		x, ok1 := r.median("BenchmarkLock/"+driver+"/"+a+"/serial", "allocs/op")
		y, ok2 := r.median("BenchmarkLock/"+driver+"/"+b+"/serial", "allocs/op")
		return x - y, ok1 && ok2
	}
}

// throughputVs compares the parallel throughput of contender name over the
// driver of the column with that of contender other over driver, in
// BenchmarkLock: the interleaved runs pair contenders of one driver only.
func throughputVs(name, driver, other string) figure {
	return func(r results, column string) (float64, bool) {
		n, ok1 := r.median("BenchmarkLock/"+column+"/"+name+"/parallel", "ns/op")
		d, ok2 := r.median("BenchmarkLock/"+driver+"/"+other+"/parallel", "ns/op")
		return d / n, ok1 && ok2 && n != 0
	}
}

// only restricts a figure to the column of one driver.
func only(driver string, f figure) figure {
	return func(r results, column string) (float64, bool) {
		if column != driver {
			return 0, false
		}
		return f(r, column)
	}
}

// noscriptRatio is the median over the rounds of the ratio of a contender's time
// to the raw baseline's in BenchmarkInterleaved's one-node group, as the
// section of single without scripts gives it.
func noscriptRatio(name, mode string) figure {
	return func(r results, driver string) (float64, bool) {
		ratios := r.ratios("BenchmarkInterleaved/"+driver+"/one-node/"+mode, name, "raw")
		return median(ratios), len(ratios) > 0
	}
}

// stalledRatio is BenchmarkStalledNode's ratio of the stalled Locker's
// time to the one whose nodes are all up.
func stalledRatio(r results, driver string) (float64, bool) {
	v := r["BenchmarkStalledNode/"+driver]["stalled-ratio"]
	return median(v), len(v) > 0
}

// contendedFig reads a figure of the contention benchmark: unit, of
// contender name in shape.
func contendedFig(shape, name, unit string) figure {
	return func(r results, driver string) (float64, bool) {
		return r.median("BenchmarkContention/"+shape+"/"+driver+"/"+name, unit)
	}
}

// inShapes reads one figure of single in each of shapes.
func inShapes(unit string, shapes ...string) []figure {
	var fs []figure
	for _, s := range shapes {
		fs = append(fs, contendedFig(s, "single", unit))
	}
	return fs
}

// heldFig reads a figure of BenchmarkHeld's batched locks, n of them.
func heldFig(n int, unit string) figure {
	return only("goredis", func(r results, _ string) (float64, bool) {
		return r.median(heldCase{"batched", n}.bench(), unit)
	})
}

// heldRounds is the cell of the held locks' round trips: each count of
// locks against its own bound.
func heldRounds(r results, driver string) string {
	var cells []string
	measured := false
	for _, n := range heldCounts {
		v, ok := heldFig(n, "roundtrips/round")(r, driver)
		measured = measured || ok
		cells = append(cells, check(v, ok, heldRoundTrips(n), true, "%.2f"))
	}
	if !measured {
		return "–"
	}
	return strings.Join(cells, " / ")
}

// targets are the rows of the targets table.
var targets = []target{
	{"single time ÷ raw time", "≤ 1.1×", "", bounded(timeRatio("single", "raw", "serial", false), 1.1, true, "%.2f")},
	{"single parallel throughput ÷ raw's", "≥ 0.95×", "", bounded(timeRatio("single", "raw", "parallel", true), 0.95, false, "%.2f")},
	{"single allocs − raw allocs", "≤ +5", "", bounded(allocsOver("single", "raw"), 5, true, "%+.0f")},
	{"single over rueidis: parallel throughput ÷ raw go-redis's (BenchmarkLock)", "≥ 1.5×", "", bounded(only("rueidis", throughputVs("single", "goredis", "raw")), 1.5, false, "%.2f")},
	{"single-noscript time ÷ raw time, serial / parallel", "≤ 2×", "noscript", each([]figure{noscriptRatio("single-noscript", "serial"), noscriptRatio("single-noscript", "parallel")}, 2, true, "%.2f")},
	{"redlock-5 allocs ÷ redsync-5 allocs", "≤ 1×", "", bounded(allocRatio("redlock-5", "redsync-5"), 1, true, "%.2f")},
	{"redlock-5 parallel throughput ÷ redsync-5's", "≥ 1×", "", bounded(timeRatio("redlock-5", "redsync-5", "parallel", true), 1, false, "%.2f")},
	{"redlock-3 with one node stalled: time ÷ all up", "≤ 2×", "stalled", bounded(stalledRatio, 2, true, "%.2f")},
	{"otel-sdk time ÷ single time", "≤ 1.1×", "", bounded(timeRatio("otel-sdk", "single", "serial", false), 1.1, true, "%.2f")},
	{"single waiting, 8 Lockers / 8 processes: handoff to another waiter", "≥ 80 %", "", each(inShapes("other-%", "8-lockers", "8-procs"), 80, false, "%.0f")},
	{"single waiting, 8 Lockers / 8 processes / 64 Lockers: commands per acquisition", "≤ 4", "", each(inShapes("cmds/acq", "8-lockers", "8-procs", "64-lockers"), 4, true, "%.2f")},
	{"single waiting, 8 Lockers / 8 processes: worst wait ÷ fair ideal", "≤ 3×", "", each(inShapes("worst/ideal", "8-lockers", "8-procs"), 3, true, "%.2f")},
	{"single waiting, 8 Lockers / 8 processes: handoff p99", "≤ 1000 µs", "", each(inShapes("handoff-p99-us", "8-lockers", "8-procs"), 1000, true, "%.0f")},
	{"held locks on one server: round trips per round of refreshes, 100 / 1000 / 10,000 locks", heldBounds(), "held", heldRounds},
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
