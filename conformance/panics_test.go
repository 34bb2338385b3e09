package conformance

import (
	"context"
	"time"

	"github.com/locksmith-go/lock"
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
