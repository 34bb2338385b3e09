package cas

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestSlot: Slot is the Redis Cluster hash slot, hash tags included,
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
		{"foo{{bar}}zap", Slot("{bar")},
		{"foo{}{bar}", Slot("foo{}{bar}")}, // an empty tag: the whole key
	} {
		if got := Slot(tc.key); got != tc.want {
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
			if got, want := Slot(key), cluster.KeySlot(t, key); got != want {
				t.Errorf("Slot(%q) = %d, want %d (CLUSTER KEYSLOT)", key, got, want)
			}
		}
	})
}

// TestScatter: each item gets its own error from its group's call, or the
// group's when it has none of its own, and an unanswered group's error
// when its call got no answer; empty groups are not called.
func TestScatter(t *testing.T) {
	errOwn, errGroup, errNone := errors.New("own"), errors.New("group"), errors.New("no answer")
	gs := [][]int{{0, 2}, {1}, {}, {3}}
	errs, answered := scatter(4, gs, func(at []int) ([]error, error) {
		switch at[0] {
		case 0:
			return []error{errOwn, nil}, errGroup // item 2: the group's
		case 1:
			return []error{nil}, nil
		case 3:
			return nil, errNone
		}
		t.Errorf("call for group %v, want none", at)
		return nil, nil
	})
	if want := []error{errOwn, nil, errGroup, errNone}; !slices.Equal(errs, want) {
		t.Errorf("errors = %v, want %v", errs, want)
	}
	if want := []bool{true, true, true, false}; !slices.Equal(answered, want) {
		t.Errorf("answered = %v, want %v", answered, want)
	}
	if got := pick([]string{"a", "b", "c"}, []int{0, 2}); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("pick = %q, want [a c]", got)
	}
	if got := Groups([]string{"a", "b"}, false); len(got) != 1 || !slices.Equal(got[0], []int{0, 1}) {
		t.Errorf("Groups, not sharded = %v, want [[0 1]]", got)
	}
}
