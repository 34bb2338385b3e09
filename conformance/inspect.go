package conformance

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

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
	_, noMetadata := s.h.Skip["MetadataRoundTrips"]
	if !noMetadata {
		opts = append(opts, lock.WithMetadata(meta))
	}
	before := time.Now()
	lk := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL, opts...)
	st := inspect("of a held lock")
	// The stamp counts in whole milliseconds, so it may count one more.
	if held := time.Since(before) + time.Millisecond; !noMetadata && (st.HeldFor <= 0 || st.HeldFor > held) {
		t.Errorf("Inspect of a held lock: HeldFor = %v, want the time since the Obtain, in (0, %v]", st.HeldFor, held)
	}
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

func (s suite) breakIsGuarded(t *testing.T, ctx context.Context) {
	key := Key(t)
	other := s.h.NewLocker(t)
	if _, err := other.Break(ctx, key, ""); errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the strategy cannot break locks: %v", err)
	} else if !errors.Is(err, lock.ErrExpired) {
		t.Fatalf("Break of a free lock = %v, want ErrExpired", err)
	}

	lk := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL)
	const stale = "0123456789abcdef"
	if _, err := other.Break(ctx, key, stale); !errors.Is(err, lock.ErrTaken) {
		t.Errorf("Break with another holder's fingerprint = %v, want ErrTaken", err)
	}
	if _, err := lk.TTL(ctx); err != nil {
		t.Fatalf("TTL after a Break with another holder's fingerprint = %v, want nil: the lock must stay", err)
	}

	fp := strategy.Fingerprint(lk.Token())
	st, err := other.Break(ctx, key, fp)
	if err != nil {
		t.Fatalf("Break with the holder's fingerprint = %v, want nil", err)
	}
	if !st.Held || st.Fingerprint != fp {
		t.Errorf("Break's State: Held = %v, Fingerprint = %q; want the holder's, %q", st.Held, st.Fingerprint, fp)
	}
	if err := lk.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("the broken holder's Release = %v, want ErrNotHeld", err)
	}

	next := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL)
	if _, err := other.Break(ctx, key, ""); err != nil {
		t.Fatalf("forced Break = %v, want nil", err)
	}
	if err := next.Refresh(ctx, longTTL); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("the broken holder's Refresh after a forced Break = %v, want ErrNotHeld", err)
	}
}

// holderTrace is the trace context that waiterNamesTheHolder's holder
// stores with its lock, through its hooks.
const holderTrace = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"

func (s suite) waiterNamesTheHolder(t *testing.T, ctx context.Context) {
	key := Key(t)
	const meta = "host=web-3 pid=4242"
	opts := []lock.Option{lock.WithHooks(&lock.Hooks{Trace: func(context.Context) string { return holderTrace }})}
	_, noMetadata := s.h.Skip["MetadataRoundTrips"]
	if !noMetadata {
		opts = append(opts, lock.WithMetadata(meta))
	}
	lk := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL, opts...)
	_, err := s.h.NewLocker(t).Obtain(ctx, key, longTTL, lock.WithRetry(lock.NoRetry()))
	var held *lock.NotObtainedError
	if !errors.As(err, &held) || !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Obtain of a held lock = %v, want a *lock.NotObtainedError matching ErrNotObtained", err)
	}
	h := held.Holder
	if held.Key != key || len(held.Keys) != 1 || held.Keys[0] != key {
		t.Errorf("NotObtainedError's Key, Keys = %q, %q; want %q, [%q]", held.Key, held.Keys, key, key)
	}
	if !h.Held || h.Fingerprint != strategy.Fingerprint(lk.Token()) {
		t.Errorf("NotObtainedError's Holder: Held = %v, Fingerprint = %q; want true, the holder's %q", h.Held, h.Fingerprint, strategy.Fingerprint(lk.Token()))
	}
	if !strings.Contains(err.Error(), strconv.Quote(key)) {
		t.Errorf("error %q does not name the key %q", err, key)
	}
	if noMetadata {
		return
	}
	// The Locker's own hooks (a wrapper's, such as the otel package's) may
	// store their trace before the hook of this Obtain: the waiter reads
	// whichever Inspect reads.
	st, ierr := s.h.NewLocker(t).Inspect(ctx, key)
	if ierr != nil {
		t.Fatalf("Inspect = %v, want nil", ierr)
	}
	if h.Metadata != meta || h.HeldFor <= 0 || h.Trace == "" || h.Trace != st.Trace {
		t.Errorf("NotObtainedError's Holder: Metadata = %q, HeldFor = %v, Trace = %q; want %q, positive, Inspect's %q", h.Metadata, h.HeldFor, h.Trace, meta, st.Trace)
	}
	if !strings.Contains(err.Error(), "held by "+meta+" for ") {
		t.Errorf("error %q does not name the holder by its metadata and hold", err)
	}
}
