package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// obtainMany obtains keys on f for a minute, failing the test on error.
func obtainMany(t *testing.T, f *fakeStrategy, keys []string, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := lock.New(f).ObtainMany(context.Background(), keys, time.Minute, opts...)
	if err != nil {
		t.Fatalf("ObtainMany(%q) = %v, want a lock", keys, err)
	}
	return lk
}

// keysOf returns the keys of calls.
func keysOf(calls []fakeCall) []string {
	ks := make([]string, len(calls))
	for i, c := range calls {
		ks[i] = c.key
	}
	return ks
}

// TestObtainManyKeys: the strategy sees the keys sorted and without
// duplicates, and the lock names them in that order.
func TestObtainManyKeys(t *testing.T) {
	t.Run("the strategy sees the keys sorted, without duplicates", func(t *testing.T) {
		f := newFake()
		lk := obtainMany(t, f, []string{"c", "a", "b", "a"})
		if got, want := keysOf(f.callsTo("acquireKeys")), []string{"a,b,c"}; !equal(got, want) {
			t.Errorf("AcquireKeys calls' keys = %q, want %q", got, want)
		}
		if got, want := lk.Keys(), []string{"a", "b", "c"}; !equal(got, want) {
			t.Errorf("Keys() = %q, want %q", got, want)
		}
		if got := lk.Key(); got != "a" {
			t.Errorf("Key() = %q, want %q (the first in order)", got, "a")
		}
	})
	t.Run("the caller's slice is left as it was", func(t *testing.T) {
		keys := []string{"c", "a", "c"}
		obtainMany(t, newFake(), keys)
		if want := []string{"c", "a", "c"}; !equal(keys, want) {
			t.Errorf("keys after ObtainMany = %q, want %q", keys, want)
		}
	})
	t.Run("Keys returns a copy", func(t *testing.T) {
		lk := obtainMany(t, newFake(), []string{"a", "b"})
		lk.Keys()[0] = "changed"
		if got := lk.Keys()[0]; got != "a" {
			t.Errorf("Keys()[0] after changing a copy = %q, want %q", got, "a")
		}
	})
	t.Run("one key, once duplicates are removed, is an Obtain of it", func(t *testing.T) {
		f := newFake()
		lk := obtainMany(t, f, []string{"k", "k"})
		if got := len(f.callsTo("acquireKeys")); got != 0 {
			t.Errorf("AcquireKeys calls = %d, want 0", got)
		}
		if got, want := keysOf(f.callsTo("acquire")), []string{"k"}; !equal(got, want) {
			t.Errorf("Acquire calls' keys = %q, want %q", got, want)
		}
		if got, want := lk.Keys(), []string{"k"}; !equal(got, want) {
			t.Errorf("Keys() = %q, want %q", got, want)
		}
	})
	t.Run("Keys of a lock of one key names it", func(t *testing.T) {
		if got, want := obtain(t, newFake(), "k").Keys(), []string{"k"}; !equal(got, want) {
			t.Errorf("Keys() = %q, want %q", got, want)
		}
	})
	t.Run("Keys of a nil lock is nil", func(t *testing.T) {
		var lk *lock.Lock
		if got := lk.Keys(); got != nil {
			t.Errorf("Keys() of a nil *Lock = %q, want nil", got)
		}
	})
}

// TestObtainManyInvalidKeys: an empty list, an empty key and more than
// MaxKeys keys are each an *ArgumentError named "keys", and nothing is
// sent.
func TestObtainManyInvalidKeys(t *testing.T) {
	tooMany := make([]string, lock.MaxKeys+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("k", i)
	}
	for _, c := range []struct {
		name   string
		keys   []string
		reason string
	}{
		{"nil", nil, "must not be empty"},
		{"empty", []string{}, "must not be empty"},
		{"an empty key", []string{"a", "", "b"}, "key 2 of 3 is empty"},
		{"more than MaxKeys", tooMany, fmt.Sprintf("must number at most %d (MaxKeys), got %d", lock.MaxKeys, lock.MaxKeys+1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			_, err := lock.New(f).ObtainMany(context.Background(), c.keys, time.Minute)
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "keys" {
				t.Fatalf("ObtainMany = %v, want an *ArgumentError named keys", err)
			}
			if ae.Reason != c.reason {
				t.Errorf("Reason = %q, want %q", ae.Reason, c.reason)
			}
			if got := len(f.callsTo("acquireKeys")) + len(f.callsTo("acquire")); got != 0 {
				t.Errorf("attempts = %d, want 0: nothing is sent", got)
			}
		})
	}
	t.Run("MaxKeys keys are accepted", func(t *testing.T) {
		if lk := obtainMany(t, newFake(), tooMany[:lock.MaxKeys]); len(lk.Keys()) != lock.MaxKeys {
			t.Errorf("len(Keys()) = %d, want %d", len(lk.Keys()), lock.MaxKeys)
		}
	})
	t.Run("a nil ctx", func(t *testing.T) {
		var ctx context.Context // nil
		_, err := lock.New(newFake()).ObtainMany(ctx, []string{"a", "b"}, time.Minute)
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "ctx" {
			t.Errorf("ObtainMany(nil ctx) = %v, want an *ArgumentError named ctx", err)
		}
	})
	t.Run("a bad TTL", func(t *testing.T) {
		_, err := lock.New(newFake()).ObtainMany(context.Background(), []string{"a", "b"}, 0)
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "ttl" {
			t.Errorf("ObtainMany(ttl 0) = %v, want an *ArgumentError named ttl", err)
		}
	})
}

