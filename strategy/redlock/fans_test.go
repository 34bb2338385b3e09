package redlock

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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

// TestFollowUp: a fan-out follows each node up once, never before the
// node's op returned: for a node that answered before the outcome was
// known, before fanOut returns; for one whose op returns later, once it
// returns; and not at all where no follow-up is needed.
func TestFollowUp(t *testing.T) {
	const nodes = 3
	s := &Strategy{}
	for i := range nodes {
		s.nodes = append(s.nodes, node{name: "node " + strconv.Itoa(i), work: &workers{jobs: make(chan job)}})
	}
	gates := make([]chan struct{}, nodes)
	returned := make([]atomic.Bool, nodes)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	op := func(_ context.Context, i int, _ node) error {
		<-gates[i]
		returned[i].Store(true)
		return nil
	}
	var (
		mu       sync.Mutex
		followed = map[int]int{}
		early    = make(chan int, nodes)
	)
	then := after{
		needed: func(_ error, failed bool) bool { return !failed },
		do: func(_ context.Context, i int, _ node, _ error, _ bool) {
			mu.Lock()
			followed[i]++
			mu.Unlock()
			if !returned[i].Load() {
				t.Errorf("node %d followed up before its op returned", i)
			}
			early <- i
		},
	}
	close(gates[0])
	res, failed, _ := s.fanOut(context.Background(), time.Minute, op, then, func(t tally) decision {
		if t.ok >= 1 {
			return success
		}
		return undecided
	})
	if failed || res[0].Outcome != OK {
		t.Fatalf("fanOut = node 0 %v, failed %v; want OK, false", res[0].Outcome, failed)
	}
	mu.Lock()
	if followed[0] != 1 {
		t.Errorf("node 0, which answered before the outcome, followed up %d times when fanOut returned, want 1", followed[0])
	}
	mu.Unlock()
	<-early
	close(gates[1])
	close(gates[2])
	for range nodes - 1 {
		<-early
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range nodes {
		if followed[i] != 1 {
			t.Errorf("node %d followed up %d times, want 1", i, followed[i])
		}
	}

	t.Run("no follow-up where none is needed", func(t *testing.T) {
		var calls atomic.Int32
		none := after{needed: func(error, bool) bool { return false }, do: func(context.Context, int, node, error, bool) { calls.Add(1) }}
		_, _, f := s.fanOut(context.Background(), time.Minute, func(context.Context, int, node) error { return nil }, none, nil)
		<-f.idle
		if n := calls.Load(); n != 0 {
			t.Errorf("follow-ups = %d, want 0", n)
		}
	})
}
