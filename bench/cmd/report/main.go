// Command report runs the benchmarks of the bench module and writes their
// results into bench/README.md, between its report markers (the rest is the
// README's own), and to standard output. Run it from the bench directory;
// the README says how it measures, and with which flags:
//
//	go run ./cmd/report                 # every benchmark
//	go run ./cmd/report -only held      # one section alone, and its rows of the targets table
//	go run ./cmd/report -only elect     # the election's handovers alone
//	go run ./cmd/report -only guard     # the guarded writes alone
package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options are the command's settings that the benchmarks' runs take.
type options struct {
	rounds     int
	benchtime  string
	short      bool
	contention bool
	held       bool
	elect      bool
	guard      bool
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 9, "how many times to run the uncontended benchmarks")
	flag.StringVar(&o.benchtime, "benchtime", "150ms", "the -benchtime of each uncontended case")
	flag.BoolVar(&o.contention, "contention", true, "run the contention benchmarks")
	flag.BoolVar(&o.held, "held", true, "run the held-locks benchmark (BenchmarkHeld)")
	flag.BoolVar(&o.elect, "elect", true, "run the election's handover benchmark (BenchmarkElectHandover), for -rounds")
	flag.BoolVar(&o.guard, "guard", true, "run the guarded writes' benchmark (BenchmarkGuard), for -rounds of -benchtime")
	only := flag.String("only", "", `run one section's benchmarks alone, for -rounds of -benchtime where they take rounds, and rewrite only that section and its rows of the targets table: "held", "semaphore", "stalled", "noscript", "elect" or "guard"`)
	readme := flag.String("readme", "README.md", "the file whose report to rewrite; empty for none")
	flag.BoolVar(&o.short, "short", false, "a quick check that every benchmark runs (with -rounds 1 -benchtime 1x): 100 locks in the contention benchmarks, at most 1000 held locks")
	flag.Parse()
	err := errors.New("-rounds must be at least 1")
	if o.rounds >= 1 {
		err = run(o, *only, *readme)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// uncontendedPattern is the -test.bench of the rounds of a full run.
const uncontendedPattern = "^(BenchmarkLock|BenchmarkInterleaved|BenchmarkMultiKey|BenchmarkSemaphore|BenchmarkStalledNode)$"

// measure runs the benchmarks of a full run.
func measure(bin string, r results, o options) error {
	if err := r.rounds(bin, uncontendedPattern, o); err != nil {
		return err
	}
	if o.contention {
		fmt.Fprintln(os.Stderr, "--- contention")
		if err := r.once(bin, "^(BenchmarkContention|BenchmarkSemaphoreContention)$", o.short); err != nil {
			return err
		}
	}
	if o.held {
		fmt.Fprintln(os.Stderr, "--- held locks")
		if err := r.once(bin, "^BenchmarkHeld$", o.short); err != nil {
			return err
		}
	}
	if o.elect {
		if err := measureElect(bin, r, o); err != nil {
			return err
		}
	}
	if !o.guard {
		return nil
	}
	return measureGuard(bin, r, o)
}

// page writes every section of the report, and the targets table.
func page(b *strings.Builder, r results, o options) {
	uncontended(b, r)
	multiKey(b, r)
	if o.contention {
		contended(b, r)
	}
	semaphoreSection(b, r, "")
	stalledSection(b, r, "")
	noscriptSection(b, r, "")
	if o.held {
		heldSection(b, r, "")
	}
	if o.elect {
		electSection(b, r, "")
	}
	if o.guard {
		guardSection(b, r, "")
	}
	targetsTable(b, r)
}

// A part is a section of the report that -only runs alone: its name, its
// heading, what it runs, and what it writes (after intro, which says how
// and when it ran alone).
type part struct {
	name, title string
	measure     func(bin string, r results, o options) error
	write       func(b *strings.Builder, r results, intro string)
}

var parts = []part{
	{"held", heldTitle, func(bin string, r results, o options) error { return r.once(bin, "^BenchmarkHeld$", o.short) }, heldSection},
	{"semaphore", semaphoreTitle, func(bin string, r results, o options) error {
		if err := r.rounds(bin, "^BenchmarkSemaphore$", o); err != nil {
			return err
		}
		return r.once(bin, "^BenchmarkSemaphoreContention$", o.short)
	}, semaphoreSection},
	{"stalled", stalledTitle, func(bin string, r results, o options) error { return r.rounds(bin, "^BenchmarkStalledNode$", o) }, stalledSection},
	{"noscript", noscriptTitle, func(bin string, r results, o options) error {
		return r.rounds(bin, "^BenchmarkInterleaved$/./^one-node$", o)
	}, noscriptSection},
	{"elect", electTitle, measureElect, electSection},
	{"guard", guardTitle, measureGuard, guardSection},
}

// run runs the benchmarks, of the part named only or else of every
// section, prints their report and rewrites readme with it ("" for none):
// the whole text between the markers, or that part's section and its rows
// of the targets table (which a full run wrote).
func run(o options, only, readme string) error {
	p := part{measure: measure}
	if only != "" {
		i := slices.IndexFunc(parts, func(p part) bool { return p.name == only })
		if i < 0 {
			return fmt.Errorf(`-only %q: the sections that run alone are "held", "semaphore", "stalled", "noscript", "elect" and "guard"`, only)
		}
		p = parts[i]
	}
	loadBefore := loadAverage()
	dir, bin, err := build()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res := results{}
	if err := p.measure(bin, res, o); err != nil {
		return err
	}
	var b strings.Builder
	var rows []string
	edit := func(s string) (string, error) { return splice(s, b.String(), begin, end) }
	if only == "" {
		machine(&b, command(), o, loadBefore, loadAverage())
		page(&b, res, o)
	} else {
		// The machine is named: it may not be the one of the rest of the page.
		p.write(&b, res, fmt.Sprintf("Run alone with `cd bench && %s` on %s (load average %s before, %s after), on %s, %d cores (nproc). ",
			command(), time.Now().UTC().Format("2006-01-02"), loadBefore, loadAverage(), cpuModel(), runtime.NumCPU()))
		rows = targetRows(res, p.name)
		edit = func(s string) (string, error) {
			s, err := spliceSection(s, p.title, b.String())
			if err != nil {
				return "", err
			}
			return spliceRows(s, rows)
		}
	}
	fmt.Print(b.String(), strings.Join(rows, ""))
	if readme == "" {
		return nil
	}
	return rewrite(readme, edit)
}

// command is the command line that this run was started with.
func command() string {
	return strings.Join(append([]string{"go", "run", "./cmd/report"}, os.Args[1:]...), " ")
}

// build compiles the benchmarks into a temporary directory, which the
// caller removes.
func build() (dir, bin string, err error) {
	dir, err = os.MkdirTemp("", "locksmith-bench")
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "bench.test")
	if err := execute(os.Stderr, "go", "test", "-c", "-o", bin, "."); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("build the benchmarks (run from the bench directory): %w", err)
	}
	return dir, bin, nil
}

