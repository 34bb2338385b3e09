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
	s.wantBroken(t, "the broken holder's Release", lk.Release(ctx))

	next := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL)
	if _, err := other.Break(ctx, key, ""); err != nil {
		t.Fatalf("forced Break = %v, want nil", err)
	}
	_, err = next.TTL(ctx)
	s.wantBroken(t, "the broken holder's TTL after a forced Break", err)
	s.wantBroken(t, "the broken holder's Refresh after a forced Break", next.Refresh(ctx, longTTL))

	t.Run("auto-refresh reports the break", func(t *testing.T) {
		lk := s.obtain(t, ctx, s.h.NewLocker(t), key, holdTTL)
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatalf("StartRefresh = %v, want nil", err)
		}
		if _, err := other.Break(ctx, key, strategy.Fingerprint(lk.Token())); err != nil {
			t.Fatalf("Break = %v, want nil", err)
		}
		select {
		case <-lk.Done():
		case <-time.After(lossBound):
			t.Fatalf("Done not closed %v after the Break, want within %v", lossBound, lossBound)
		}
		if err := lk.Err(); errors.Is(err, lock.ErrLapsed) {
			t.Skipf("Err() after the Break = %v: the machine stalled, and no refresh came back before the lock lapsed", err)
		}
		s.wantBroken(t, "Err() after the Break", lk.Err())
	})
	t.Run("a key deleted otherwise is not reported broken", func(t *testing.T) {
		if s.h.Conns == nil {
			t.Skip("the harness gives no Conns, to delete the key behind the holder's back")
		}
		lk := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL)
		if _, err := other.Break(ctx, key, ""); err != nil {
			t.Fatalf("Break = %v, want nil", err)
		}
		next := s.obtain(t, ctx, s.h.NewLocker(t), key, longTTL)
		loseBehindTheBack(t, ctx, s.h.Conns(t), key, behindTheBack[0].act)
		if err := next.Release(ctx); !errors.Is(err, lock.ErrExpired) || errors.Is(err, lock.ErrBroken) {
			t.Errorf("Release of a lock whose key was deleted behind its back, after a Break of another holder = %v, want ErrExpired, not ErrBroken", err)
		}
		s.wantBroken(t, "the broken holder's Release after its key held another", lk.Release(ctx))
	})
}

// wantBroken fails t unless err, what the broken holder's call returned,
// matches ErrBroken (and so ErrExpired); or, for a strategy whose values
// are not unique to a holder (Harness.Skip has TokensAreUnique), whose
// Break leaves no mark, ErrExpired and not ErrBroken.
func (s suite) wantBroken(t *testing.T, what string, err error) {
	t.Helper()
	if _, shared := s.h.Skip["TokensAreUnique"]; shared {
		if !errors.Is(err, lock.ErrExpired) || errors.Is(err, lock.ErrBroken) {
			t.Errorf("%s = %v, want ErrExpired, and not ErrBroken: the values are not unique to a holder", what, err)
		}
		return
	}
	if !errors.Is(err, lock.ErrBroken) || !errors.Is(err, lock.ErrExpired) {
		t.Errorf("%s = %v, want ErrBroken, which matches ErrExpired", what, err)
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
