package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Liveness is how soon a lock could be had again after each heal of a
// fault.
type Liveness struct {
	// Waits holds, for each heal, the time from the heal to the first hold
	// obtained after it, of any key, sorted.
	Waits []time.Duration
	// Cut counts the heals that the next fault followed before any hold:
	// their wait is not known.
	Cut int
	// Never counts the heals that no hold followed before the run ended.
	Never int
}

// Live measures holds' Liveness after each time in heals, where faults
// are the times the faults began.
func Live(holds []Hold, heals, faults []int64) Liveness {
	obtained := make([]int64, 0, len(holds))
	for _, h := range holds {
		obtained = append(obtained, h.Obtained)
	}
	slices.Sort(obtained)
	faults = slices.Sorted(slices.Values(faults))
	var l Liveness
	for _, heal := range heals {
		i, _ := slices.BinarySearch(obtained, heal+1)
		j, _ := slices.BinarySearch(faults, heal+1)
		switch {
		case j < len(faults) && (i == len(obtained) || obtained[i] > faults[j]):
			l.Cut++
		case i == len(obtained):
			l.Never++
		default:
			l.Waits = append(l.Waits, time.Duration(obtained[i]-heal))
		}
	}
	slices.Sort(l.Waits)
	return l
}

// Over returns how many waits exceed bound.
func (l Liveness) Over(bound time.Duration) int {
	i, _ := slices.BinarySearch(l.Waits, bound+1)
	return len(l.Waits) - i
}

// Quantile returns the wait at quantile q in [0, 1], or 0 when there was
// none.
func (l Liveness) Quantile(q float64) time.Duration {
	if len(l.Waits) == 0 {
		return 0
	}
	return l.Waits[min(len(l.Waits)-1, int(q*float64(len(l.Waits))))]
}

// String says what l measured, in one line.
func (l Liveness) String() string {
	return fmt.Sprintf("after %d heals: waits p50 %v, p99 %v, max %v; %d cut short by the next fault, %d never followed",
		len(l.Waits)+l.Cut+l.Never, l.Quantile(0.5).Round(time.Millisecond), l.Quantile(0.99).Round(time.Millisecond),
		l.Quantile(1).Round(time.Millisecond), l.Cut, l.Never)
}

// kept reports whether a key may live without an expiry: a fencing
// counter, which must outlive every lock of its key, or Redlock's restart
// guard's record.
func kept(key string) bool {
	return strings.HasSuffix(key, ":fence") || strings.HasSuffix(key, ":fences") || key == "locksmith:redlock:up-since"
}

// Leaks scans the server that admin reaches for keys the locks leave
// behind: noTTL are those without an expiry, and left every key but those
// that may be kept.
func Leaks(ctx context.Context, admin *redis.Client) (noTTL, left []string, err error) {
	iter := admin.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if kept(key) {
			continue
		}
		ttl, err := admin.PTTL(ctx, key).Result()
		if err != nil {
			return nil, nil, fmt.Errorf("jepsen: PTTL %q: %w", key, err)
		}
		switch ttl {
		case -2: // expired: a replica lists a key until its master deletes it
			continue
		case -1:
			noTTL = append(noTTL, key)
		}
		left = append(left, key)
	}
	if err := iter.Err(); err != nil {
		return nil, nil, fmt.Errorf("jepsen: SCAN: %w", err)
	}
	return noTTL, left, nil
}
