package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/internal/testing/embedded"
)

// TestWaterfall runs two workers on one lock on the embedded server: the
// one that obtains it holds it for a second, far longer than the other
// takes to try, even on a loaded machine, so that the other waits, and its
// span links to the first's.
func TestWaterfall(t *testing.T) {
	bare, closeLocker, err := embedded.Single("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeLocker)
	ctx := context.Background()
	rec := newRecorder()
	t.Cleanup(func() { rec.shutdown(ctx) })
	tr, err := rec.run(ctx, bare, []job{{1, "k"}, {2, "k"}}, 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.rows) != 2 {
		t.Fatalf("got %d rows, want 2", len(tr.rows))
	}
	holder, waiter := tr.rows[0], tr.rows[1]
	name := fmt.Sprintf("worker %d", holder.worker)

	t.Run("the waiter links to the holder it met", func(t *testing.T) {
		if len(waiter.links) != 1 {
			t.Fatalf("got %d links, want 1: %+v", len(waiter.links), waiter.links)
		}
		if l := waiter.links[0]; l.to != 0 || l.holder != name {
			t.Errorf("got a link to row %d, named %q; want one to row 0, named %q", l.to, l.holder, name)
		}
	})
	t.Run("the holder links to none", func(t *testing.T) {
		if len(holder.links) != 0 {
			t.Errorf("got links %+v, want none", holder.links)
		}
	})
	t.Run("each hold is its lock.hold span", func(t *testing.T) {
		for _, r := range tr.rows {
			if r.holdStart < r.obtainStart || r.holdStart > r.obtainEnd || r.holdEnd < r.releaseStart {
				t.Errorf("worker %d: got a hold from %vms to %vms, want one that starts in lock.obtain (%vms to %vms) and ends after lock.release starts (%vms)",
					r.worker, r.holdStart, r.holdEnd, r.obtainStart, r.obtainEnd, r.releaseStart)
			}
		}
	})
	t.Run("the text names the holder", func(t *testing.T) {
		var b strings.Builder
		tr.text(&b)
		prefix := fmt.Sprintf("  worker %d k ", waiter.worker)
		lines := strings.Split(b.String(), "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		if i < 0 || !strings.HasSuffix(lines[i], "→ "+name) {
			t.Errorf("got %q, want the waiter's row, ending with %q", b.String(), "→ "+name)
		}
	})
	t.Run("the picture draws the link", func(t *testing.T) {
		var b strings.Builder
		tr.svg(&b)
		if got := strings.Count(b.String(), `marker-end="url(#arrow)"`); got != 1 {
			t.Errorf("got %d arrows, want 1", got)
		}
		if !strings.Contains(b.String(), ">"+name+"</text>") {
			t.Errorf("got no label %q", name)
		}
	})
}
