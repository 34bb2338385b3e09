package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// electTitle is the heading of BenchmarkElectHandover's section, which
// -only elect rewrites.
const electTitle = "Leader election: handover"

// crashes and shortCrashes are how many handovers after a crash a round of
// BenchmarkElectHandover's crash case runs, and with -short: each takes
// the lease, 1s, where a round of the resign case takes -benchtime.
const (
	crashes      = 2
	shortCrashes = 1
)

// measureElect runs BenchmarkElectHandover for o.rounds rounds: its resign
// case for o.benchtime, its crash case crashes times (shortCrashes with
// o.short).
func measureElect(bin string, r results, o options) error {
	for i := 1; i <= o.rounds; i++ {
		fmt.Fprintf(os.Stderr, "--- election handover, round %d of %d\n", i, o.rounds)
		if err := r.bench(bin, "-test.bench=^BenchmarkElectHandover$/^resign$", "-test.benchtime="+o.benchtime); err != nil {
			return err
		}
		if err := r.bench(bin, "-test.bench=^BenchmarkElectHandover$/^crash$", "-test.benchtime="+o.crashes()); err != nil {
			return err
		}
	}
	return nil
}

// crashes returns the -benchtime of a round of BenchmarkElectHandover's
// crash case.
func (o options) crashes() string {
	if o.short {
		return fmt.Sprintf("%dx", shortCrashes)
	}
	return fmt.Sprintf("%dx", crashes)
}

// electSection writes BenchmarkElectHandover's table: by driver, the
// median over the rounds of each round's p50 and p99, the greatest of its
// max, and the least and greatest p50 of the rounds (spread), for the
// resignation, the crash and the vacancy past a crashed leader's lease.
func electSection(b *strings.Builder, r results, intro string) {
	header(b, electTitle,
		intro+"BenchmarkElectHandover: two candidates of package `elect`, each an Elector over a Locker and a client of its own, on one key of a server of their own; B waits in the queue behind the leader A, listening, when A hands over, and the two change roles at each handover. "+
			"Resign: from the call of A's `Term.Resign`, which wakes B by pub/sub, to the return of B's `Campaign` (lease 10 s). "+
			"Crash: A's refreshes and releases hang, unsent, as a killed process's would, a few milliseconds into its lease of 1 s (`elect.WithLease`; the interval, a tenth of it); from the crash to B's election, and past the lease: from the end of A's lease (when its last obtain or refresh that succeeded was sent, plus the lease) to B's election. "+
			"p50, p99 and max over the handovers of a round (crash: "+fmt.Sprint(crashes)+" a round, "+fmt.Sprint(shortCrashes)+" with `-short`), the median over the rounds of p50 and p99, the greatest max, and the least and greatest p50 of the rounds (spread). "+
			"client-go's LeaderElector, which needs a Kubernetes API server, is not run: [docs/benchmarks.md](../docs/benchmarks.md) reads its RetryPeriod beside these figures.",
		[]string{"Driver", "Resign p50 ms", "p99", "max", "Spread of p50", "Crash p50 ms", "p99", "Past the lease p50 ms", "p99", "max", "Spread of p50"}, 1)
	for _, d := range driverNames {
		resign, crash := "BenchmarkElectHandover/resign/"+d, "BenchmarkElectHandover/crash/"+d
		if r[resign] == nil && r[crash] == nil {
			continue
		}
		row(b, d,
			r.cell(resign, "p50-ms", "%.2f"), r.cell(resign, "p99-ms", "%.2f"), r.greatest(resign, "max-ms", "%.2f"), spread(r[resign]["p50-ms"]),
			r.cell(crash, "p50-ms", "%.0f"), r.cell(crash, "p99-ms", "%.0f"),
			r.cell(crash, "net-p50-ms", "%.2f"), r.cell(crash, "net-p99-ms", "%.2f"), r.greatest(crash, "net-max-ms", "%.2f"), spread(r[crash]["net-p50-ms"]))
	}
	b.WriteString("\n")
}

// greatest is the greatest of the figures of unit in bench, in format.
func (r results) greatest(bench, unit, format string) string {
	v := r[bench][unit]
	if len(v) == 0 {
		return "–"
	}
	return fig(slices.Max(v), true, format)
}
