// Command report runs the benchmarks of the bench module and writes their
// results table into bench/README.md, between its report markers, and to
// standard output.
//
// It compiles the benchmarks once, then runs BenchmarkLock,
// BenchmarkInterleaved, BenchmarkMultiKey, BenchmarkSemaphore and
// BenchmarkStalledNode for several rounds, one after another, so that a
// slow moment of a noisy machine hits every contender alike, and takes the
// median of each figure; each time is also given as a ratio to the raw
// baseline of the same run.
// Then it runs BenchmarkContention and BenchmarkSemaphoreContention once,
// and BenchmarkHeld once. Run it from the bench directory:
//
//	go run ./cmd/report               # 9 rounds of 150ms per case
//	go run ./cmd/report -rounds 9 -benchtime 1s
//	go run ./cmd/report -only held    # BenchmarkHeld alone, rewriting its section only
//	go run ./cmd/report -only stalled # BenchmarkStalledNode alone, the same
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 9, "how many times to run the uncontended benchmarks")
	benchtime := flag.String("benchtime", "150ms", "the -benchtime of each uncontended case")
	contention := flag.Bool("contention", true, "run the contention benchmark")
	held := flag.Bool("held", true, "run the held-locks benchmark (BenchmarkHeld)")
	only := flag.String("only", "", `"held": run BenchmarkHeld alone and rewrite only its section of the report; "stalled": the same for BenchmarkStalledNode, for -rounds of -benchtime; "noscript": the same for single without scripts (BenchmarkInterleaved's one-node cases)`)
	readme := flag.String("readme", "README.md", "the file whose report section to rewrite; empty for none")
	short := flag.Bool("short", false, "a quick check that every benchmark runs (with -rounds 1 -benchtime 1x): 100 locks in the contention benchmark, at most 1000 held locks, no profile")
	flag.Parse()
	var err error
	switch *only {
	case "":
		err = run(*rounds, *benchtime, *contention, *held, *short, *readme)
	case "held":
		err = runHeld(*short, *readme)
	case "stalled":
		err = runRounds(*readme, stalledBegin, stalledEnd, "^BenchmarkStalledNode$", *rounds, *benchtime, stalledSection)
	case "noscript":
		err = runRounds(*readme, noscriptBegin, noscriptEnd, "^BenchmarkInterleaved$/./^one-node$", *rounds, *benchtime, noscriptSection)
	default:
		err = fmt.Errorf(`-only %q: the benchmarks that run alone are "held", "stalled" and "noscript"`, *only)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(rounds int, benchtime string, contention, held, short bool, readme string) error {
	if rounds < 1 {
		return errors.New("-rounds must be at least 1")
	}
	loadBefore := loadAverage()
	dir, bin, err := build()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	res := results{}
	for i := 1; i <= rounds; i++ {
		fmt.Fprintf(os.Stderr, "--- round %d of %d\n", i, rounds)
		if err := res.bench(bin, "-test.bench=^(BenchmarkLock|BenchmarkInterleaved|BenchmarkMultiKey|BenchmarkSemaphore|BenchmarkStalledNode)$", "-test.benchtime="+benchtime); err != nil {
			return err
		}
	}
	if contention {
		fmt.Fprintln(os.Stderr, "--- contention")
		if err := res.bench(bin, "-test.bench=^(BenchmarkContention|BenchmarkSemaphoreContention)$", "-test.benchtime=1x", "-test.short="+strconv.FormatBool(short)); err != nil {
			return err
		}
	}
	if held {
		fmt.Fprintln(os.Stderr, "--- held locks")
		if err := res.held(bin, short); err != nil {
			return err
		}
	}

	args := append([]string{"go", "run", "./cmd/report"}, os.Args[1:]...)
	var b strings.Builder
	machine(&b, strings.Join(args, " "), rounds, benchtime, loadBefore, loadAverage())
	uncontended(&b, res)
	multiKey(&b, res)
	semaphore(&b, res)
	b.WriteString(stalledBegin + "\n")
	stalledSection(&b, res)
	b.WriteString(stalledEnd + "\n\n")
	b.WriteString(noscriptBegin + "\n")
	noscriptSection(&b, res)
	b.WriteString(noscriptEnd + "\n\n")
	targets(&b, res, "Targets", targetNote, targetList)
	targets(&b, res, "Targets: the remaining speed gaps", speedNote, speedList)
	if !short {
		fmt.Fprintln(os.Stderr, "--- profile of redlock-5")
		if err := profile(&b, bin, dir); err != nil {
			return err
		}
	}
	if contention {
		contended(&b, res)
		semaphoreContended(&b, res)
		targets(&b, res, "Targets: waiting by notification", waitNote, waitTargets)
	}
	if held {
		b.WriteString(heldBegin + "\n")
		heldSection(&b, res)
		b.WriteString(heldEnd + "\n\n")
	}
	fmt.Print(b.String())
	if readme == "" {
		return nil
	}
	return splice(readme, b.String(), begin, end)
}

// runHeld runs BenchmarkHeld alone, and rewrites its section of the report
// in readme, which a full run wrote, with a line that says how and when.
func runHeld(short bool, readme string) error {
	return runAlone(readme, heldBegin, heldEnd, func(bin string, res results) error { return res.held(bin, short) }, heldSection)
}

// runRounds runs the benchmarks that pattern matches alone, for rounds of
// benchtime, and rewrites the section between begin and end in readme with
// what section writes of them (see runAlone).
func runRounds(readme, begin, end, pattern string, rounds int, benchtime string, section func(*strings.Builder, results)) error {
	return runAlone(readme, begin, end, func(bin string, res results) error {
		for i := 1; i <= rounds; i++ {
			fmt.Fprintf(os.Stderr, "--- round %d of %d\n", i, rounds)
			if err := res.bench(bin, "-test.bench="+pattern, "-test.benchtime="+benchtime); err != nil {
				return err
			}
		}
		return nil
	}, section)
}

// runAlone builds the benchmarks, has run measure into a results, and
// rewrites the section between begin and end in readme (which a full run
// wrote) with what section writes of them, after a line that says how and
// when; with readme "", it only prints.
func runAlone(readme, begin, end string, run func(bin string, res results) error, section func(*strings.Builder, results)) error {
	loadBefore := loadAverage()
	dir, bin, err := build()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res := results{}
	if err := run(bin, res); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Regenerated alone with `cd bench && %s` on %s (load average %s before, %s after); the machine is the one above.\n\n",
		strings.Join(append([]string{"go", "run", "./cmd/report"}, os.Args[1:]...), " "), time.Now().UTC().Format("2006-01-02"), loadBefore, loadAverage())
	section(&b, res)
	fmt.Print(b.String())
	if readme == "" {
		return nil
	}
	return splice(readme, b.String(), begin, end)
}

