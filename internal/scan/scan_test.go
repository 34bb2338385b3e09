package scan

import (
	"strconv"
	"testing"

	"github.com/locksmith-go/lock/internal/cas"
)

// TestKeyIn checks keyIn's promise: every Cluster hash slot has a key below
// 2^17, so that keyIn ends quickly for any range.
func TestKeyIn(t *testing.T) {
	var covered [slots]bool
	left := slots
	for i := 0; i < 1<<17 && left > 0; i++ {
		if s := cas.Slot(strconv.Itoa(i)); !covered[s] {
			covered[s], left = true, left-1
		}
	}
	if left > 0 {
		t.Errorf("%d slots have no key below 2^17, want 0", left)
	}
	for _, slot := range []int{0, 1, 8191, slots - 1} {
		if got := cas.Slot(keyIn(slot, slot)); got != slot {
			t.Errorf("the slot of keyIn(%d, %d) = %d, want %d", slot, slot, got, slot)
		}
	}
}
