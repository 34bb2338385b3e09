package conformance_test

import (
	"testing"

	"github.com/locksmith-go/lock/conformance"
)

// TestDetector: the Detector counts an entry that finds another holder
// inside as an overlap, and nothing else.
func TestDetector(t *testing.T) {
	t.Run("a second Enter before an Exit is an overlap", func(t *testing.T) {
		var d conformance.Detector
		d.Enter()
		d.Enter()
		d.Exit()
		d.Exit()
		if got := d.Overlaps(); got != 1 {
			t.Errorf("Overlaps = %d, want 1", got)
		}
		if got := d.Entries(); got != 2 {
			t.Errorf("Entries = %d, want 2", got)
		}
	})
	t.Run("each Enter that finds others inside counts once", func(t *testing.T) {
		var d conformance.Detector
		d.Enter()
		d.Enter()
		d.Enter()
		if got := d.Overlaps(); got != 2 {
			t.Errorf("Overlaps with three inside = %d, want 2", got)
		}
	})
	t.Run("sequential holders do not overlap", func(t *testing.T) {
		var d conformance.Detector
		for range 3 {
			d.Enter()
			d.Exit()
		}
		d.Hold(0)
		if got := d.Overlaps(); got != 0 {
			t.Errorf("Overlaps = %d, want 0", got)
		}
		if got := d.Entries(); got != 4 {
			t.Errorf("Entries = %d, want 4", got)
		}
	})
	t.Run("an Enter after all left is not an overlap", func(t *testing.T) {
		var d conformance.Detector
		d.Enter()
		d.Enter()
		d.Exit()
		d.Exit()
		d.Enter()
		if got := d.Overlaps(); got != 1 {
			t.Errorf("Overlaps = %d, want 1 (only the second Enter)", got)
		}
	})
}
