package single

import (
	"context"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

// Inspect implements [strategy.Strategy]. It reads, in one script, the
// key's value, its TTL and the fencing counter at [FenceKey] (none for a
// key that FenceKey refuses, or that the user's ACL does not allow: a user
// that never fences need not be allowed the counters), and sets Held, TTL,
// Fingerprint, Metadata, Fence and Verdict ("free" or "held"). A key of
// another type gives the server's WRONGTYPE error.
func (s *Strategy) Inspect(ctx context.Context, key string) (strategy.State, error) {
	fenceKey, _ := FenceKey(key) // "" when refused: no counter can exist
	r, err := cas.Inspect(ctx, s.conn, key, fenceKey)
	if err != nil {
		return strategy.State{}, err
	}
	st := strategy.State{Held: r.Exists, TTL: r.TTL, Fence: r.Fence, Verdict: "free"}
	if r.Exists {
		st.Fingerprint, st.Metadata = r.Holder()
		st.Verdict = "held"
	}
	return st, nil
}