// build compiles the benchmarks into a temporary directory, which the
// caller removes.
func build() (dir, bin string, err error) {
	dir, err = os.MkdirTemp("", "locksmith-bench")
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "bench.test")
	if err := command(os.Stderr, "go", "test", "-c", "-o", bin, "."); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("build the benchmarks (run from the bench directory): %w", err)
	}
	return dir, bin, nil
}

// held runs BenchmarkHeld once.
func (r results) held(bin string, short bool) error {
	return r.bench(bin, "-test.bench=^BenchmarkHeld$", "-test.benchtime=1x", "-test.short="+strconv.FormatBool(short))
}

// command runs name with args, its output going to w and to stderr.
func command(w io.Writer, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	return cmd.Run()
}

// results maps a benchmark's name (without the GOMAXPROCS suffix) to its
// metrics, each unit to the values of every run.
type results map[string]map[string][]float64

// bench runs the test binary with args, echoing its output to stderr, and
// adds the figures it prints.
func (r results) bench(bin string, args ...string) error {
	var out bytes.Buffer
	args = append([]string{"-test.run=^$"}, args...)
	if err := command(io.MultiWriter(&out, os.Stderr), bin, args...); err != nil {
		return fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		r.parse(sc.Text())
	}
	return sc.Err()
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

// interleaved returns the median time per operation of contender c
// (driver/name) in BenchmarkInterleaved's mode (serial or parallel), and
// the median over the rounds of its ratio to the raw baseline that took
// turns with it in the same round: the pairing is what the interleaving is
// for. The raw baseline itself is read from the first group.
func (r results) interleaved(c, mode string) (ns, ratio float64, ok bool) {
	return r.versus(c, "raw", mode)
}

// versus is interleaved against another contender of c's group, other,
// rather than the raw baseline.
func (r results) versus(c, other, mode string) (ns, ratio float64, ok bool) {
	driver, name, _ := strings.Cut(c, "/")
	for _, group := range []string{"one-node", "quorum"} {
		bench := "BenchmarkInterleaved/" + driver + "/" + group + "/" + mode
		ratios := r.ratios(bench, name, other)
		if len(ratios) == 0 {
			continue
		}
		ns, _ = r.median(bench, name+"-ns/op")
		return ns, median(ratios), true
	}
	return 0, 0, false
}

// contenders returns the driver/name of every contender of bench, in the
// order they ran.
func (r results) contenders(bench string) []string {
	var names []string
	for name := range r {
		if rest, ok := strings.CutPrefix(name, bench+"/"); ok {
			rest = strings.TrimSuffix(strings.TrimSuffix(rest, "/serial"), "/parallel")
			names = append(names, rest)
		}
	}
	slices.SortStableFunc(names, func(a, b string) int { return order(a) - order(b) })
	return slices.Compact(names)
}

// order ranks a contender for the tables: by driver, then baseline first,
// locksmith's strategies, then the peers.
func order(c string) int {
	driver, name, _ := strings.Cut(c, "/")
	rank := slices.Index([]string{"raw", "single", "single-noscript", "raw-watch", "single-poll", "setnx-getset", "otel-noop", "otel-sdk", "otel-floor", "bsm-redislock",
		"bsm-redislock-10ms", "redsync-default", "redlock-3", "redsync-3", "redlock-5", "redsync-5"}, name)
	rank += 100 * slices.Index([]string{"goredis", "redigo", "rueidis"}, driver)
	return rank
}

// baseline returns the raw baseline of contender c: the one of its driver.
func baseline(c string) string {
	driver, _, _ := strings.Cut(c, "/")
	return driver + "/raw"
}

func machine(b *strings.Builder, cmd string, rounds int, benchtime, loadBefore, loadAfter string) {
	fmt.Fprintf(b, "Regenerated with `cd bench && %s` on %s.\n\n", cmd, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(b, "| Machine | |\n|---|---|\n")
	fmt.Fprintf(b, "| CPU | %s, %d cores (nproc) |\n", cpuModel(), runtime.NumCPU())
	fmt.Fprintf(b, "| Go | %s, %s/%s |\n", output("go", "env", "GOVERSION"), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(b, "| Redis | %s |\n", redisVersion())
	mods := output("go", "list", "-m", "-f", "{{.Path}} {{.Version}}",
		"github.com/redis/go-redis/v9", "github.com/gomodule/redigo", "github.com/redis/rueidis", "github.com/bsm/redislock",
		"github.com/go-redsync/redsync/v4", "go.opentelemetry.io/otel/sdk")
	fmt.Fprintf(b, "| Modules | %s |\n", strings.ReplaceAll(mods, "\n", ", "))
	fmt.Fprintf(b, "| Load average (1, 5, 15 min) | %s before the run, %s after: other processes shared the machine |\n", loadBefore, loadAfter)
	fmt.Fprintf(b, "| Runs | BenchmarkLock, BenchmarkInterleaved, BenchmarkMultiKey and BenchmarkSemaphore: the median of %d round(s) of %s per case; BenchmarkContention, BenchmarkSemaphoreContention and BenchmarkHeld: one run |\n\n", rounds, benchtime)
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
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
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

// table writes a section: its title and note, and a table with a row for
// each contender of bench (driver/name), whose other cells cells returns.
func table(b *strings.Builder, r results, bench, title, note string, columns []string, cells func(c string) []string) {
	fmt.Fprintf(b, "### %s\n\n%s\n\n| Driver | Contender | %s |\n|---|---|", title, note, strings.Join(columns, " | "))
	b.WriteString(strings.Repeat("--:|", len(columns)) + "\n")
	for _, c := range r.contenders(bench) {
		driver, name, _ := strings.Cut(c, "/")
		fmt.Fprintf(b, "| %s | %s | %s |\n", driver, name, strings.Join(cells(c), " | "))
	}
	b.WriteString("\n")
}

// multiKey writes BenchmarkMultiKey's table: a lock of several keys
// against taking them one by one, each pair from the same iterations.
func multiKey(b *strings.Builder, r results) {
	b.WriteString("### Several keys: one lock against separate locks\n\n" +
		"BenchmarkMultiKey: one ObtainMany of n keys (sharing a hash tag) and its Release, against n Obtain calls in the keys' order and n Releases, uncontended; the two take turns in a random order within each iteration. Time per iteration, median over the rounds.\n\n" +
		"| Driver | Strategy | Keys | One lock µs | Separate µs | × separate |\n|---|---|--:|--:|--:|--:|\n")
	var names []string
	for name := range r {
		if rest, ok := strings.CutPrefix(name, "BenchmarkMultiKey/"); ok {
			names = append(names, rest)
		}
	}
	keys := func(name string) int { // the n of ".../<n>-keys"
		n, _ := strconv.Atoi(strings.TrimSuffix(name[strings.LastIndexByte(name, '/')+1:], "-keys"))
		return n
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(order(path.Dir(a))-order(path.Dir(b)), keys(a)-keys(b))
	})
	for _, name := range names {
		bench := "BenchmarkMultiKey/" + name
		driver, rest, _ := strings.Cut(name, "/")
		strategy, keys, _ := strings.Cut(rest, "/")
		one, ok := r.median(bench, "one-lock-ns/op")
		sep, sok := r.median(bench, "separate-ns/op")
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", driver, strategy, strings.TrimSuffix(keys, "-keys"),
			fig(one/1e3, ok, "%.1f"), fig(sep/1e3, sok, "%.1f"), fig(one/sep, ok && sok, "%.2f"))
	}
	b.WriteString("\n")
}

// semaphoreWays are the locks of BenchmarkSemaphore and
// BenchmarkSemaphoreContention, in the order of their rows.
var semaphoreWays = []string{"plain", "3-permits", "3-permits-2-held", "1000-permits-999-held", "3-permits-poll"}

// semaphoreCases returns the <driver>/<lock> cases of bench, by driver and
// then in the order of semaphoreWays.
func (r results) semaphoreCases(bench string) []string {
	var names []string
	for name := range r {
		if rest, ok := strings.CutPrefix(name, bench+"/"); ok {
			names = append(names, rest)
		}
	}
	rank := func(c string) int {
		driver, way, _ := strings.Cut(c, "/")
		return 100*slices.Index([]string{"goredis", "redigo", "rueidis"}, driver) + slices.Index(semaphoreWays, way)
	}
	slices.SortFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	return names
}

// paired returns the median over the rounds of the ratio of unit between
// two benchmarks that ran in every round, one after the other.
func (r results) paired(num, den, unit string) (float64, bool) {
	n, d := r[num][unit], r[den][unit]
	if len(n) == 0 || len(n) != len(d) {
		return 0, false
	}
	ratios := make([]float64, len(n))
	for i := range n {
		ratios[i] = n[i] / d[i]
	}
	return median(ratios), true
}

// semaphore writes BenchmarkSemaphore's table: one permit of a semaphore
// against a plain lock, uncontended.
func semaphore(b *strings.Builder, r results) {
	b.WriteString("### Semaphores: one acquire and release\n\n" +
		"BenchmarkSemaphore: one goroutine takes one permit of a semaphore of 3 (`lock.WithPermits(3)`) and releases it, uncontended, and in the same round a plain lock of the same kind of Locker (`single`) does the same; then the same while another Locker holds every permit but one, of 3 (`3-permits-2-held`) and of 1000 (`1000-permits-999-held`). Time: median over the rounds; × plain: median over the rounds of the ratio to the plain lock of the same round. Commands: what the client sent per acquire and release, a script counting as one (not counted on rueidis, which has no hooks). Server calls: what the server ran per acquire and release (INFO commandstats), the commands that the scripts ran included. Script µs: the time the server spent in the scripts per acquire and release (the usec of EVALSHA in INFO commandstats). CPU: per acquire and release, in the benchmark's process and in the server (INFO CPU).\n\n" +
		"| Driver | Lock | µs/op | × plain | B/op | allocs/op | allocs − plain | commands/op | server calls/op | script µs/op | CPU µs/op: client + server |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range r.semaphoreCases("BenchmarkSemaphore") {
		bench := "BenchmarkSemaphore/" + c
		driver, way, _ := strings.Cut(c, "/")
		plain := "BenchmarkSemaphore/" + driver + "/plain"
		ns, ok := r.median(bench, "ns/op")
		x, xok := r.paired(bench, plain, "ns/op")
		bytes, byok := r.median(bench, "B/op")
		allocs, aok := r.median(bench, "allocs/op")
		pallocs, paok := r.median(plain, "allocs/op")
		cmds, cok := r.median(bench, "cmds/op")
		calls, sok := r.median(bench, "server-calls/op")
		script, scok := r.median(bench, "script-us/op")
		client, clok := r.median(bench, "client-cpu-us/op")
		server, svok := r.median(bench, "server-cpu-us/op")
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", driver, way,
			fig(ns/1e3, ok, "%.1f"), fig(x, xok, "%.2f"), fig(bytes, byok, "%.0f"), fig(allocs, aok, "%.0f"),
			fig(allocs-pallocs, aok && paok, "%+.0f"), fig(cmds, cok, "%.1f"), fig(calls, sok, "%.1f"),
			fig(script, scok, "%.0f"), fig(client, clok, "%.0f")+" + "+fig(server, svok, "%.0f"))
	}
	b.WriteString("\n")
}

// semaphoreContended writes BenchmarkSemaphoreContention's table.
func semaphoreContended(b *strings.Builder, r results) {
	b.WriteString("### Semaphore contention: 16 separate Lockers, 3 permits, one key, 1 ms holds\n\n" +
		"BenchmarkSemaphoreContention: 16 contenders, each a Locker of `single` over a client of its own, take permits of a semaphore of 3 (`3-permits`: waiting by notification, with a 200 ms timer; `3-permits-poll`: polling every 1 ms), and for reference a plain lock (`plain`, by notification), each holding it for 1 ms, until 2000 were taken in all. Handoff: from the release of a permit to its next acquisition returning. Fair ideal: the wait in a FIFO queue of contenders that ask again as soon as they released, (contenders ÷ permits − 1) × (hold + median handoff): 4.33 holds and handoffs for the semaphore, 15 for the plain lock. With one permit every such wait is the ideal; with 3, released at staggered times, a FIFO queue's waits spread around it, up to 5 holds and handoffs (1.15 × the ideal). Most passed: the most acquisitions by others while one obtain waited (in FIFO order, at most contenders − 1). Commands: what the clients sent per acquisition (handshakes excluded; SUBSCRIBE included), failed attempts included, a script counting as one; server calls: what the server ran per acquisition (INFO commandstats), the commands that the scripts ran included. Timer: waiters woken by their timer rather than a message (lock.Hooks Wait). Overlaps: acquisitions that began while as many others as the lock admits held it.\n\n")
	columns := []struct{ title, unit, format string }{
		{"acq/s", "acq/s", "%.0f"}, {"handoff p50 µs", "handoff-p50-us", "%.0f"}, {"handoff p99 µs", "handoff-p99-us", "%.0f"},
		{"wait p50 ms", "wait-p50-ms", "%.1f"}, {"wait p99 ms", "wait-p99-ms", "%.1f"}, {"wait max ms", "wait-max-ms", "%.1f"}, {"fair ideal ms", "ideal-ms", "%.1f"},
		{"p99 ÷ ideal", "p99/ideal", "%.2f"}, {"worst ÷ ideal", "worst/ideal", "%.2f"}, {"most passed", "max-passed", "%.0f"},
		{"commands/acq", "cmds/acq", "%.1f"}, {"server calls/acq", "server-calls/acq", "%.1f"}, {"timer", "wake-timer", "%.0f"},
		{"overlaps", "overlaps", "%.0f"},
	}
	b.WriteString("| Driver | Lock |")
	for _, c := range columns {
		b.WriteString(" " + c.title + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("--:|", len(columns)) + "\n")
	for _, c := range r.semaphoreCases("BenchmarkSemaphoreContention") {
		driver, way, _ := strings.Cut(c, "/")
		fmt.Fprintf(b, "| %s | %s |", driver, way)
		for _, col := range columns {
			v, ok := r.median("BenchmarkSemaphoreContention/"+c, col.unit)
			b.WriteString(" " + fig(v, ok, col.format) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

func uncontended(b *strings.Builder, r results) {
	table(b, r, "BenchmarkLock", "Uncontended: one acquire and release",
		"BenchmarkLock. Serial: one goroutine, one key. Parallel: 4 × GOMAXPROCS goroutines, a key each; the figure is the throughput. Each contender runs on its own, seconds apart from the others. Ratios compare with the raw baseline of the same driver: time for serial (lower is better), throughput for parallel (higher is better). CPU: the serial case's CPU time per operation, in the benchmark's process and in the servers it used (INFO CPU).",
		[]string{"Serial µs/op", "× raw", "Parallel kop/s", "× raw", "B/op", "allocs/op", "allocs − raw", "CPU µs/op: client + servers"},
		func(c string) []string {
			s, base := "BenchmarkLock/"+c+"/serial", "BenchmarkLock/"+baseline(c)+"/serial"
			p, pbase := "BenchmarkLock/"+c+"/parallel", "BenchmarkLock/"+baseline(c)+"/parallel"
			ns, ok := r.median(s, "ns/op")
			bns, bok := r.median(base, "ns/op")
			pns, pok := r.median(p, "ns/op")
			pbns, pbok := r.median(pbase, "ns/op")
			bytes, byok := r.median(s, "B/op")
			allocs, aok := r.median(s, "allocs/op")
			ballocs, baok := r.median(base, "allocs/op")
			client, cok := r.median(s, "client-cpu-us/op")
			server, sok := r.median(s, "server-cpu-us/op")
			return []string{
				fig(ns/1e3, ok, "%.1f"), fig(ns/bns, ok && bok, "%.2f"),
				fig(1e6/pns, pok, "%.1f"), fig(pbns/pns, pok && pbok, "%.2f"),
				fig(bytes, byok, "%.0f"), fig(allocs, aok, "%.0f"), fig(allocs-ballocs, aok && baok, "%+.0f"),
				fig(client, cok, "%.0f") + " + " + fig(server, sok, "%.0f"),
			}
		})
	table(b, r, "BenchmarkLock", "Uncontended, interleaved",
		"BenchmarkInterleaved: the same cases, the contenders of a driver taking turns with its raw baseline in a random order, one acquire and release each (serial) or a 10 ms slice each (parallel), so that the load of a shared machine hits them alike; the one-node contenders and the quorum ones take turns separately. Its ratios are the steadier ones; the targets read them, each contender against the raw baseline it took turns with.",
		[]string{"Serial µs/op", "× raw", "Parallel kop/s", "× raw"},
		func(c string) []string {
			ns, x, ok := r.interleaved(c, "serial")
			pns, px, pok := r.interleaved(c, "parallel")
			return []string{
				fig(ns/1e3, ok, "%.1f"), fig(x, ok, "%.2f"),
				fig(1e6/pns, pok, "%.1f"), fig(1/px, pok, "%.2f"),
			}
		})
}

// target is one of the targets that the report checks.
type target struct {
	what string
	// value computes the measured figure; limit is its bound (0: none, a
	// reading that explains a target); below says whether the figure must
	// stay at most (true) or at least the limit.
	value func(r results, driver string) (float64, bool)
	limit float64
	below bool
	unit  string
}

// timeRatio compares the interleaved times of two contenders of a group in
// mode: the median over the rounds of num's time over den's, which took
// turns in each round, or with inverse of den's over num's (a throughput
// ratio).
func timeRatio(num, den, mode string, inverse bool) func(r results, driver string) (float64, bool) {
	return func(r results, driver string) (float64, bool) {
		_, x, ok := r.versus(driver+"/"+num, den, mode)
		if inverse {
			x = 1 / x
		}
		return x, ok
	}
}

// allocRatio compares the allocations of two contenders, serially.
func allocRatio(num, den string) func(r results, driver string) (float64, bool) {
	return func(r results, driver string) (float64, bool) {
		n, ok1 := r.median("BenchmarkLock/"+driver+"/"+num+"/serial", "allocs/op")
		d, ok2 := r.median("BenchmarkLock/"+driver+"/"+den+"/serial", "allocs/op")
		return n / d, ok1 && ok2 && d != 0
	}
}

func difference(a, b, unit string) func(r results, driver string) (float64, bool) {
	return func(r results, driver string) (float64, bool) {
		x, ok1 := r.median("BenchmarkLock/"+driver+"/"+a, unit)
		y, ok2 := r.median("BenchmarkLock/"+driver+"/"+b, unit)
		return x - y, ok1 && ok2
	}
}

// targetList are the Targets table's: single against the raw baseline,
// redlock-5 against redsync-5, and the OpenTelemetry wrapper against single.
var targetList = []target{
	{"single time ÷ raw time", timeRatio("single", "raw", "serial", false), 1, true, "×"},
	{"single parallel throughput ÷ raw's", timeRatio("single", "raw", "parallel", true), 1, false, "×"},
	{"single allocs − raw allocs", difference("single/serial", "raw/serial", "allocs/op"), 5, true, ""},
	{"single parallel throughput ÷ raw go-redis's (BenchmarkLock)", onRueidis(throughputVs("single", "goredis", "raw")), 1.5, false, "×"},
	{"redlock-5 time ÷ redsync-5 time", timeRatio("redlock-5", "redsync-5", "serial", false), 0.6, true, "×"},
	{"redlock-5 allocs ÷ redsync-5 allocs", allocRatio("redlock-5", "redsync-5"), 0.5, true, "×"},
	{"redlock-5 parallel throughput ÷ redsync-5's", timeRatio("redlock-5", "redsync-5", "parallel", true), 1.5, false, "×"},
	{"otel-noop time ÷ single time", timeRatio("otel-noop", "single", "serial", false), 1.02, true, "×"},
	{"otel-sdk time ÷ single time", timeRatio("otel-sdk", "single", "serial", false), 1.10, true, "×"},
}

// speedList are the bounds for the speed gaps that targetList's left, on
// the same figures.
var speedList = []target{
	{"otel-sdk time ÷ single time", timeRatio("otel-sdk", "single", "serial", false), 1.10, true, "×"},
	{"redlock-5 allocs ÷ redsync-5 allocs", allocRatio("redlock-5", "redsync-5"), 1, true, "×"},
	{"redlock-5 parallel throughput ÷ redsync-5's", timeRatio("redlock-5", "redsync-5", "parallel", true), 1, false, "×"},
	{"single parallel throughput ÷ raw's", timeRatio("single", "raw", "parallel", true), 0.95, false, "×"},
	{"otel-floor time ÷ single time: the SDK's own calls, no wrapper (a reading)", timeRatio("otel-floor", "single", "serial", false), 0, true, "×"},
	{"otel-sdk time ÷ otel-floor time: the wrapper's own cost (a reading)", timeRatio("otel-sdk", "otel-floor", "serial", false), 0, true, "×"},
}

const speedNote = "Bounds for the gaps that the Targets table above leaves, read from the same runs: OpenTelemetry's cost over `single`; Redlock-5's allocations and parallel throughput against redsync-5's, over redigo above all; `single`'s parallel throughput against raw's, over go-redis and rueidis."

// throughputVs compares the parallel throughput of contender name over the
// driver of the column with that of contender other over driver, in
// BenchmarkLock: the interleaved runs pair contenders of one driver only.
func throughputVs(name, driver, other string) func(r results, column string) (float64, bool) {
	return func(r results, column string) (float64, bool) {
		n, ok1 := r.median("BenchmarkLock/"+column+"/"+name+"/parallel", "ns/op")
		d, ok2 := r.median("BenchmarkLock/"+driver+"/"+other+"/parallel", "ns/op")
		return d / n, ok1 && ok2 && n != 0
	}
}

// onRueidis restricts a target to the rueidis column.
func onRueidis(f func(r results, driver string) (float64, bool)) func(r results, driver string) (float64, bool) {
	return func(r results, driver string) (float64, bool) {
		if driver != "rueidis" {
			return 0, false
		}
		return f(r, driver)
	}
}

const targetNote = "The speed targets of `single`, Redlock-5 and the OpenTelemetry wrapper, from the interleaved run (times and parallel throughputs: the median over the rounds of the ratio between two contenders that took turns in the same round) and from BenchmarkLock (allocations; and single over rueidis against raw go-redis, which the interleaved runs, one driver each, do not pair). A – is a target that does not apply to the driver: redsync has no rueidis adapter, and the OpenTelemetry contenders run over go-redis only."

// profiled is the case whose profile the report summarises.
const profiled = "BenchmarkLock/goredis/redlock-5/serial"

// profile runs the profiled case once more, with CPU and memory profiles,
// and writes the top 5 functions by CPU time and by allocated objects.
func profile(b *strings.Builder, bin, dir string) error {
	cpu, mem := filepath.Join(dir, "cpu.out"), filepath.Join(dir, "mem.out")
	if err := command(io.Discard, bin, "-test.run=^$", "-test.bench=^"+strings.ReplaceAll(profiled, "/", "$/^")+"$",
		"-test.benchtime=3s", "-test.cpuprofile="+cpu, "-test.memprofile="+mem); err != nil {
		return fmt.Errorf("profile %s: %w", profiled, err)
	}
	fmt.Fprintf(b, "### Profile: %s\n\n", strings.TrimPrefix(profiled, "BenchmarkLock/"))
	fmt.Fprintf(b, "`%s`, 3 s, with `-cpuprofile` and `-memprofile`; the top 5 functions of `go tool pprof -top`, by CPU time (flat: in the function itself) and by allocated objects.\n\n", profiled)
	for _, p := range []struct{ title, file, index string }{{"CPU", cpu, "cpu"}, {"Allocated objects", mem, "alloc_objects"}} {
		out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=5", "-sample_index="+p.index, bin, p.file).Output()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %w", p.file, err)
		}
		fmt.Fprintf(b, "| %s: flat | flat %% | cum | cum %% | Function |\n|--:|--:|--:|--:|---|\n", p.title)
		for _, row := range topRows(string(out)) {
			fmt.Fprintf(b, "| %s | %s | %s | %s | `%s` |\n", row[0], row[1], row[3], row[4], row[5])
		}
		b.WriteString("\n")
	}
	return nil
}

// topRows returns the rows of go tool pprof -top's table: flat, flat%,
// sum%, cum, cum% and the function's name.
func topRows(out string) [][]string {
	var rows [][]string
	table := false
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) == 5 && f[0] == "flat" && f[1] == "flat%":
			table = true
		case table && len(f) >= 6:
			rows = append(rows, append(f[:5:5], strings.Join(f[5:], " ")))
		}
	}
	return rows
}

// contendedFig reads a figure of the contention benchmark: unit, of
// contender name in shape.
func contendedFig(shape, name, unit string) func(r results, driver string) (float64, bool) {
	return func(r results, driver string) (float64, bool) {
		return r.median("BenchmarkContention/"+shape+"/"+driver+"/"+name, unit)
	}
}

// waitTargets are the targets of waiting by notification: single under
// contention, and its uncontended time as before.
var waitTargets = func() []target {
	var ts []target
	for _, s := range []struct{ shape, what string }{{"8-lockers", "8 Lockers"}, {"8-procs", "8 processes"}} {
		ts = append(ts,
			target{"single, " + s.what + ": handoff to another waiter", contendedFig(s.shape, "single", "other-%"), 80, false, " %"},
			target{"single, " + s.what + ": commands per acquisition", contendedFig(s.shape, "single", "cmds/acq"), 4, true, ""},
			target{"single, " + s.what + ": worst wait ÷ fair ideal", contendedFig(s.shape, "single", "worst/ideal"), 3, true, "×"},
			target{"single, " + s.what + ": handoff p99", contendedFig(s.shape, "single", "handoff-p99-us"), 1000, true, " µs"},
		)
	}
	return append(ts,
		target{"single, 64 Lockers: commands per acquisition", contendedFig("64-lockers", "single", "cmds/acq"), 4, true, ""},
		target{"single time ÷ raw time, uncontended (as in Targets)", timeRatio("single", "raw", "serial", false), 1.10, true, "×"},
	)
}()

const waitNote = "`single` waiting by notification, in the contention runs above (fair ideal: (contenders − 1) × (hold + median handoff)); and its uncontended time, which must not grow (it was 1.07× and 1.06× the raw baseline's before waiting by notification). A – is a figure not measured: a driver that cannot subscribe has no notification row."

func targets(b *strings.Builder, r results, title, note string, list []target) {
	fmt.Fprintf(b, "### %s\n\n", title)
	if note != "" {
		fmt.Fprintf(b, "%s\n\n", note)
	}
	b.WriteString("| Target | Bound | goredis | redigo | rueidis |\n|---|--:|--:|--:|--:|\n")
	for _, t := range list {
		bound := "≤"
		if !t.below {
			bound = "≥"
		}
		if t.limit == 0 {
			fmt.Fprintf(b, "| %s | – |", t.what)
		} else {
			fmt.Fprintf(b, "| %s | %s %g%s |", t.what, bound, t.limit, t.unit)
		}
		for _, driver := range []string{"goredis", "redigo", "rueidis"} {
			v, ok := t.value(r, driver)
			met := v <= t.limit
			if !t.below {
				met = v >= t.limit
			}
			format := "%.2f"
			if v >= 100 {
				format = "%.0f"
			}
			switch {
			case !ok:
				b.WriteString(" – |")
			case t.limit == 0:
				fmt.Fprintf(b, " "+format+" |", v)
			case met:
				fmt.Fprintf(b, " "+format+" ✅ |", v)
			default:
				fmt.Fprintf(b, " "+format+" ❌ |", v)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// shapes are the layouts of the contention benchmark, by the name of its
// sub-benchmarks.
var shapes = []struct{ name, title string }{
	{"8-lockers", "8 separate Lockers"},
	{"8-procs", "8 OS processes"},
	{"64-lockers", "64 separate Lockers"},
}

func contended(b *strings.Builder, r results) {
	for i, s := range shapes {
		note := contentionNote
		if i > 0 {
			note = "As above, with " + s.title + "."
		}
		table(b, r, "BenchmarkContention/"+s.name, "Contention: "+s.title+", one key, 1 ms holds",
			note,
			[]string{"acq/s", "handoff p50 µs", "handoff p99 µs", "wait p99 ms", "wait max ms", "worst ÷ ideal", "most passed", "other %", "commands/acq", "overlaps"},
			func(c string) []string {
				var cells []string
				for _, m := range []struct{ unit, format string }{
					{"acq/s", "%.0f"}, {"handoff-p50-us", "%.0f"}, {"handoff-p99-us", "%.0f"}, {"wait-p99-ms", "%.1f"},
					{"wait-max-ms", "%.1f"}, {"worst/ideal", "%.1f"}, {"max-passed", "%.0f"}, {"other-%", "%.0f"}, {"cmds/acq", "%.1f"}, {"overlaps", "%.0f"},
				} {
					v, ok := r.median("BenchmarkContention/"+s.name+"/"+c, m.unit)
					cells = append(cells, fig(v, ok, m.format))
				}
				return cells
			})
	}
	wakes(b, r)
}

const contentionNote = "Each contender has clients of its own. `single` waits by notification, with a 200 ms timer; `single-poll` and the other contenders retry every 1 ms, but for `bsm-redislock-10ms` (10 ms) and `redsync-default` (redsync's default, 50 to 250 ms at random, on one server). Handoff: from a holder starting to release to the next holder's obtain returning. Worst ÷ ideal: the longest wait over (contenders − 1) × (hold + median handoff). Most passed: the most acquisitions by others while one obtain waited (in FIFO order, at most contenders − 1). Other: acquisitions that went to a contender other than the last releaser. Commands: what the clients sent (handshakes excluded; a subscriber's SUBSCRIBE included), per acquisition, failed attempts included."

// wakes writes the histogram of why locksmith's waiters woke, for the runs
// where they woke at all.
func wakes(b *strings.Builder, r results) {
	units := []string{"wake-message", "wake-subscribed", "wake-resubscribed", "wake-timer", "missed"}
	b.WriteString("### Why waiters woke\n\nlock.Hooks Wait, over each whole run: a waiter wakes for a message naming it (a release wakes the head of the queue), the confirmation of its subscription (a release before it went unheard), a resubscription after a failure, or its timer. Missed: locks obtained after a timer woke the waiter though the holder's key would not yet have expired, so that a message was due (a lost notification, or one that a timer beat).\n\n")
	b.WriteString("| Contention | Driver | Contender | acquisitions | message | subscribed | resubscribed | timer | missed |\n|---|---|---|--:|")
	b.WriteString(strings.Repeat("--:|", len(units)) + "\n")
	for _, s := range shapes {
		for _, c := range r.contenders("BenchmarkContention/" + s.name) {
			bench := "BenchmarkContention/" + s.name + "/" + c
			total := 0.0
			var cells []string
			for _, unit := range units {
				v, ok := r.median(bench, unit)
				total += v
				cells = append(cells, fig(v, ok, "%.0f"))
			}
			if total == 0 {
				continue
			}
			n, ok := r.median(bench, "acqs")
			driver, name, _ := strings.Cut(c, "/")
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", s.title, driver, name, fig(n, ok, "%.0f"), strings.Join(cells, " | "))
		}
	}
	b.WriteString("\n")
}

// The markers around the generated part of the README, and those around
// BenchmarkHeld's section within it, which -only held rewrites.
const (
	begin     = "<!-- report:begin (generated by cmd/report: do not edit) -->"
	end       = "<!-- report:end -->"
	heldBegin = "<!-- report:held:begin -->"
	heldEnd   = "<!-- report:held:end -->"
)

// splice replaces the text between the markers begin and end in file with
// text.
func splice(file, text, begin, end string) error {
	old, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q section to replace", file, begin, end)
	}
	s = s[:i+len(begin)] + "\n" + text + s[j:]
	return os.WriteFile(file, []byte(s), 0o644)
}