// execute runs name with args, its output going to w and to stderr.
func execute(w io.Writer, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	return cmd.Run()
}

// results maps a benchmark's name (without the GOMAXPROCS suffix) to its
// metrics, each unit to the values of every run.
type results map[string]map[string][]float64

// rounds runs the benchmarks that pattern matches for o.rounds rounds of
// o.benchtime.
func (r results) rounds(bin, pattern string, o options) error {
	for i := 1; i <= o.rounds; i++ {
		fmt.Fprintf(os.Stderr, "--- round %d of %d\n", i, o.rounds)
		if err := r.bench(bin, "-test.bench="+pattern, "-test.benchtime="+o.benchtime); err != nil {
			return err
		}
	}
	return nil
}

// once runs the benchmarks that pattern matches once each, as the
// contention benchmarks and BenchmarkHeld run.
func (r results) once(bin, pattern string, short bool) error {
	return r.bench(bin, "-test.bench="+pattern, "-test.benchtime=1x", "-test.short="+strconv.FormatBool(short))
}

// bench runs the test binary with args, echoing its output to stderr, and
// adds the figures it prints.
func (r results) bench(bin string, args ...string) error {
	var out bytes.Buffer
	args = append([]string{"-test.run=^$"}, args...)
	if err := execute(io.MultiWriter(&out, os.Stderr), bin, args...); err != nil {
		return fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
	}
	for line := range strings.Lines(out.String()) {
		r.parse(line)
	}
	return nil
}

// parse adds the figures of one line of benchmark output, such as
// "BenchmarkLock/goredis/raw/serial-2  4546  136521 ns/op  666 B/op".
func (r results) parse(line string) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return
	}
	name := f[0]
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	if r[name] == nil {
		r[name] = map[string][]float64{}
	}
	for i := 2; i+1 < len(f); i += 2 {
		if v, err := strconv.ParseFloat(f[i], 64); err == nil {
			r[name][f[i+1]] = append(r[name][f[i+1]], v)
		}
	}
}

// median returns the median of the benchmark's figures in unit, and false
// if it has none.
func (r results) median(name, unit string) (float64, bool) {
	v := r[name][unit]
	return median(v), len(v) > 0
}

