package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// inspectReadsTheLock: Inspect, by another client, finds a key free before
// Obtain; held after it, by the holder (the fingerprint of its token, and
// its metadata where the strategy takes metadata), for no longer than the
// lock's TTL; and free again after Release.
func (s suite) inspectReadsTheLock(t *testing.T, ctx context.Context) {
	key := Key(t)
	inspect := func(when string) lock.State {
		t.Helper()
		st, err := s.h.NewLocker(t).Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect %s = %v, want nil", when, err)
		}
		return st
	}
	if st := inspect("before Obtain"); st.Held || st.Fingerprint != "" {
		t.Errorf("Inspect before Obtain: Held = %v, Fingerprint = %q; want free", st.Held, st.Fingerprint)
	}

	const meta = "host=web-3 pid=4242"
	var opts []lock.Option
	_, noMetadata := s.h.Skip[MetadataRoundTrips]
	if !noMetadata {
		opts = append(opts, lock.WithMetadata(meta))
	}
	lk := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL, opts...)
	release(t, lk)
	st := inspect("of a held lock")
	if !st.Held {
		t.Errorf("Inspect of a held lock: Held = false, want true (Verdict %q)", st.Verdict)
	}
	if st.Fingerprint != strategy.Fingerprint(lk.Token()) {
		t.Errorf("Inspect of a held lock: Fingerprint = %q, want the fingerprint of the holder's token", st.Fingerprint)
	}
	if want := lk.Metadata(); st.Metadata != want {
		t.Errorf("Inspect of a held lock: Metadata = %q, want %q", st.Metadata, want)
	}
	// A strategy that judges a lock by a timestamp (Expiry) may leave its
	// key with no expiry, or a longer one; the timestamp is then the TTL.
	ttl, limit := st.TTL, longTTL+s.h.ExtraTTL
	if !st.Expiry.IsZero() {
		ttl = time.Until(st.Expiry)
	}
	if ttl <= 0 || ttl > limit {
		t.Errorf("Inspect of a lock obtained for %v: TTL = %v, Expiry in %v; want the time left in (0, %v]", longTTL, st.TTL, time.Until(st.Expiry), limit)
	}

	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	if st := inspect("after Release"); st.Held || st.Fingerprint != "" {
		t.Errorf("Inspect after Release: Held = %v, Fingerprint = %q; want free", st.Held, st.Fingerprint)
	}
}
