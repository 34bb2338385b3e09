// Package drift holds the arithmetic of clock drift that the single and
// redlock strategies share: the allowance that a lock's local validity ends
// before its TTL, and the refusal of a TTL that the allowance uses up.
package drift

import (
	"fmt"
	"time"

	"github.com/locksmith-go/lock/strategy"
)

// DefaultFactor is the clock-drift factor of the Redis documentation.
const DefaultFactor = 0.01

// Allowance returns the Redis documentation's allowance for clock drift
// between client and servers over ttl: ttl × factor + 2ms, by which the
// lock's local validity ends before its TTL. A ttl that the allowance uses
// up would give a lock whose validity has passed already: Allowance refuses
// it with an *strategy.ArgumentError named "ttl" that states the shortest
// TTL accepted. factor must be in [0, 1).
func Allowance(ttl time.Duration, factor float64) (time.Duration, error) {
	d := time.Duration(float64(ttl)*factor) + 2*time.Millisecond
	if ttl <= d {
		// ttl > ttl × factor + 2ms  ⇔  ttl > 2ms / (1 − factor)
		least := time.Duration(float64(2*time.Millisecond) / (1 - factor)).Round(time.Microsecond)
		return 0, &strategy.ArgumentError{Name: "ttl", Reason: fmt.Sprintf("must be more than %v, the allowance for clock drift "+
			"(TTL × %v + 2ms) that the lock's validity ends before its TTL; got %v", least, factor, ttl)}
	}
	return d, nil
}
