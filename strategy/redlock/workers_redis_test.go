package redlock_test

import (
	"context"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// goroutinesCreated returns how many goroutines the program has started,
// and false on a Go release without the metric (before 1.26).
func goroutinesCreated() (uint64, bool) {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}

// TestNoGoroutinePerNodePerCall: a Locker in steady use runs its nodes'
// commands on workers that outlive a call, over the drivers that start no
// goroutine per command themselves (go-redis, and rueidis, which
// pipelines): Obtain and Release in a loop start far fewer goroutines than
// one per node per call.
func TestNoGoroutinePerNodePerCall(t *testing.T) {
	if _, ok := goroutinesCreated(); !ok {
		t.Skip("runtime/metrics has no /sched/goroutines-created on this Go release")
	}
	servers := redistest.Start(t, nodes)
	for _, name := range []string{"goredis-resp3", "rueidis"} {
		t.Run(name, func(t *testing.T) {
			l := lockerOver(t, driverNamed(name), servers)
			key := conformance.Key(t)
			ctx := context.Background()
			cycle := func() {
				lk, err := l.Obtain(ctx, key, 30*time.Second)
				if err != nil {
					t.Fatalf("Obtain = %v, want a lock", err)
				}
				if err := lk.Release(ctx); err != nil {
					t.Fatalf("Release = %v, want nil", err)
				}
			}
			cycle() // dials, and starts the workers
			const calls = 100
			before, _ := goroutinesCreated()
			for range calls {
				cycle()
			}
			after, _ := goroutinesCreated()
			t.Logf("goroutines started by %d Obtain and Release calls over %d nodes: %d", calls, nodes, after-before)
			// One per node per call would be 2 × calls × nodes. A worker
			// idle for 100ms on a starved machine ends, and its node starts
			// another, and the process counts every goroutine, the
			// drivers' and the runtime's too: half of one per call leaves
			// room for that (CI, loaded, on Valkey 8.0: 290 over rueidis).
			if got, perCall := after-before, uint64(2*calls*nodes); got >= perCall/2 {
				t.Errorf("goroutines started by %d Obtain and Release calls over %d nodes = %d, want under %d (one per node per call: %d)",
					calls, nodes, got, perCall/2, perCall)
			}
		})
	}
}
