package lock_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

func TestErrors(t *testing.T) {
	// The errors are wrapped the way callers receive them.
	expired := fmt.Errorf("release: %w", lock.ErrExpired)
	taken := fmt.Errorf("release: %w", lock.ErrTaken)

	t.Run("ErrExpired matches ErrNotHeld", func(t *testing.T) {
		if !errors.Is(expired, lock.ErrNotHeld) {
			t.Error("errors.Is(ErrExpired, ErrNotHeld) = false, want true")
		}
	})

	t.Run("ErrTaken matches ErrNotHeld", func(t *testing.T) {
		if !errors.Is(taken, lock.ErrNotHeld) {
			t.Error("errors.Is(ErrTaken, ErrNotHeld) = false, want true")
		}
	})

	t.Run("ErrExpired and ErrTaken are distinct", func(t *testing.T) {
		if errors.Is(expired, lock.ErrTaken) {
			t.Error("errors.Is(ErrExpired, ErrTaken) = true, want false")
		}
		if errors.Is(taken, lock.ErrExpired) {
			t.Error("errors.Is(ErrTaken, ErrExpired) = true, want false")
		}
		if lock.ErrExpired.Error() == lock.ErrTaken.Error() {
			t.Errorf("ErrExpired and ErrTaken both read %q, want different messages", lock.ErrExpired)
		}
	})

	t.Run("ErrNotHeld matches neither of its causes", func(t *testing.T) {
		notHeld := fmt.Errorf("release: %w", lock.ErrNotHeld)
		for _, target := range []error{lock.ErrExpired, lock.ErrTaken} {
			if errors.Is(notHeld, target) {
				t.Errorf("errors.Is(ErrNotHeld, %v) = true, want false", target)
			}
		}
	})

	t.Run("the sentinel families are disjoint", func(t *testing.T) {
		families := []error{lock.ErrNotObtained, lock.ErrNotHeld, lock.ErrRefreshLimit, lock.ErrLost}
		for _, err := range families {
			for _, target := range families {
				if err != target && errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = true, want false", err, target)
				}
			}
		}
	})

	t.Run("the errors of the strategy package are the lock package's", func(t *testing.T) {
		pairs := []struct{ lock, strategy error }{
			{lock.ErrNotObtained, strategy.ErrNotObtained},
			{lock.ErrNotHeld, strategy.ErrNotHeld},
			{lock.ErrExpired, strategy.ErrExpired},
			{lock.ErrTaken, strategy.ErrTaken},
		}
		for _, p := range pairs {
			if !errors.Is(p.strategy, p.lock) || !errors.Is(p.lock, p.strategy) {
				t.Errorf("errors.Is between %v and strategy's %v: got false, want true both ways", p.lock, p.strategy)
			}
		}
		var ae *lock.ArgumentError
		if err := error(&strategy.ArgumentError{Name: "ttl"}); !errors.As(err, &ae) {
			t.Errorf("errors.As(%v, *lock.ArgumentError): got false, want true", err)
		}
	})

	t.Run("an *ArgumentError is found with errors.As and names the argument", func(t *testing.T) {
		err := fmt.Errorf("setting up: %w", &lock.ArgumentError{Name: "ttl", Reason: "must be at least 1ms"})
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) {
			t.Fatalf("errors.As(%v, *ArgumentError) = false, want true", err)
		}
		if ae.Name != "ttl" {
			t.Errorf("ArgumentError.Name = %q, want %q", ae.Name, "ttl")
		}
		if msg := ae.Error(); !strings.Contains(msg, "ttl") || !strings.Contains(msg, "must be at least 1ms") {
			t.Errorf("ArgumentError.Error() = %q, want it to contain the name %q and the reason", msg, "ttl")
		}
	})
}

// TestKeyErrors: KeyErrors finds every *KeyError in a tree of wrapped and
// joined errors, and none where there are none.
func TestKeyErrors(t *testing.T) {
	a := &lock.KeyError{Key: "a", Err: lock.ErrExpired}
	b := &lock.KeyError{Key: "b", Err: lock.ErrTaken}
	c := &lock.KeyError{Key: "c", Err: lock.ErrNotObtained}
	for _, tc := range []struct {
		name string
		err  error
		want []*lock.KeyError
	}{
		{"nil", nil, nil},
		{"no KeyError", lock.ErrNotObtained, nil},
		{"one", a, []*lock.KeyError{a}},
		{"wrapped", fmt.Errorf("release: %w", a), []*lock.KeyError{a}},
		{"joined", errors.Join(a, b), []*lock.KeyError{a, b}},
		{"joined, wrapped, then joined again", errors.Join(fmt.Errorf("x: %w", errors.Join(a, b)), c), []*lock.KeyError{a, b, c}},
		{"wrapped in several by one error", fmt.Errorf("%w and %w", a, c), []*lock.KeyError{a, c}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lock.KeyErrors(tc.err); !slices.Equal(got, tc.want) {
				t.Errorf("KeyErrors(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
