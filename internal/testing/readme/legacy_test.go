package readme

import setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver/goredis"
)

// Legacy is docs/strategies.md's "setnx-getset: the legacy lock".
func Legacy(ctx context.Context, client *redis.Client) error {
	locker, err := setnxgetset.New(goredis.New(client),
		setnxgetset.WithFormat(setnxgetset.Milliseconds), // what your legacy clients write
		setnxgetset.WithSafetyTTL(time.Minute),           // a crashed holder leaves no immortal key
		setnxgetset.WithClockSkew(2*time.Second),         // how far apart the fleet's clocks may be
	)
	if err != nil {
		return err // an *lock.ArgumentError that names the option
	}
	lk, err := locker.Obtain(ctx, "lock.invoices", 30*time.Second) // the same *lock.Locker
	if err != nil {
		return err
	}
	return lk.Release(ctx)
}
