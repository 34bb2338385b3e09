package cas_test

import (
	"fmt"
	"testing"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestSlot: cas.Slot is the Redis Cluster hash slot, hash tags included,
// by the examples of the Cluster specification and by a Cluster's own
// CLUSTER KEYSLOT.
func TestSlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"123456789", 12739}, // the spec's CRC16 check value, 0x31C3
		{"foo", 12182},
		{"bar", 5061},
		{"", 0},
		{"{foo}:lock", 12182}, // the hash tag alone
		{"x{bar}{foo}", 5061}, // the first tag
		{"foo{{bar}}zap", cas.Slot("{bar")},
		{"foo{}{bar}", cas.Slot("foo{}{bar}")}, // an empty tag: the whole key
	} {
		if got := cas.Slot(tc.key); got != tc.want {
			t.Errorf("Slot(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
	t.Run("as a Cluster computes it", func(t *testing.T) {
		cluster := redistest.StartCluster(t, 1)
		for i := range 200 {
			key := fmt.Sprintf("key-%d{t%d}", i, i%7)
			if i%3 == 0 {
				key = fmt.Sprintf("multi:%d:{}", i)
			}
			if got, want := cas.Slot(key), cluster.KeySlot(t, key); got != want {
				t.Errorf("Slot(%q) = %d, want %d (CLUSTER KEYSLOT)", key, got, want)
			}
		}
	})
}
