package harness

import (
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy/redlock"
)

var seed = flag.Uint64("jepsen.seed", 0, "the seed of the fault schedules (0: one from the clock, printed)")

// schedule returns the seeded random source of t's faults, logging its
// seed so that the run can be replayed with -jepsen.seed.
func schedule(t *testing.T) *rand.Rand {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("fault schedule: -jepsen.seed=%d", s)
	return rand.New(rand.NewPCG(s, s))
}

// TestRedlockMinorityPartitions: clients of Redlock over five nodes take
// turns while a seeded schedule cuts off a minority of them, one or two
// nodes at a time, for 100 to 600 ms, again and again, over each driver: a
// quorum is always there to grant the lock, so no two holders are ever
// within their validity at once, and the lock is obtained between the cuts.
func TestRedlockMinorityPartitions(t *testing.T) {
	requireNet(t)
	for _, drv := range drivers {
		t.Run(drv, func(t *testing.T) {
			names := []string{"n1", "n2", "n3", "n4", "n5", "clients"}
			n := newNet(t, names...)
			clients := n.Node("clients")
			dir := shortDir(t)
			var conns []driver.Conn
			for _, name := range names[:5] {
				conns = append(conns, conn(t, drv, clients, startServer(t, n.Node(name), dir).Addr))
			}
			l, err := redlock.New(conns, redlock.WithNodeTimeout(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			rng := schedule(t)
			const d, ttl = 5 * time.Second, 500 * time.Millisecond
			stop := make(chan struct{})
			cuts := make(chan int, 1)
			go func() {
				count := 0
				defer func() { cuts <- count }()
				for end := time.Now().Add(d - time.Second); time.Now().Before(end); count++ {
					cut := rng.Perm(5)[:1+rng.IntN(2)]
					slices.Sort(cut)
					for _, i := range cut {
						if err := n.Node(names[i]).Cut(); err != nil {
							t.Error(err)
							return
						}
					}
					select {
					case <-time.After(time.Duration(100+rng.IntN(500)) * time.Millisecond):
					case <-stop:
					}
					for _, i := range cut {
						if err := n.Node(names[i]).Heal(); err != nil {
							t.Error(err)
							return
						}
					}
					time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
				}
			}()
			r := run(t, l, 4, d, ttl, func(int, int) time.Duration { return 2 * time.Millisecond })
			close(stop)
			t.Logf("%v; %d cuts", r, <-cuts)
			if r.ValidityOverlaps != 0 {
				t.Errorf("validity overlaps: got %d, want 0 (examples: %+v)", r.ValidityOverlaps, r.Examples)
			}
			if r.Holds == 0 {
				t.Errorf("holds: got 0, want some: a quorum was always there")
			}
		})
	}
}
