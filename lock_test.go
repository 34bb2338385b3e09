package lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

func TestLock(t *testing.T) {
	ctx := context.Background()

	t.Run("a nil *Lock is not held", func(t *testing.T) {
		var lk *lock.Lock
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("(*Lock)(nil).Release = %v, want an error matching ErrNotHeld", err)
		}
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("(*Lock)(nil).Refresh = %v, want an error matching ErrNotHeld", err)
		}
		if err := lk.SetMetadata(ctx, "m"); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("(*Lock)(nil).SetMetadata = %v, want an error matching ErrNotHeld", err)
		}
		if ttl, err := lk.TTL(ctx); ttl != 0 || !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("(*Lock)(nil).TTL = %v, %v, want 0 and an error matching ErrNotHeld", ttl, err)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("(*Lock)(nil).ValidUntil() = %v, want the zero time", got)
		}
		if got := lk.String(); got != "lock <nil>" {
			t.Errorf("(*Lock)(nil).String() = %q, want %q", got, "lock <nil>")
		}
		if lk.Key() != "" || lk.Token() != "" || lk.Metadata() != "" {
			t.Errorf("(*Lock)(nil) Key, Token, Metadata = %q, %q, %q; want empty", lk.Key(), lk.Token(), lk.Metadata())
		}
	})

	t.Run("Key returns the locked key", func(t *testing.T) {
		lk := obtain(t, newFake(), "orders:42")
		if lk.Key() != "orders:42" {
			t.Errorf("Key() = %q, want %q", lk.Key(), "orders:42")
		}
	})

	t.Run("TTL reports the strategy's remaining time", func(t *testing.T) {
		lk := obtain(t, newFake(), "k")
		ttl, err := lk.TTL(ctx)
		if err != nil || ttl <= 0 || ttl > time.Minute {
			t.Errorf("TTL = %v, %v, want a duration in (0, 1m] and nil", ttl, err)
		}
	})

	t.Run("strategy errors from Refresh, TTL and Release are wrapped with the operation", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.refreshErr, f.ttlErr, f.releaseErr = errBoom, errBoom, errBoom
		_, ttlErr := lk.TTL(ctx)
		for op, err := range map[string]error{
			"refresh": lk.Refresh(ctx, time.Minute),
			"ttl":     ttlErr,
			"release": lk.Release(ctx),
		} {
			if !errors.Is(err, errBoom) {
				t.Errorf("%s = %v, want an error matching errBoom", op, err)
				continue
			}
			if errors.Is(err, lock.ErrNotHeld) {
				t.Errorf("%s = %v, which matches ErrNotHeld, want it not to", op, err)
			}
			if !strings.Contains(err.Error(), op) {
				t.Errorf("%s error = %q, want it to name the operation", op, err)
			}
		}
		if got := lk.ValidUntil(); got.IsZero() {
			t.Error("ValidUntil() after transport errors is the zero time, want it kept: the lock may still be ours")
		}
	})

	t.Run("Refresh with a ttl below a millisecond is an *ArgumentError and calls no strategy", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		err := lk.Refresh(ctx, time.Microsecond)
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "ttl" {
			t.Errorf("Refresh(1µs) = %v, want an *ArgumentError named ttl", err)
		}
		if got := len(f.callsTo("refresh")); got != 0 {
			t.Errorf("Refresh(1µs) called the strategy %d times, want 0", got)
		}
	})

	t.Run("a Lock's methods are safe for concurrent use", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					_ = lk.Refresh(ctx, time.Minute)
					_, _ = lk.TTL(ctx)
					_ = lk.ValidUntil()
					_ = lk.String()
				}
			}()
		}
		wg.Add(1)
		var releaseErr error
		go func() {
			defer wg.Done()
			releaseErr = lk.Release(ctx)
		}()
		wg.Wait()
		if releaseErr != nil {
			t.Errorf("Release = %v, want nil", releaseErr)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() after Release = %v, want the zero time", got)
		}
		if got := len(f.callsTo("release")); got != 1 {
			t.Errorf("the strategy's Release was called %d times, want 1", got)
		}
	})
}