// median returns the median of v, and 0 for no values.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// versus returns the median time per operation of contender c
// (driver/name) in BenchmarkInterleaved's mode (serial or parallel), and
// the median over the rounds of its ratio to another contender of its
// group, other (such as the raw baseline), which took turns with it in the
// same round: the pairing is what the interleaving is for.
func (r results) versus(c, other, mode string) (ns, ratio float64, ok bool) {
	driver, name, _ := strings.Cut(c, "/")
	for _, group := range []string{"one-node", "quorum"} {
		bench := "BenchmarkInterleaved/" + driver + "/" + group + "/" + mode
		if ratios := r.ratios(bench, name, other); len(ratios) > 0 {
			return median(r[bench][name+"-ns/op"]), median(ratios), true
		}
	}
	return 0, 0, false
}

// ratios returns, for each round of bench, contender num's time over
// contender den's, which took turns with it in that round.
func (r results) ratios(bench, num, den string) []float64 {
	return perRound(r[bench][num+"-ns/op"], r[bench][den+"-ns/op"])
}

// perRound returns, for each round, the figure num over den, which ran in
// the same round; nil unless both ran in every round.
func perRound(num, den []float64) []float64 {
	if len(num) == 0 || len(num) != len(den) {
		return nil
	}
	ratios := make([]float64, len(num))
	for i := range num {
		ratios[i] = num[i] / den[i]
	}
	return ratios
}

// cases returns the driver/name cases of bench, less the /serial or
// /parallel of their sub-benchmarks, by driver and then in the order of
// names.
func (r results) cases(bench string, names []string) []string {
	var cs []string
	for name := range r {
		if rest, ok := strings.CutPrefix(name, bench+"/"); ok {
			cs = append(cs, strings.TrimSuffix(strings.TrimSuffix(rest, "/serial"), "/parallel"))
		}
	}
	slices.SortFunc(cs, byRank(names))
	return slices.Compact(cs)
}

// byRank orders driver/name cases for the tables: by driver, then by the
// place of name in names.
func byRank(names []string) func(a, b string) int {
	rank := func(c string) int {
		driver, name, _ := strings.Cut(c, "/")
		return 100*slices.Index(driverNames, driver) + slices.Index(names, name)
	}
	return func(a, b string) int { return cmp.Or(rank(a)-rank(b), strings.Compare(a, b)) }
}

// contenders are BenchmarkLock's contenders, in the order of the tables:
// the baseline first, locksmith's strategies, then the peers.
var contenders = []string{"raw", "single", "single-noscript", "raw-watch", "single-poll", "setnx-getset", "otel-noop", "otel-sdk", "otel-floor",
	"bsm-redislock", "bsm-redislock-10ms", "redsync-default", "redlock-3", "redsync-3", "redlock-5", "redsync-5"}

// driverNames are the drivers, in the order of the tables' rows and of the
// targets table's columns.
var driverNames = []string{"goredis", "redigo", "rueidis"}

// machine writes what the run ran on and how.
func machine(b *strings.Builder, cmd string, o options, loadBefore, loadAfter string) {
	mods := output("go", "list", "-m", "-f", "{{.Path}} {{.Version}}",
		"github.com/redis/go-redis/v9", "github.com/gomodule/redigo", "github.com/redis/rueidis", "github.com/bsm/redislock",
		"github.com/go-redsync/redsync/v4", "go.opentelemetry.io/otel/sdk")
	fmt.Fprintf(b, "Measured with `cd bench && %s` on %s: %s, %d cores (nproc); %s, %s/%s; %s; %s. Load average %s before the run, %s after. "+
		"BenchmarkLock, BenchmarkInterleaved, BenchmarkMultiKey, BenchmarkSemaphore and BenchmarkStalledNode: the median of %d round(s) of %s per case; "+
		"BenchmarkContention, BenchmarkSemaphoreContention and BenchmarkHeld: one run; BenchmarkElectHandover: %d round(s), its resign case for %s and its crash case %s in each; BenchmarkGuard: %d round(s) of %s. A section run alone since says so.\n\n",
		cmd, time.Now().UTC().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), output("go", "env", "GOVERSION"), runtime.GOOS, runtime.GOARCH,
		redisVersion(), strings.ReplaceAll(mods, "\n", ", "), loadBefore, loadAfter, o.rounds, o.benchtime, o.rounds, o.benchtime, o.crashes(), o.rounds, o.benchtime)
}

// loadAverage returns the machine's load averages, from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return "unknown"
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo") // none: unknown
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func redisVersion() string {
	for _, f := range strings.Fields(output("redis-server", "--version")) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return "redis-server " + v
		}
	}
	return "unknown redis-server"
}

