package main

import "strings"

// noscriptTitle is the heading of the section of single without scripts,
// which -only noscript rewrites.
const noscriptTitle = "single without scripts"

// noscriptSection writes the table of single without scripts against the
// raw baseline it took turns with, from BenchmarkInterleaved: the median
// over the rounds of the ratio within each round, its least and greatest;
// and, over rueidis, the raw client's own release without scripts
// (raw-watch).
func noscriptSection(b *strings.Builder, r results, intro string) {
	header(b, noscriptTitle,
		intro+"`single-noscript` ÷ `raw` in BenchmarkInterleaved's one-node group, on the Redis 7.0 here: an Obtain is a `SET NX PX`, a release a `WATCH` transaction in two pipelines over a pinned connection, three round trips where `raw` sends two. "+
			"Serial: time; parallel: raw's throughput ÷ its own. The median over the rounds of the ratio within each round, and its least and greatest (spread). "+
			"`raw-watch`, over rueidis, is the raw client releasing the same way, with rueidis's `Dedicated` connection, where `raw` multiplexes every goroutine over one: what that release costs without locksmith.",
		[]string{"Driver", "Contender", "Serial × raw", "Spread", "Parallel × raw", "Spread"}, 2)
	for _, d := range driverNames {
		for _, c := range []string{"single-noscript", "raw-watch"} {
			serial := r.ratios("BenchmarkInterleaved/"+d+"/one-node/serial", c, "raw")
			parallel := r.ratios("BenchmarkInterleaved/"+d+"/one-node/parallel", c, "raw")
			if len(serial) == 0 && len(parallel) == 0 {
				continue
			}
			row(b, d, c, fig(median(serial), len(serial) > 0, "%.2f"), spread(serial), fig(median(parallel), len(parallel) > 0, "%.2f"), spread(parallel))
		}
	}
	b.WriteString("\n")
}
