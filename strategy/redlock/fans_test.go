package redlock

import "testing"

// TestTrack: a fan-out with an op still running is in the set under each
// of its names until its last op returns; one whose ops have all returned
// is not put in at all; a name that a later fan-out took over stays with
// that one.
func TestTrack(t *testing.T) {
	var set fans
	running := func() *fan {
		f := &fan{}
		f.running.Store(1)
		return f
	}
	a := running()
	a.track(&set, "k1", "", []string{"k1", "k2"})
	b := running()
	b.track(&set, "k2", "", nil) // takes k2 over from a
	if set.load(lockName{key: "k1"}) != a || set.load(lockName{key: "k2"}) != b {
		t.Fatalf("k1, k2 = %p, %p; want a %p, b %p", set.load(lockName{key: "k1"}), set.load(lockName{key: "k2"}), a, b)
	}
	a.forget()
	if set.load(lockName{key: "k1"}) != nil || set.load(lockName{key: "k2"}) != b {
		t.Errorf("after a's last op: k1, k2 = %p, %p; want nil, b %p", set.load(lockName{key: "k1"}), set.load(lockName{key: "k2"}), b)
	}
	b.forget()
	if len(set.m) != 0 {
		t.Errorf("after b's last op: %d names left, want none", len(set.m))
	}
	b.track(&set, "k3", "v", nil) // every op of b returned
	if f := set.load(lockName{"k3", "v"}); f != nil {
		t.Errorf("a fan-out tracked after its last op returned = %p, want nil", f)
	}
}
