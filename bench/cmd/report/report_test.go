package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// readme is the page that the command writes.
const readme = "../../README.md"

// maxLines is the most lines the page may have: it is a page for users,
// the reasoning behind its figures is in docs/design/performance.md.
const maxLines = 220

// TestPage checks that README.md is what the command writes, but for the
// figures: the same sections, notes, table heads and targets, in the same
// order, and every row of a table as many cells as its head.
func TestPage(t *testing.T) {
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if n := strings.Count(s, "\n"); n > maxLines {
		t.Errorf("%s has %d lines, more than %d: keep it a page for users, and the reasoning in docs/design/performance.md", readme, n, maxLines)
	}
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q ... %q", readme, begin, end)
	}
	got := skeleton(s[i+len(begin)+1 : j])

	r := results{"BenchmarkSemaphoreContention/goredis/plain": {"acq/s": {1}}} // so that its table is written
	var b strings.Builder
	machine(&b, "go run ./cmd/report", options{rounds: 9, benchtime: "150ms"}, "0, 0, 0", "0, 0, 0")
	page(&b, r, options{contention: true, held: true, elect: true, guard: true})
	want := skeleton(b.String())

	for k := 0; k < len(got) || k < len(want); k++ {
		var g, w string
		if k < len(got) {
			g = got[k]
		}
		if k < len(want) {
			w = want[k]
		}
		if g != w {
			t.Fatalf("%s differs from what cmd/report writes from its line %d on:\n got: %q\nwant: %q", readme, k+1, g, w)
		}
	}
	checkCells(t, s[i:j])
}

var (
	// alone is what a section run alone says of its run.
	alone = regexp.MustCompile("^Run alone with `cd bench && go run ./cmd/report -only [^`]*` on [0-9-]+ \\(load average [^)]*\\), on (the machine above|[^`]+, [0-9]+ cores \\(nproc\\))\\. ")
	// measured is the line that says what the run ran on.
	measured = regexp.MustCompile("^Measured with `cd bench && go run ./cmd/report[^`]*` on [0-9-]+: .*")
)

// skeleton returns the lines of the report s but for its figures: its
// headings, notes (less what says when a section ran alone), the heads of
// its tables, and the first two cells of the targets, which every run
// writes.
func skeleton(s string) []string {
	var out []string
	lines := strings.Split(s, "\n")
	inTargets := false
	for k, l := range lines {
		switch {
		case l == "":
		case strings.HasPrefix(l, "### "):
			inTargets = l == "### "+targetsTitle
			out = append(out, l)
		case strings.HasPrefix(l, "|-"):
			out = append(out, l)
		case strings.HasPrefix(l, "|") && k+1 < len(lines) && strings.HasPrefix(lines[k+1], "|-"):
			out = append(out, l) // a table's head
		case strings.HasPrefix(l, "|"):
			if inTargets {
				cells := strings.SplitN(l, " | ", 3)
				out = append(out, cells[0]+" | "+cells[1])
			}
		case measured.MatchString(l):
			out = append(out, "Measured with …")
		default:
			out = append(out, alone.ReplaceAllString(l, ""))
		}
	}
	return out
}

// checkCells checks that every row of every table of s has as many cells
// as the table's head.
func checkCells(t *testing.T, s string) {
	t.Helper()
	cells := 0
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "|") {
			cells = 0
			continue
		}
		n := strings.Count(l, "|") - 1
		switch {
		case cells == 0:
			cells = n
		case n != cells:
			t.Errorf("a row of %d cells in a table of %d: %s", n, cells, l)
		}
	}
}