func TestLockSecrets(t *testing.T) {
	ctx := context.Background()

	t.Run("formatting a Lock never reveals the token", func(t *testing.T) {
		const metadata = "meta"
		lk := obtain(t, newFake(), "secret-test", lock.WithMetadata(metadata))
		token := lk.Token()
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%t", "%x"} {
			got := fmt.Sprintf(verb, lk)
			if strings.Contains(got, token) {
				t.Errorf("fmt.Sprintf(%q, lock) = %q, want no token", verb, got)
			}
			if !strings.Contains(got, "secret-test") {
				t.Errorf("fmt.Sprintf(%q, lock) = %q, want the key", verb, got)
			}
		}
		for _, verb := range []string{"%v", "%+v", "%#v"} {
			holder := struct{ Lock *lock.Lock }{lk}
			if got := fmt.Sprintf(verb, holder); strings.Contains(got, token) {
				t.Errorf("fmt.Sprintf(%q, struct holding the lock) = %q, want no token", verb, got)
			}
		}
	})

	t.Run("logging a Lock with slog records the key and never the token", func(t *testing.T) {
		lk := obtain(t, newFake(), "secret-test")
		for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
			"JSON": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
			"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		} {
			var buf bytes.Buffer
			slog.New(newHandler(&buf)).Info("obtained", "lock", lk, slog.Any("again", lk))
			got := buf.String()
			if strings.Contains(got, lk.Token()) {
				t.Errorf("slog %s handler logged %q, want no token", name, got)
			}
			if !strings.Contains(got, "secret-test") {
				t.Errorf("slog %s handler logged %q, want the key", name, got)
			}
		}
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("obtained", "lock", lk)
		if want := `"lock":{"key":"secret-test"}`; !strings.Contains(buf.String(), want) {
			t.Errorf("slog JSON handler logged %q, want it to contain %s", buf.String(), want)
		}
	})

	t.Run("errors never reveal the token", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.refreshErr, f.ttlErr, f.releaseErr = errBoom, errBoom, errBoom
		_, ttlErr := lk.TTL(ctx)
		for _, err := range []error{lk.Refresh(ctx, time.Minute), ttlErr, lk.Release(ctx)} {
			if err == nil || strings.Contains(err.Error(), lk.Token()) {
				t.Errorf("error = %v, want a non-nil error without the token", err)
			}
		}
	})
}

func TestLockRelease(t *testing.T) {
	ctx := context.Background()

	t.Run("Release frees the key and zeroes ValidUntil", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() after Release = %v, want the zero time", got)
		}
		if _, err := lock.New(f).Obtain(ctx, "k", time.Minute); err != nil {
			t.Errorf("Obtain after Release = %v, want a lock", err)
		}
	})

	t.Run("Refresh of a released lock returns ErrNotHeld without calling the strategy", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Refresh after Release = %v, want an error matching ErrNotHeld", err)
		}
		if got := len(f.callsTo("refresh")); got != 0 {
			t.Errorf("Refresh after Release called the strategy %d times, want 0", got)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() after Refresh of a released lock = %v, want the zero time", got)
		}
	})

	t.Run("Release and TTL of a released lock return ErrNotHeld without calling the strategy", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("second Release = %v, want an error matching ErrNotHeld", err)
		}
		if _, err := lk.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("TTL after Release = %v, want an error matching ErrNotHeld", err)
		}
		if got := len(f.callsTo("release")); got != 1 {
			t.Errorf("the strategy's Release was called %d times, want 1", got)
		}
		if got := len(f.callsTo("ttl")); got != 0 {
			t.Errorf("the strategy's TTL was called %d times, want 0", got)
		}
	})
}

func TestLockNotHeld(t *testing.T) {
	ctx := context.Background()

	t.Run("a lock whose key is gone reports ErrExpired and zeroes ValidUntil", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.drop("k")
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Refresh of an expired lock = %v, want an error matching ErrExpired", err)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() after Refresh found the lock gone = %v, want the zero time", got)
		}
		if _, err := lk.TTL(ctx); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("TTL of an expired lock = %v, want an error matching ErrExpired", err)
		}
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Release of an expired lock = %v, want an error matching ErrExpired", err)
		}
	})

	t.Run("a lock taken by another owner reports ErrTaken and deletes nothing", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.hold("k", "another owner")
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrTaken) || !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Release of a taken lock = %v, want an error matching ErrTaken and ErrNotHeld", err)
		}
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Refresh of a taken lock = %v, want an error matching ErrTaken", err)
		}
		if got := lk.ValidUntil(); !got.IsZero() {
			t.Errorf("ValidUntil() of a taken lock = %v, want the zero time", got)
		}
		if _, err := lock.New(f).Obtain(ctx, "k", time.Minute); !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain after the other owner took the key = %v, want ErrNotObtained: its lock must survive", err)
		}
	})
}

