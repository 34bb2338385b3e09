package conformance

import (
	"strings"
	"testing"

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
	checkSkips(t, oneKeyOnly, "a strategy that is no strategy.Multi", "the Locker does not lock several keys as one")
}