func TestParse(t *testing.T) {
	r := results{}
	r.parse("BenchmarkLock/goredis/raw/serial-2  4546  136521 ns/op  666 B/op  19 allocs/op")
	r.parse("BenchmarkLock/goredis/raw/serial-2  4546  136523 ns/op  666 B/op  19 allocs/op")
	r.parse("ok  	github.com/locksmith-go/lock/bench	12.3s")
	v, ok := r.median("BenchmarkLock/goredis/raw/serial", "ns/op")
	if !ok || v != 136522 {
		t.Errorf("median ns/op = %v, %v; want 136522, true", v, ok)
	}
	if len(r) != 1 {
		t.Errorf("parsed %d benchmarks, want 1: %v", len(r), r)
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		v, limit float64
		atMost   bool
		want     string
	}{
		{1.07, 1.1, true, "1.07 ✅"},
		{1.21, 1.1, true, "1.21 ❌"},
		{1.004, 1, true, "1.00 ✅"}, // as shown
		{0.94, 0.95, false, "0.94 ❌"},
		{1.03, 0.95, false, "1.03 ✅"},
	} {
		if got := check(c.v, true, c.limit, c.atMost, "%.2f"); got != c.want {
			t.Errorf("check(%v, %v, atMost %v) = %q, want %q", c.v, c.limit, c.atMost, got, c.want)
		}
	}
	if got := check(1, false, 1, true, "%.2f"); got != "–" {
		t.Errorf("check of a figure not measured = %q, want –", got)
	}
}

const sample = "intro\n" + begin + "\nmachine\n\n### A\nnote a\n\n| x |\n|--:|\n| 1 |\n\n### B\nnote b\n\n| y |\n|--:|\n| 2 |\n\n" +
	"### " + targetsTitle + "\nnote\n\n| Target | Bound | goredis |\n|---|--:|--:|\n| t1 | ≤ 1 | 1 ✅ |\n| t2 | ≤ 2 | 3 ❌ |\n\n" + end + "\nafter\n"

func TestSpliceSection(t *testing.T) {
	got, err := spliceSection(sample, "A", "### A\nnew\n\n")
	if want := strings.Replace(sample, "### A\nnote a\n\n| x |\n|--:|\n| 1 |\n\n", "### A\nnew\n\n", 1); err != nil || got != want {
		t.Errorf("spliceSection A = %q, %v; want %q", got, err, want)
	}
	got, err = spliceSection(sample, targetsTitle, "### "+targetsTitle+"\nnew\n\n")
	if want := sample[:strings.Index(sample, "### "+targetsTitle)] + "### " + targetsTitle + "\nnew\n\n" + end + "\nafter\n"; err != nil || got != want {
		t.Errorf("spliceSection of the last section = %q, %v; want %q", got, err, want)
	}
	got, err = spliceSection(sample, "C", "### C\nnew\n\n")
	if want := strings.Replace(sample, "### "+targetsTitle, "### C\nnew\n\n### "+targetsTitle, 1); err != nil || got != want {
		t.Errorf("spliceSection of a new section = %q, %v; want %q, before the targets", got, err, want)
	}
	noTargets := sample[:strings.Index(sample, "### "+targetsTitle)] + end + "\n"
	if _, err := spliceSection(noTargets, "C", ""); err == nil {
		t.Error("spliceSection of a section that is not there, in a report without targets: no error")
	}
}

func TestSpliceRows(t *testing.T) {
	got, err := spliceRows(sample, []string{"| t2 | ≤ 2 | 1 ✅ |\n"})
	if want := strings.Replace(sample, "| t2 | ≤ 2 | 3 ❌ |", "| t2 | ≤ 2 | 1 ✅ |", 1); err != nil || got != want {
		t.Errorf("spliceRows = %q, %v; want %q", got, err, want)
	}
	if _, err := spliceRows(sample, []string{"| t3 | ≤ 3 | 1 ✅ |\n"}); err == nil {
		t.Error("spliceRows of a row that is not there: no error")
	}
}

// TestTargetRows checks that the rows that a section run alone rewrites
// are rows of the targets table.
func TestTargetRows(t *testing.T) {
	for _, p := range parts {
		if p.name == "semaphore" || p.name == "elect" || p.name == "guard" {
			continue // no target reads it
		}
		if len(targetRows(results{}, p.name)) == 0 {
			t.Errorf("-only %s rewrites no row of the targets table", p.name)
		}
	}
}
