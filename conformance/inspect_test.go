package conformance

import (
	"context"

	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// blindInspect is the mutant inspect-sees-nothing: its Inspect finds every
// key free.
type blindInspect struct{ *single.Strategy }

func (blindInspect) Inspect(context.Context, string) (strategy.State, error) {
	return strategy.State{Verdict: "free"}, nil
}
