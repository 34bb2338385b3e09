package main

import (
	"fmt"
	"slices"
	"strings"
)

// The markers around BenchmarkStalledNode's section, which -only stalled
// rewrites.
const (
	stalledBegin = "<!-- report:stalled:begin -->"
	stalledEnd   = "<!-- report:stalled:end -->"
)

// stalledBound is BenchmarkStalledNode's target: Redlock-3 with one node
// stalled at most this many times the time with every node up.
const stalledBound = 2.0

// stalledSection writes BenchmarkStalledNode's table: Redlock-3 with one
// node stalled against every node up, the ratio of each round, its median
// and its spread over the rounds.
func stalledSection(b *strings.Builder, r results) {
	b.WriteString("### Redlock-3 with one node stalled\n\n" +
		"BenchmarkStalledNode: Obtain and Release of one key, again and again, by a Locker of `redlock-3` whose third node is stopped (SIGSTOP) for the whole case, against one whose nodes are all up; the two take turns in a random order within each iteration. Time per cycle, median over the rounds; × all up: the median over the rounds of the ratio within each round, and its least and greatest. Target: at most 2×. At e2dd204, before an Obtain of a key still being released stopped waiting for the release's delete on every node, the stalled Locker's cycle took the node timeout, 500 ms, but for the first one after the pause: with 5 rounds of 5 cycles, 500, 401 and 401 ms, 492×, 635× and 486× all up (301× to 705×).\n\n" +
		"| Driver | All up µs | One stalled µs | × all up | Spread | Target |\n|---|--:|--:|--:|--:|--:|\n")
	for _, d := range []string{"goredis", "redigo", "rueidis"} {
		bench := "BenchmarkStalledNode/" + d
		up, ok1 := r.median(bench, "all-up-ns/op")
		stalled, ok2 := r.median(bench, "stalled-ns/op")
		ratios := r[bench]["stalled-ratio"]
		if !ok1 || !ok2 || len(ratios) == 0 {
			continue
		}
		x := median(ratios)
		met := "✅"
		if x > stalledBound {
			met = "❌"
		}
		fmt.Fprintf(b, "| %s | %.1f | %.1f | %.2f | %.2f to %.2f | ≤ %g× %s |\n", d, up/1e3, stalled/1e3, x,
			slices.Min(ratios), slices.Max(ratios), stalledBound, met)
	}
	b.WriteString("\n")
}
