package bsminterop_test

import (
	"testing"

	"github.com/bsm/redislock"

	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// TestInspectReadsBsmLocks: a lock that bsm/redislock holds reads back as
// ours do, its metadata included: the stored value keeps bsm's layout.
func TestInspectReadsBsmLocks(t *testing.T) {
	addr := redistest.Start(t, 1)[0].Addr
	for _, d := range redistest.InteropDrivers() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := interopContext(t)
			p := newInteropPeers(t, d, addr)
			key := conformance.Key(t)
			const meta = "host=bsm;pid=2"
			bl := obtainBsm(t, ctx, p, key, interopLongTTL, &redislock.Options{Metadata: meta})
			st, err := p.ours.Inspect(ctx, key)
			if err != nil || !st.Held || st.Metadata != meta {
				t.Fatalf("Inspect of bsm's lock = Held %v, Metadata %q, %v; want held, %q", st.Held, st.Metadata, err, meta)
			}
			if st.Fingerprint != strategy.Fingerprint(bl.Token()) {
				t.Errorf("Fingerprint = %q, want that of bsm's token", st.Fingerprint)
			}
		})
	}
}
