package readme

import (
	"context"
	"time"

	"github.com/locksmith-go/lock"
)

// PartnerAPI is docs/semaphores.md's first fragment.
func PartnerAPI(ctx context.Context, locker *lock.Locker) error {
	lk, err := locker.Obtain(ctx, "partner-api", 30*time.Second, lock.WithPermits(3),
		lock.WithRetry(lock.Linear(time.Second)))
	if err != nil {
		return err // lock.ErrNotObtained: three others hold the permits; lock.ErrMismatch: see below
	}
	defer lk.Release(ctx)
	permit, _ := lk.Permit() // 0, 1 or 2: the lowest that was free
	return callPartner(ctx, permit)
}

func callPartner(ctx context.Context, _ int) error { return ctx.Err() }
