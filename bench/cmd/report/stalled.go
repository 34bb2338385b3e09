package main

import (
	"slices"
	"strings"
)

// stalledTitle is the heading of BenchmarkStalledNode's section, which
// -only stalled rewrites.
const stalledTitle = "Redlock-3 with one node stalled"

// stalledSection writes BenchmarkStalledNode's table: Redlock-3 with one
// node stalled against every node up, the median of the ratio within each
// round and its spread over the rounds.
func stalledSection(b *strings.Builder, r results, intro string) {
	header(b, stalledTitle,
		intro+"BenchmarkStalledNode: Obtain and Release of one key, again and again, one attempt each, by a Locker of `redlock-3` whose third node is stopped (SIGSTOP) for the whole case, against one whose nodes are all up; the two take turns in a random order within each iteration. "+
			"Time per cycle, median over the rounds; × all up: the median over the rounds of the ratio within each round, and its least and greatest (spread).",
		[]string{"Driver", "All up µs", "One stalled µs", "× all up", "Spread"}, 1)
	for _, d := range driverNames {
		bench := "BenchmarkStalledNode/" + d
		up, ok1 := r.median(bench, "all-up-ns/op")
		stalled, ok2 := r.median(bench, "stalled-ns/op")
		ratios := r[bench]["stalled-ratio"]
		if !ok1 || !ok2 || len(ratios) == 0 {
			continue
		}
		row(b, d, fig(up/1e3, true, "%.1f"), fig(stalled/1e3, true, "%.1f"), fig(median(ratios), true, "%.2f"), spread(ratios))
	}
	b.WriteString("\n")
}

// spread writes the least and the greatest of ratios.
func spread(ratios []float64) string {
	if len(ratios) == 0 {
		return "–"
	}
	return fig(slices.Min(ratios), true, "%.2f") + " to " + fig(slices.Max(ratios), true, "%.2f")
}