// output returns the trimmed standard output of a command, or a note of
// its failure.
func output(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return fmt.Sprintf("(%s: %v)", name, err)
	}
	return strings.TrimSpace(string(out))
}

// fig formats a figure, or "–" when it was not measured.
func fig(v float64, ok bool, format string) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// A column is a column of a table's figures: the median of unit, over div
// (1 when 0), in format ("" for %.1f below 100, %.0f above).
type column struct {
	title, unit, format string
	div                 float64
}

// titles returns the titles of left, columns and right.
func titles(left []string, columns []column, right ...string) []string {
	for _, c := range columns {
		left = append(left, c.title)
	}
	return append(left, right...)
}

// cells returns the cells of left, then of columns for bench.
func (r results) cells(bench string, left []string, columns []column) []string {
	for _, c := range columns {
		v, ok := r.median(bench, c.unit)
		format := c.format
		if format == "" && v < 100 {
			format = "%.1f"
		} else if format == "" {
			format = "%.0f"
		}
		left = append(left, fig(v/cmp.Or(c.div, 1), ok, format))
	}
	return left
}

// cell is the median of unit in bench, in format.
func (r results) cell(bench, unit, format string) string {
	v, ok := r.median(bench, unit)
	return fig(v, ok, format)
}

// cpu is the cell of the CPU time per operation of bench, in its process
// and in the servers it used.
func (r results) cpu(bench string) string {
	return r.cell(bench, "client-cpu-us/op", "%.0f") + " + " + r.cell(bench, "server-cpu-us/op", "%.0f")
}

// header writes a section's heading and the note under it, and the head
// of its table.
func header(b *strings.Builder, title, note string, columns []string, left int) {
	fmt.Fprintf(b, "### %s\n%s\n\n", title, note)
	table(b, columns, left)
}

// table writes the head of a table: its columns, the first left of them
// aligned left, the others (figures) right.
func table(b *strings.Builder, columns []string, left int) {
	fmt.Fprintf(b, "| %s |\n|", strings.Join(columns, " | "))
	b.WriteString(strings.Repeat("---|", left) + strings.Repeat("--:|", len(columns)-left) + "\n")
}

// row writes a row of a table.
func row(b *strings.Builder, cells ...string) {
	fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
}

// The markers around the generated part of the README.
const (
	begin = "<!-- report:begin (generated by cmd/report: do not edit) -->"
	end   = "<!-- report:end -->"
)

// rewrite replaces the content of file by what edit makes of it.
func rewrite(file string, edit func(string) (string, error)) error {
	old, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s, err := edit(string(old))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, []byte(s), 0o644)
}

// splice replaces the text between the markers begin and end in s with
// text.
func splice(s, text, begin, end string) (string, error) {
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q section to replace", begin, end)
	}
	return s[:i+len(begin)] + "\n" + text + s[j:], nil
}

// spliceSection replaces the section of the report in s whose heading is
// "### title", up to the next such heading or the end marker, with text.
// A section that is not there yet (new since the last full run) goes in
// before the targets table.
func spliceSection(s, title, text string) (string, error) {
	from := strings.Index(s, begin)
	if from < 0 {
		return "", fmt.Errorf("no %q marker", begin)
	}
	start := strings.Index(s[from:], "\n### "+title+"\n")
	if start < 0 {
		targets := strings.Index(s[from:], "\n### "+targetsTitle+"\n")
		if targets < 0 || title == targetsTitle {
			return "", fmt.Errorf("no section %q to replace: run the whole report first", title)
		}
		targets += from + 1
		return s[:targets] + text + s[targets:], nil
	}
	start += from + 1
	stop := strings.Index(s[start:], end)
	if stop < 0 {
		return "", fmt.Errorf("no %q marker after section %q", end, title)
	}
	stop += start
	if next := strings.Index(s[start:stop], "\n### "); next >= 0 {
		stop = start + next + 1
	}
	return s[:start] + text + s[stop:], nil
}

// spliceRows replaces each row of the targets table in s whose first cell
// is that of a row of rows with that row.
func spliceRows(s string, rows []string) (string, error) {
	from := strings.Index(s, "\n### "+targetsTitle+"\n")
	if from < 0 {
		return "", fmt.Errorf("no section %q: run the whole report first", targetsTitle)
	}
	for _, r := range rows {
		what, _, _ := strings.Cut(strings.TrimPrefix(r, "| "), " | ")
		i := strings.Index(s[from:], "\n| "+what+" | ")
		if i < 0 {
			return "", fmt.Errorf("no row %q in the targets table to replace: run the whole report first", what)
		}
		i += from + 1
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			j = len(s) - i
		}
		s = s[:i] + strings.TrimSuffix(r, "\n") + s[i+j:]
	}
	return s, nil
}