func TestGrant(t *testing.T) {
	t.Run("Grant.Value replaces the value used by later Refresh, TTL and Release", func(t *testing.T) {
		f := newFake()
		f.grant = strategy.Grant{Value: "1700000000123"}
		lk := obtain(t, f, "k")
		ctx := context.Background()
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		if _, err := lk.TTL(ctx); err != nil {
			t.Fatalf("TTL = %v, want nil", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		for _, op := range []string{"refresh", "ttl", "release"} {
			if got, want := values(f.callsTo(op)), []string{"1700000000123"}; !equal(got, want) {
				t.Errorf("%s values = %q, want %q (the granted value)", op, got, want)
			}
		}
		if got := values(f.callsTo("acquire")); len(got) != 1 || len(got[0]) != 22 {
			t.Errorf("Acquire values = %q, want one random 22-character token", got)
		}
		if got := lk.Token(); got != "1700000000123" {
			t.Errorf("Token() = %q, want the granted value %q", got, "1700000000123")
		}
	})

	t.Run("Grant.Value from Refresh replaces the value used by later calls", func(t *testing.T) {
		f := newFake()
		lk := obtain(t, f, "k")
		f.refreshGrant = strategy.Grant{Value: "refreshed-value"}
		ctx := context.Background()
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release = %v, want nil", err)
		}
		if got, want := values(f.callsTo("release")), []string{"refreshed-value"}; !equal(got, want) {
			t.Errorf("Release values = %q, want %q", got, want)
		}
	})

	t.Run("ValidUntil is the request time plus ttl less the grant's drift", func(t *testing.T) {
		const ttl, drift = time.Minute, 3 * time.Second
		f := newFake()
		f.grant = strategy.Grant{Drift: drift}
		before := time.Now()
		lk, err := lock.New(f).Obtain(context.Background(), "k", ttl)
		after := time.Now()
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		got := lk.ValidUntil()
		if latest := after.Add(ttl - drift); got.After(latest) {
			t.Errorf("ValidUntil() = %v, want at most %v (time after Obtain + ttl - drift)", got, latest)
		}
		if earliest := before.Add(ttl - drift); got.Before(earliest) {
			t.Errorf("ValidUntil() = %v, want at least %v (time before Obtain + ttl - drift)", got, earliest)
		}
	})

	t.Run("ValidUntil moves with Refresh and its drift", func(t *testing.T) {
		const ttl, drift = 2 * time.Hour, 5 * time.Second
		f := newFake()
		lk := obtain(t, f, "k")
		f.refreshGrant = strategy.Grant{Drift: drift}
		before := time.Now()
		if err := lk.Refresh(context.Background(), ttl); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		after := time.Now()
		got := lk.ValidUntil()
		if latest := after.Add(ttl - drift); got.After(latest) {
			t.Errorf("ValidUntil() after Refresh = %v, want at most %v", got, latest)
		}
		if earliest := before.Add(ttl - drift); got.Before(earliest) {
			t.Errorf("ValidUntil() after Refresh = %v, want at least %v", got, earliest)
		}
	})
}

func TestFencing(t *testing.T) {
	ctx := context.Background()

	t.Run("Fence reports the strategy's token, with WithFencing only", func(t *testing.T) {
		f := newFake()
		f.grant.Fence = 7
		lk := obtain(t, f, "k", lock.WithFencing())
		if n, ok := lk.Fence(); n != 7 || !ok {
			t.Errorf("Fence() = %d, %v; want 7, true", n, ok)
		}
		plain := obtain(t, f, "k2")
		if n, ok := plain.Fence(); n != 0 || ok {
			t.Errorf("Fence() without WithFencing = %d, %v; want 0, false", n, ok)
		}
	})

	t.Run("a strategy that issues no token is refused, and its key cleaned up", func(t *testing.T) {
		f := newFake()
		_, err := lock.New(f).Obtain(ctx, "k", time.Minute, lock.WithFencing())
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "fencing" {
			t.Fatalf("Obtain WithFencing = %v, want an *ArgumentError named fencing", err)
		}
		if got := len(f.callsTo("release")); got != 2 {
			t.Errorf("clean-up deletes = %d, want 2 (until the server answered twice)", got)
		}
		if _, err := lock.New(f).Obtain(ctx, "k", time.Minute); err != nil {
			t.Errorf("Obtain after the refusal = %v, want a lock", err)
		}
	})
}

// lostRefresh is a fakeStrategy that replaces the value on refresh, and
// whose next Refresh, once lose is set, loses its reply: after its write
// when landed is set, before it otherwise. Either way it reports the value
// it tried to write, as Strategy asks.
type lostRefresh struct {
	*fakeStrategy
	lose, landed bool
}

func (s *lostRefresh) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	if !s.lose {
		return s.fakeStrategy.Refresh(ctx, key, value, ttl)
	}
	s.lose = false
	if s.landed {
		if _, err := s.fakeStrategy.Refresh(ctx, key, value, ttl); err != nil {
			return strategy.Grant{}, err
		}
	}
	return s.refreshGrant, context.DeadlineExceeded
}