// oneKeyOnly is a strategy that is no strategy.Multi.
type oneKeyOnly struct{ strategy.Strategy }

func (oneKeyOnly) String() string { return "one-key-only" }

// TestObtainManyUnsupported: a strategy that is no strategy.Multi gives an
// *ArgumentError named "keys" that says so, for two keys or more; one key
// is an Obtain.
func TestObtainManyUnsupported(t *testing.T) {
	f := newFake()
	l := lock.New(oneKeyOnly{f})
	_, err := l.ObtainMany(context.Background(), []string{"a", "b"}, time.Minute)
	var ae *lock.ArgumentError
	if !errors.As(err, &ae) || ae.Name != "keys" {
		t.Fatalf("ObtainMany of two keys = %v, want an *ArgumentError named keys", err)
	}
	if want := "several keys as one lock are not supported by one-key-only"; ae.Reason != want {
		t.Errorf("Reason = %q, want %q", ae.Reason, want)
	}
	if got := len(f.calls); got != 0 {
		t.Errorf("calls to the strategy = %d, want 0", got)
	}
	if _, err := l.ObtainMany(context.Background(), []string{"a", "a"}, time.Minute); err != nil {
		t.Errorf("ObtainMany of one key = %v, want a lock", err)
	}
}

// TestMultiKeyLockOperations: the lock's TTL, Refresh and Release call the
// strategy's Multi methods with every key and the lock's value.
func TestMultiKeyLockOperations(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	lk := obtainMany(t, f, []string{"b", "a"})
	if _, err := lk.TTL(ctx); err != nil {
		t.Fatalf("TTL = %v, want nil", err)
	}
	if err := lk.Refresh(ctx, time.Hour); err != nil {
		t.Fatalf("Refresh = %v, want nil", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	for _, op := range []string{"ttlKeys", "refreshKeys", "releaseKeys"} {
		calls := f.callsTo(op)
		if got, want := keysOf(calls), []string{"a,b"}; !equal(got, want) {
			t.Errorf("%s calls' keys = %q, want %q", op, got, want)
		}
		if got, want := values(calls), []string{lk.Token()}; !equal(got, want) {
			t.Errorf("%s calls' values differ from the lock's token", op)
		}
	}
	for _, op := range []string{"ttl", "refresh", "release"} {
		if got := len(f.callsTo(op)); got != 0 {
			t.Errorf("%s calls = %d, want 0", op, got)
		}
	}
}

// TestMultiKeyErrors: errors about one key reach the caller as a
// *KeyError that names it, matching what was found there.
func TestMultiKeyErrors(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, what string, err, want error, key string) {
		t.Helper()
		var ke *lock.KeyError
		if !errors.Is(err, want) || !errors.As(err, &ke) || ke.Key != key {
			t.Errorf("%s = %v, want %v in a *KeyError naming %q", what, err, want, key)
		}
	}
	t.Run("Obtain finds a key held", func(t *testing.T) {
		f := newFake()
		f.hold("b", "another")
		_, err := lock.New(f).ObtainMany(ctx, []string{"a", "b", "c"}, time.Minute)
		check(t, "ObtainMany", err, lock.ErrNotObtained, "b")
		if got := len(f.callsTo("releaseKeys")); got != 0 {
			t.Errorf("ReleaseKeys calls = %d, want 0: an attempt that found a key held wrote nothing", got)
		}
	})
	t.Run("Refresh finds a key gone", func(t *testing.T) {
		f := newFake()
		lk := obtainMany(t, f, []string{"a", "b"})
		f.drop("b")
		check(t, "Refresh", lk.Refresh(ctx, time.Minute), lock.ErrExpired, "b")
	})
	t.Run("Release finds a key taken", func(t *testing.T) {
		f := newFake()
		lk := obtainMany(t, f, []string{"a", "b"})
		f.hold("a", "another")
		check(t, "Release", lk.Release(ctx), lock.ErrTaken, "a")
	})
	t.Run("the lock's end names the key", func(t *testing.T) {
		f := newFake()
		lk := obtainMany(t, f, []string{"a", "b"})
		f.drop("a")
		_ = lk.Refresh(ctx, time.Minute)
		<-lk.Done()
		check(t, "Err()", lk.Err(), lock.ErrExpired, "a")
	})
}

// TestObtainManyCleansUp: an attempt that got no answer may have written
// every key: the Locker deletes them with ReleaseKeys, with the attempt's
// value, until the server has answered twice (strategy.CleanUp).
func TestObtainManyCleansUp(t *testing.T) {
	f := newFake()
	f.acquireErr = errBoom
	_, err := lock.New(f).ObtainMany(context.Background(), []string{"b", "a"}, time.Minute)
	if !errors.Is(err, errBoom) {
		t.Fatalf("ObtainMany = %v, want the strategy's error", err)
	}
	acquired, released := f.callsTo("acquireKeys"), f.callsTo("releaseKeys")
	if got, want := keysOf(released), []string{"a,b", "a,b"}; !equal(got, want) {
		t.Fatalf("ReleaseKeys calls' keys = %q, want %q", got, want)
	}
	for _, r := range released {
		if r.value != acquired[0].value {
			t.Errorf("ReleaseKeys' value differs from the attempt's")
		}
	}
	if got := len(f.callsTo("release")); got != 0 {
		t.Errorf("Release calls = %d, want 0", got)
	}
}

// TestMultiKeyFencing: with WithFencing, each key has its own fencing
// token, in the order of the keys; a strategy that issued none is refused,
// and what it wrote deleted.
func TestMultiKeyFencing(t *testing.T) {
	t.Run("FenceOf gives each key's token", func(t *testing.T) {
		f := newFake()
		f.grant.Fences = []int64{7, 8, 9}
		lk := obtainMany(t, f, []string{"c", "a", "b"}, lock.WithFencing())
		for key, want := range map[string]int64{"a": 7, "b": 8, "c": 9} {
			if n, ok := lk.FenceOf(key); n != want || !ok {
				t.Errorf("FenceOf(%q) = %d, %v; want %d, true", key, n, ok, want)
			}
		}
		if n, ok := lk.FenceOf("z"); n != 0 || ok {
			t.Errorf("FenceOf of another key = %d, %v; want 0, false", n, ok)
		}
		if n, ok := lk.Fence(); n != 7 || !ok {
			t.Errorf("Fence() = %d, %v; want the first key's, 7, true", n, ok)
		}
	})
	t.Run("without WithFencing there is none", func(t *testing.T) {
		f := newFake()
		f.grant.Fences = []int64{7, 8}
		lk := obtainMany(t, f, []string{"a", "b"})
		if n, ok := lk.FenceOf("a"); n != 0 || ok {
			t.Errorf("FenceOf = %d, %v; want 0, false", n, ok)
		}
	})
	t.Run("a lock of one key", func(t *testing.T) {
		f := newFake()
		f.grant.Fence = 5
		lk := obtain(t, f, "k", lock.WithFencing())
		if n, ok := lk.FenceOf("k"); n != 5 || !ok {
			t.Errorf("FenceOf(its key) = %d, %v; want 5, true", n, ok)
		}
		if n, ok := lk.FenceOf("other"); n != 0 || ok {
			t.Errorf("FenceOf(another key) = %d, %v; want 0, false", n, ok)
		}
	})
	for _, c := range []struct {
		name   string
		fences []int64
	}{
		{"no token is refused", nil},
		{"a token short is refused", []int64{7}},
		{"a token that is not positive is refused", []int64{7, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			f.grant.Fences = c.fences
			_, err := lock.New(f).ObtainMany(context.Background(), []string{"a", "b"}, time.Minute, lock.WithFencing())
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "fencing" {
				t.Fatalf("ObtainMany WithFencing = %v, want an *ArgumentError named fencing", err)
			}
			if got := keysOf(f.callsTo("releaseKeys")); len(got) == 0 || slices.ContainsFunc(got, func(k string) bool { return k != "a,b" }) {
				t.Errorf("ReleaseKeys calls' keys = %q, want \"a,b\" (what the attempt wrote is deleted)", got)
			}
		})
	}
}

// TestMultiKeyHooks: the hooks' events of a lock of several keys carry
// their count, and its first key; never the others.
func TestMultiKeyHooks(t *testing.T) {
	ctx := context.Background()
	var seen []string
	record := func(e lock.Event) {
		seen = append(seen, fmt.Sprintf("%s %s %d", e.Op, e.Key, e.Keys))
	}
	hooks := lock.WithHooks(&lock.Hooks{
		Obtain: func(ctx context.Context, e lock.Event, next func(context.Context) (*lock.Lock, error)) (*lock.Lock, error) {
			record(e)
			return next(ctx)
		},
		Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			record(e)
			return next(ctx)
		},
		Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			record(e)
			return next(ctx)
		},
		Ended: func(e lock.Event) { record(e) },
	})
	lk := obtainMany(t, newFake(), []string{"c", "b", "a"}, hooks)
	if _, err := lk.TTL(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lk.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lk = obtain(t, newFake(), "k", hooks)
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"obtain a 3", "attempt a 3", "ttl a 3", "refresh a 3", "release a 3", "ended a 3",
		"obtain k 0", "attempt k 0", "release k 0", "ended k 0"}
	if !slices.Equal(seen, want) {
		t.Errorf("events = %q, want %q", seen, want)
	}
	if got := strings.Join(seen, " "); strings.Contains(got, " b ") || strings.Contains(got, " c ") {
		t.Errorf("events %q name a key other than the first", seen)
	}
}
