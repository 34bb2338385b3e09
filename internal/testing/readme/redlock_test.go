package readme

import (
	"context"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// Redlock is docs/strategies.md's "Redlock: surviving the loss of nodes".
func Redlock(ctx context.Context, pool3 *redigoredis.Pool) error {
	locker, err := redlock.New([]driver.Conn{
		goredis.New(redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})),
		goredis.New(redis.NewClient(&redis.Options{Addr: "10.0.0.2:6379", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})),
		redigo.New(pool3, redigo.WithAddr("10.0.0.3:6379")),
	})
	if err != nil {
		return err // an *lock.ArgumentError: a node listed twice, for example
	}
	locker = locker.With(lock.WithMaxRefreshes(10)) // as the specification asks
	lk, err := locker.Obtain(ctx, "payments:settle", 10*time.Second,
		lock.WithRetry(lock.Exponential(10*time.Millisecond, 200*time.Millisecond))) // retry after a random delay
	if err != nil {
		return err
	}
	return lk.Release(ctx)
}