// stored returns the value key holds, or "" when it is gone.
func (f *fakeStrategy) stored(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.entries[key].value
}

// TestLostRefreshReply: a refresh that may have replaced the value without
// an answer leaves the lock usable under whichever value the key holds, and
// never under another owner's.
func TestLostRefreshReply(t *testing.T) {
	ctx := context.Background()
	// setup obtains "k" and runs a refresh whose reply is lost; it returns
	// the lock, the value it was obtained under, and the strategy.
	setup := func(t *testing.T, landed bool) (*lock.Lock, string, *lostRefresh) {
		t.Helper()
		s := &lostRefresh{fakeStrategy: newFake(), landed: landed}
		s.refreshGrant = strategy.Grant{Value: "next"}
		lk, err := lock.New(s).Obtain(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		first := lk.Token()
		s.lose = true
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Refresh with its reply lost = %v, want context.DeadlineExceeded", err)
		}
		return lk, first, s
	}

	t.Run("a later Refresh finds the value it wrote", func(t *testing.T) {
		lk, first, s := setup(t, true)
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		if got, want := values(s.callsTo("refresh")), []string{first, first, "next"}; !equal(got, want) {
			t.Errorf("refreshes sent with %q, want %q", got, want)
		}
		if lk.Token() != "next" {
			t.Errorf("Token is the value the lost refresh wrote = false, want true")
		}
		if err := lk.Release(ctx); err != nil || s.stored("k") != "" {
			t.Errorf("Release = %v, key left = %t; want nil, false", err, s.stored("k") != "")
		}
	})

	t.Run("a second lost reply does not forget the first's value", func(t *testing.T) {
		lk, first, s := setup(t, true) // the key holds "next"
		s.lose, s.landed, s.refreshGrant = true, false, strategy.Grant{Value: "next-2"}
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second Refresh with its reply lost = %v, want context.DeadlineExceeded", err)
		}
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh = %v, want nil", err)
		}
		if got, want := values(s.callsTo("refresh")), []string{first, first, "next-2", "next"}; !equal(got, want) {
			// The second refresh, lost before the strategy, is not counted.
			t.Errorf("refreshes sent with %q, want %q", got, want)
		}
	})

	t.Run("Release deletes the value it wrote", func(t *testing.T) {
		lk, _, s := setup(t, true)
		if err := lk.Release(ctx); err != nil || s.stored("k") != "" {
			t.Errorf("Release = %v, key left = %t; want nil, false", err, s.stored("k") != "")
		}
	})

	t.Run("TTL finds the value it wrote", func(t *testing.T) {
		lk, _, _ := setup(t, true)
		if _, err := lk.TTL(ctx); err != nil {
			t.Errorf("TTL = %v, want nil", err)
		}
	})

	t.Run("an answer with the held value settles it", func(t *testing.T) {
		lk, first, s := setup(t, false)
		if _, err := lk.TTL(ctx); err != nil {
			t.Fatalf("TTL = %v, want nil", err)
		}
		s.hold("k", "next") // another owner, after ours expired, with the same value
		if err := lk.Release(ctx); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Release = %v, want ErrTaken", err)
		}
		if got, want := values(s.callsTo("release")), []string{first}; !equal(got, want) {
			t.Errorf("releases sent with %q, want %q", got, want)
		}
		if s.stored("k") != "next" {
			t.Errorf("the other owner's key was deleted")
		}
	})

	t.Run("another owner's value is not adopted", func(t *testing.T) {
		lk, _, s := setup(t, false)
		s.hold("k", "other")
		if err := lk.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Refresh = %v, want ErrTaken", err)
		}
		if err := lk.Err(); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Err = %v, want ErrTaken", err)
		}
		if s.stored("k") != "other" {
			t.Errorf("the other owner's key = %q, want %q", s.stored("k"), "other")
		}
	})
}
