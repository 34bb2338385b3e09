package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// guardTitle is the heading of BenchmarkGuard's section, which -only guard
// rewrites.
const guardTitle = "Guarded writes"

// guardCases are BenchmarkGuard's cases, in the order of the table's rows.
var guardCases = []string{"guard", "guard-commands", "check-then-write", "write"}

// measureGuard runs BenchmarkGuard for o.rounds rounds of o.benchtime.
func measureGuard(bin string, r results, o options) error {
	for i := 1; i <= o.rounds; i++ {
		fmt.Fprintf(os.Stderr, "--- guarded writes, round %d of %d\n", i, o.rounds)
		if err := r.bench(bin, "-test.bench=^BenchmarkGuard$", "-test.benchtime="+o.benchtime); err != nil {
			return err
		}
	}
	return nil
}

// guardSection writes BenchmarkGuard's table: for each case, the median
// over the rounds of its time and the least and greatest (spread), the
// median over the rounds of its ratio to write and to check-then-write
// within each round, with their spread, and the commands and round trips
// it took.
func guardSection(b *strings.Builder, r results, intro string) {
	header(b, guardTitle,
		intro+"BenchmarkGuard: one Locker of `single` over a go-redis client (RESP3) and a server of its own holds one lock, `{bench:guard}`, and writes `SET {bench:guard}:data v` in four ways, which take turns in a random order within each iteration: "+
			"`guard`, `Lock.Guard` with a script of the SET, which the server runs in one script with the check that the lock is held; `guard-commands`, `Lock.GuardCommands`, without Lua: `WATCH` and `GET`, then `MULTI`, the SET and `EXEC`, two pipelines over a pinned connection; "+
			"`check-then-write`, `Lock.TTL` (a script checking the lock) then the SET, what one writes without Guard, which is not safe: the lock can be lost between the check and the write, which lands anyway; `write`, the SET alone, with no check. "+
			"Time: the median over the rounds, and its least and greatest (spread); × write and × check-then-write: the median over the rounds of the ratio within each round, and its spread. "+
			"Commands and round trips: what the client sent (a script is one command), and its round trips (a command, or a pipeline of several); server commands: what the server ran for one write (INFO commandstats), the script's own included.",
		[]string{"Case", "µs/op", "Spread", "× write", "Spread", "× check-then-write", "Spread", "commands/op", "round trips/op", "server commands/op"}, 1)
	const bench = "BenchmarkGuard"
	for _, c := range guardCases {
		ns := r[bench][c+"-ns/op"]
		if len(ns) == 0 {
			continue
		}
		write, check := r.ratios(bench, c, "write"), r.ratios(bench, c, "check-then-write")
		row(b, c, fig(median(ns)/1e3, true, "%.1f"), span(ns, 1e3, "%.1f"),
			fig(median(write), len(write) > 0, "%.2f"), spread(write), fig(median(check), len(check) > 0, "%.2f"), spread(check),
			r.cell(bench, c+"-cmds/op", "%.1f"), r.cell(bench, c+"-trips/op", "%.1f"), r.cell(bench, c+"-server-cmds/op", "%.0f"))
	}
	b.WriteString("\n")
}

// span writes the least and the greatest of v, each over div, in format.
func span(v []float64, div float64, format string) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf(format+" to "+format, slices.Min(v)/div, slices.Max(v)/div)
}
