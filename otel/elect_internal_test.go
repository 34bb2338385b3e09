package lockotel

import (
	"runtime"
	"testing"
	"time"

	"github.com/locksmith-go/lock/elect"
)

// TestTermsForgetCollectedTerms: the state of a term whose Ended hook ran
// with no Elected (its refreshes failed to start, and Campaign went on)
// is deleted once its Term is garbage-collected, and kept while it lives.
func TestTermsForgetCollectedTerms(t *testing.T) {
	var ts terms
	size := func() int {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return len(ts.m)
	}
	live := new(elect.Term)
	ts.ended(live, elect.ErrResigned, 0, time.Now())
	func() {
		ts.ended(new(elect.Term), elect.ErrResigned, 0, time.Now())
	}()
	if got := size(); got != 2 {
		t.Fatalf("entries: got %d, want 2", got)
	}
	for deadline := time.Now().Add(10 * time.Second); size() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("entries: got %d, want 1 once the dropped Term is collected", size())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	runtime.KeepAlive(live)
}
