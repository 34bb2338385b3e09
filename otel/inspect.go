package lockotel

import (
	"context"

	"github.com/locksmith-go/lock"
)

// Inspect implements [lock.Locker]: a span lock.inspect, with the attributes
// of the other spans, and for Redlock each node's answer as a lock.node
// event (see the package doc). The span records the read, not what it
// found: no holder's fingerprint or metadata, which identify holders that
// no other span names, and which the caller has in the lock.State.
func (l *locker) Inspect(ctx context.Context, key string, opts ...lock.Option) (lock.State, error) {
	return l.inner.Inspect(ctx, key, l.with(opts)...)
}

// Break implements [lock.Locker]: a span lock.break, with the attributes of
// lock.inspect.
func (l *locker) Break(ctx context.Context, key, fingerprint string, opts ...lock.Option) (lock.State, error) {
	return l.inner.Break(ctx, key, fingerprint, l.with(opts)...)
}
