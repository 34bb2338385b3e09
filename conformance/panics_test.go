package conformance

import (
	"context"
	"sync"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// ctxFirst is the mutant nil-context-panics: a Locker that asks the
// context whether it is done before it hands the call on, and so panics on
// a nil one.
type ctxFirst struct{ lock.Locker }

func (l ctxFirst) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...lock.Option) (*lock.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return l.Locker.Obtain(ctx, key, ttl, opts...)
}

func (l ctxFirst) Inspect(ctx context.Context, key string, opts ...lock.Option) (lock.State, error) {
	if err := ctx.Err(); err != nil {
		return lock.State{}, err
	}
	return l.Locker.Inspect(ctx, key, opts...)
}

func (l ctxFirst) Break(ctx context.Context, key, fingerprint string, opts ...lock.Option) (lock.State, error) {
	if err := ctx.Err(); err != nil {
		return lock.State{}, err
	}
	return l.Locker.Break(ctx, key, fingerprint, opts...)
}

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
