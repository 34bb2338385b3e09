package single

import (
	"context"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

// Inspect implements [strategy.Strategy]. It reads, in one script, the
// key's value, its TTL, the fencing counter at [FenceKey] (none for a key
// that FenceKey refuses, or that the user's ACL does not allow: a user that
// never fences need not be allowed the counters) and the length of the
// wait queue, and sets Held, TTL, Fingerprint, Metadata, Fence, Waiters and
// Verdict ("free" or "held"). A key of another type gives the server's
// WRONGTYPE error.
func (s *Strategy) Inspect(ctx context.Context, key string) (strategy.State, error) {
	st, _, err := s.inspect(ctx, key)
	return st, err
}

// Break implements [strategy.Breaker]: it reads the lock as Inspect does,
// and releases the value it read as Release does, waking the head of the
// queue.
func (s *Strategy) Break(ctx context.Context, key, fingerprint string) (strategy.State, error) {
	read := func(ctx context.Context) (strategy.State, cas.Reading, error) { return s.inspect(ctx, key) }
	return cas.Break(ctx, fingerprint, read, func(ctx context.Context, value string) error {
		return s.Release(ctx, key, value)
	})
}

func (s *Strategy) inspect(ctx context.Context, key string) (strategy.State, cas.Reading, error) {
	fenceKey, _ := FenceKey(key) // "" when refused: no counter can exist
	var queueKey string
	if q, ok := s.queue(key); ok {
		queueKey = q.Q
	}
	r, err := s.srv.Inspect(ctx, key, fenceKey, queueKey)
	if err != nil {
		return strategy.State{}, r, err
	}
	st := strategy.State{Held: r.Exists, TTL: r.TTL, Fence: r.Fence, Waiters: r.Queued, Verdict: "free"}
	if r.Exists {
		st.Fingerprint, st.Metadata = r.Holder()
		st.Verdict = "held"
	}
	return st, r, nil
}
