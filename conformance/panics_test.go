package conformance

import (
	"context"
	"sync"

	"github.com/locksmith-go/lock/strategy"
)

// reportsUnderLock is the mutant mutex-held-across-a-hook: a multi-node
// strategy, as far as the hooks know, whose Acquire reports its node while
// it holds a mutex, which it unlocks without defer: a Node hook that
// panics leaves the mutex held, and every later Acquire waits for it
// forever, whatever its context.
type reportsUnderLock struct {
	base
	mu *sync.Mutex
}

func (s reportsUnderLock) ReportsNodes() bool { return true }

func (s reportsUnderLock) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	s.mu.Lock()
	g, err := s.base.Acquire(ctx, r)
	strategy.ReportNode(ctx, "node 0", "ok", err)
	s.mu.Unlock()
	return g, err
}
