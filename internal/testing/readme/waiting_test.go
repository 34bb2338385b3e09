package readme

import (
	"context"
	"time"

	"github.com/locksmith-go/lock"
)

// Waiting is docs/waiting.md's first fragment.
func Waiting(ctx context.Context, locker *lock.Locker) (*lock.Lock, error) {
	lk, err := locker.Obtain(ctx, "report:daily", 30*time.Second,
		lock.WithRetry(lock.Linear(100*time.Millisecond)), // the safety net: at most 100ms late per lost message
	)
	return lk, err
}
