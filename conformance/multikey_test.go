package conformance

import (
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// oneKeyOnly is single over go-redis, unbroken, behind a strategy that is
// no strategy.Multi.
var oneKeyOnly = mutant{name: "one-key-only", kills: multiKeyProperties(),
	strategy: func(b base) strategy.Strategy { return struct{ strategy.Strategy }{b} }}

// multiKeyProperties returns the names of the multi-key properties.
func multiKeyProperties() []string {
	var names []string
	for _, p := range properties {
		if strings.HasPrefix(p.name, "MultiKey") {
			names = append(names, p.name)
		}
	}
	return names
}

// TestMultiKeyPropertiesSkip: on a Locker whose strategy cannot lock
// several keys as one, each multi-key property skips, saying why, and the
// run passes.
func TestMultiKeyPropertiesSkip(t *testing.T) {
	addr, _ := redistest.Addr(t)
	out, err := runChild(oneKeyOnly, addr)
	if err != nil {
		t.Errorf("the suite on a strategy that is no strategy.Multi = %v, want it to pass", err)
	}
	for _, p := range oneKeyOnly.kills {
		if want := "--- SKIP: TestMutantRun/" + oneKeyOnly.name + "/" + p + " "; !strings.Contains(out, want) {
			t.Errorf("the run's output lacks %q", want)
		}
	}
	if want := "the Locker does not lock several keys as one"; strings.Count(out, want) != len(oneKeyOnly.kills) {
		t.Errorf("the run's output gives the reason, %q, %d times, want %d", want, strings.Count(out, want), len(oneKeyOnly.kills))
	}
	if t.Failed() {
		t.Logf("the child's output:\n%s", out)
	}
}
