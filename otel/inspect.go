package lockotel

import (
	"context"

	"github.com/locksmith-go/lock"
)

// Inspect implements [lock.Locker].
func (l *locker) Inspect(ctx context.Context, key string) (lock.State, error) {
	return l.inner.Inspect(ctx, key) // TODO(issue 13): a span
}
