package readme

import (
	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/strategy/single"
)

import (
	"context"
	"errors"
	"time"
)

// QuickStart is README.md's "Quick start".
func QuickStart(ctx context.Context) error {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	locker, err := single.New(goredis.New(client)) // a *lock.Locker
	if err != nil {
		return err // a nil client, for example
	}
	defer locker.Close() // at the end, before the client closes: waits for the Locker's clean-ups

	lk, err := locker.Obtain(ctx, "report:daily", 30*time.Second,
		lock.WithRetry(lock.Linear(100*time.Millisecond)), // wait while it is held: woken by the release...
	) // ...until ctx's deadline
	switch {
	case errors.Is(err, lock.ErrNotObtained):
		return nil // another worker has it
	case err != nil:
		return err // Redis down, bad argument, ...
	}
	defer lk.Release(context.WithoutCancel(ctx))

	// Work, and finish before lk.ValidUntil(): the local deadline, measured on
	// the monotonic clock from when the request was sent.
	if err := lk.Refresh(ctx, 30*time.Second); errors.Is(err, lock.ErrNotHeld) {
		return err // the lock expired or was taken: stop working
	}
	return nil
}
