package conformance

import (
	"context"

	"github.com/locksmith-go/lock/strategy"
)

// blindInspect is the mutant inspect-sees-nothing: its Inspect finds every
// key free.
type blindInspect struct{ base }

func (blindInspect) Inspect(context.Context, string) (strategy.State, error) {
	return strategy.State{Verdict: "free"}, nil
}

// blindBreak is the mutant break-ignores-the-fingerprint: its Break
// deletes whoever holds the lock.
type blindBreak struct{ base }

func (s blindBreak) Break(ctx context.Context, key, _ string) (strategy.State, error) {
	return s.singleStrategy.Break(ctx, key, "")
}
