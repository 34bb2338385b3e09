package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestBusyWording: run -n and acquire -n say alike who holds a busy lock.
func TestBusyWording(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	env := url(t, "single")
	acquire(t, env, "busy")
	want := regexp.MustCompile(`lock "busy" is held by pid [0-9]+ on \S+ \(acquire\) for [0-9.]+m?s \(-n: not waiting\)`)
	var lines []string
	for _, args := range [][]string{{"run", "-n", "busy", "--", "true"}, {"acquire", "-n", "busy"}} {
		r := locksmith(t, []string{env}, args...)
		if r.code != exitNotObtained {
			t.Fatalf("%s: got %s\nwant exit %d", args[0], r, exitNotObtained)
		}
		line := want.FindString(r.stderr)
		if line == "" {
			t.Fatalf("%s -n: got stderr %q, want it to match %q", args[0], r.stderr, want)
		}
		lines = append(lines, line[:strings.Index(line, " for ")])
	}
	if lines[0] != lines[1] {
		t.Errorf("run -n says %q, acquire -n %q: want the same words", lines[0], lines[1])
	}
}
