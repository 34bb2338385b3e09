package single

import (
	"context"
	"errors"

	"github.com/locksmith-go/lock/strategy"
)

// Inspect implements [strategy.Strategy].
func (s *Strategy) Inspect(ctx context.Context, key string) (strategy.State, error) {
	return strategy.State{}, errors.ErrUnsupported // TODO(issue 13): the inspection
}
