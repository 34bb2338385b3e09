package readme

import (
	"context"
	"errors"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/fence"
)

// FenceSet is docs/safety.md's "Beside the data, anywhere: a fence".
func FenceSet(ctx context.Context, locker *lock.Locker, conn driver.Conn) error {
	lk, err := locker.Obtain(ctx, "orders:42", 30*time.Second, lock.WithFencing())
	if err != nil {
		return err
	}
	defer lk.Release(ctx)
	token, _ := lk.Fence()
	err = fence.Set(ctx, conn, "orders:42:status", "paid", token) // conn: the data's server, any
	if errors.Is(err, fence.ErrStale) {
		// a newer holder of orders:42 wrote the status: stop, this holder's work is stale
	}
	return err
}
