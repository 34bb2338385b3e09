package harness

import (
	"cmp"
	"fmt"
	"slices"
)

// A Hold is one holder's tenure of a lock, as its client recorded it. Its
// times are nanoseconds of one clock that every process of a run shares
// (CLOCK_MONOTONIC: one kernel), so that they order events across the
// processes; 0 is a time that never came.
type Hold struct {
	Key    string // the lock's key
	Holder string // the client and its holder, unique in the run
	Fence  int64  // the fencing token; 0 without fencing

	Invoked    int64 // the acquire's invocation
	Obtained   int64 // the acquire's return, with the lock
	Released   int64 // the release's invocation; 0 if the run ended first
	ValidUntil int64 // the end of its validity, as the holder last knew it
	Lost       int64 // when the holder learnt of its loss; 0 if it did not
}

// rawEnd is the end of h by its holder's acts: its release, or never.
func (h Hold) rawEnd() int64 {
	if h.Released == 0 {
		return maxTime
	}
	return h.Released
}

// validEnd is the end of h as the lock promises it: its release, its
// validity, or its loss, whichever came first.
func (h Hold) validEnd() int64 {
	end := h.rawEnd()
	for _, t := range []int64{h.ValidUntil, h.Lost} {
		if t != 0 && t < end {
			end = t
		}
	}
	return end
}

const maxTime = int64(^uint64(0) >> 1)

// An Overlap is two holds of one key at once: Second began before First
// ended.
type Overlap struct {
	First  Hold // the hold that had not ended
	Second Hold // the hold that began meanwhile
}

// A Report is what Check found in a history.
type Report struct {
	Holds int // in the history
	// RawOverlaps counts the holds that began, by their acquire's return,
	// before another hold of their key was released. A holder paused past
	// its validity makes them under every lease lock.
	RawOverlaps int
	// ValidityOverlaps counts the holds that began before another hold of
	// their key had ended by its release, its validity or its loss: two
	// holders within their leases at once, the breach of exclusion.
	ValidityOverlaps int
	// FencesIssuedTwice counts the holds whose fencing token a hold of the
	// same key had had before.
	FencesIssuedTwice int
	// FencesOutOfOrder counts the holds whose fencing token is not above
	// that of a hold of their key obtained before their acquire was
	// invoked.
	FencesOutOfOrder int
	// Lapsed counts the holds whose validity had ended when their acquire
	// returned (a client paused, or a reply delayed, past the TTL): they
	// held the lock within their validity at no moment, and no validity
	// overlap counts them.
	Lapsed int
	// Examples holds the first few validity overlaps, or raw ones when
	// there are none.
	Examples []Overlap
}

// examples is how many overlaps a Report keeps.
const examples = 5

// Check sweeps holds for overlaps per key and for fencing tokens issued
// twice or out of real-time order. It sorts a copy of holds, so it takes
// O(n log n) time, and a million holds in seconds.
func Check(holds []Hold) Report {
	r := Report{Holds: len(holds)}
	byKey := map[string][]Hold{}
	for _, h := range holds {
		byKey[h.Key] = append(byKey[h.Key], h)
	}
	var raw []Overlap
	for _, hs := range byKey {
		slices.SortFunc(hs, func(a, b Hold) int { return cmp.Compare(a.Obtained, b.Obtained) })
		n, ex := overlaps(hs, Hold.rawEnd)
		r.RawOverlaps += n
		raw = append(raw, ex...)
		valid := slices.DeleteFunc(slices.Clone(hs), func(h Hold) bool { return h.validEnd() <= h.Obtained })
		r.Lapsed += len(hs) - len(valid)
		n, ex = overlaps(valid, Hold.validEnd)
		r.ValidityOverlaps += n
		r.Examples = append(r.Examples, ex...)
		r.FencesIssuedTwice += issuedTwice(hs)
		r.FencesOutOfOrder += outOfOrder(hs)
	}
	if len(r.Examples) == 0 {
		r.Examples = raw
	}
	r.Examples = r.Examples[:min(len(r.Examples), examples)]
	return r
}

// overlaps counts the holds of hs, sorted by their start, that began
// before an earlier one ended by end, and returns the first few pairs.
func overlaps(hs []Hold, end func(Hold) int64) (int, []Overlap) {
	n := 0
	var ex []Overlap
	var last Hold // the hold that ends last of those begun so far
	for i, h := range hs {
		if i > 0 && h.Obtained < end(last) {
			n++
			if len(ex) < examples {
				ex = append(ex, Overlap{last, h})
			}
		}
		if i == 0 || end(h) > end(last) {
			last = h
		}
	}
	return n, ex
}

// issuedTwice counts the fenced holds of hs whose token came before.
func issuedTwice(hs []Hold) int {
	seen := map[int64]bool{}
	n := 0
	for _, h := range hs {
		if h.Fence == 0 {
			continue
		}
		if seen[h.Fence] {
			n++
		}
		seen[h.Fence] = true
	}
	return n
}

// outOfOrder counts the fenced holds of hs, sorted by their start, whose
// token is not above every token obtained before their acquire was
// invoked.
func outOfOrder(hs []Hold) int {
	byInvoked := slices.Clone(hs)
	slices.SortFunc(byInvoked, func(a, b Hold) int { return cmp.Compare(a.Invoked, b.Invoked) })
	n, next := 0, 0
	var highest int64 // of the holds obtained before the current one's invocation
	for _, h := range byInvoked {
		for next < len(hs) && hs[next].Obtained < h.Invoked {
			highest = max(highest, hs[next].Fence)
			next++
		}
		if h.Fence != 0 && h.Fence <= highest {
			n++
		}
	}
	return n
}

// String says what r found, in one line.
func (r Report) String() string {
	return fmt.Sprintf("%d holds (%d lapsed on arrival): %d validity overlaps, %d raw overlaps, %d fences issued twice, %d fences out of order",
		r.Holds, r.Lapsed, r.ValidityOverlaps, r.RawOverlaps, r.FencesIssuedTwice, r.FencesOutOfOrder)
}
