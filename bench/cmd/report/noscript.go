package main

import (
	"fmt"
	"slices"
	"strings"
)

// The markers around the section of single without scripts, which -only
// noscript rewrites.
const (
	noscriptBegin = "<!-- report:noscript:begin -->"
	noscriptEnd   = "<!-- report:noscript:end -->"
)

// noscriptBound is the target of single without scripts: at most this many
// times the raw baseline's time, serially and in parallel.
const noscriptBound = 2.0

// noscriptSection writes the table of single without scripts against the
// raw baseline it took turns with, from BenchmarkInterleaved: the median
// over the rounds of the ratio within each round, its least and greatest;
// and, over rueidis, the raw client's own script-free release (raw-watch).
func noscriptSection(b *strings.Builder, r results) {
	b.WriteString("### single without scripts\n\n" +
		"`single-noscript` ÷ `raw` in BenchmarkInterleaved's one-node group, on the Redis 7.0 above: an Obtain is a `SET NX PX`, a release a `WATCH` transaction over a pinned connection, three round trips where `raw` sends two. Serial: time; parallel: raw's throughput ÷ its own. The median over the rounds of the ratio within each round, and its least and greatest. Over rueidis, `raw-watch` is the raw client releasing the same way, with rueidis's `Dedicated`, where `raw` multiplexes every goroutine over one connection: what that release costs without locksmith. Over rueidis, each such release makes the server run 13 commands against `raw`'s 2 (INFO commandstats, 1000 cycles of each contender): the transaction's 5 and the `SET`, 3 `PING`s, and the `UNSUBSCRIBE`, `PUNSUBSCRIBE`, `SUNSUBSCRIBE` and `DISCARD` that rueidis sends as it takes the dedicated connection back; `single`'s driver gives it back from a goroutine of its own, off the caller's path, which is why `raw-watch` is the slower serially. Target: at most 2× raw; it was 2.8× serially over go-redis and redigo at e2dd204, before the transaction's commands went in two pipelines.\n\n" +
		"| Driver | Contender | Mode | × raw | Spread | Target |\n|---|---|---|--:|--:|--:|\n")
	for _, d := range []string{"goredis", "redigo", "rueidis"} {
		for _, c := range []string{"single-noscript", "raw-watch"} {
			for _, mode := range []string{"serial", "parallel"} {
				ratios := r.ratios("BenchmarkInterleaved/"+d+"/one-node/"+mode, c, "raw")
				if len(ratios) == 0 {
					continue
				}
				x := median(ratios)
				target := "(a reading)"
				if c == "single-noscript" {
					target = fmt.Sprintf("≤ %g× ✅", noscriptBound)
					if x > noscriptBound {
						target = fmt.Sprintf("≤ %g× ❌", noscriptBound)
					}
				}
				fmt.Fprintf(b, "| %s | %s | %s | %.2f | %.2f to %.2f | %s |\n", d, c, mode, x, slices.Min(ratios), slices.Max(ratios), target)
			}
		}
	}
	b.WriteString("\n")
}

// ratios returns, for each round of bench, contender num's time over
// contender den's, which took turns with it in that round.
func (r results) ratios(bench, num, den string) []float64 {
	v, o := r[bench][num+"-ns/op"], r[bench][den+"-ns/op"]
	if len(v) == 0 || len(v) != len(o) {
		return nil
	}
	ratios := make([]float64, len(v))
	for i := range v {
		ratios[i] = v[i] / o[i]
	}
	return ratios
}
