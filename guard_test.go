package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// guardingFake is a fakeStrategy whose locks guard writes: Guard records
// the call, and answers as TTL would.
type guardingFake struct{ *fakeStrategy }

func (f guardingFake) Guard(ctx context.Context, keys []string, value string, w strategy.Write) (any, error) {
	_, err := f.TTL(ctx, keys[0], value)
	return "guarded", err
}

// TestGuardRefuses: Guard and GuardCommands refuse, before anything
// reaches the strategy or a hook, what they cannot run.
func TestGuardRefuses(t *testing.T) {
	ctx := context.Background()
	obtain := func(t *testing.T, s strategy.Strategy, ttl time.Duration) *lock.Lock {
		t.Helper()
		lk, err := lock.New(s).Obtain(ctx, "k", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
	t.Run("a strategy that cannot guard: an *ArgumentError named lock, matching errors.ErrUnsupported", func(t *testing.T) {
		lk := obtain(t, newFake(), time.Minute)
		for name, err := range map[string]error{
			"Guard":         second(lk.Guard(ctx, "return 1", nil)),
			"GuardCommands": second(lk.GuardCommands(ctx, nil, []any{"PING"})),
		} {
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "lock" || !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%s: got %v, want an *ArgumentError named lock matching errors.ErrUnsupported", name, err)
			}
		}
		if err := lk.Err(); err != nil {
			t.Errorf("Err: got %v, want nil", err)
		}
	})
	t.Run("a lapsed lock: ErrLapsed, with no call", func(t *testing.T) {
		f := guardingFake{newFake()}
		lk := obtain(t, f, 20*time.Millisecond)
		time.Sleep(time.Until(lk.ValidUntil()))
		if _, err := lk.Guard(ctx, "return 1", nil); !errors.Is(err, lock.ErrLapsed) {
			t.Errorf("Guard: got %v, want ErrLapsed", err)
		}
		if n := len(f.callsTo("ttl")); n != 0 {
			t.Errorf("calls to the strategy: got %d, want 0", n)
		}
	})
	t.Run("a released lock: ErrNotHeld, with no call", func(t *testing.T) {
		f := guardingFake{newFake()}
		lk := obtain(t, f, time.Minute)
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := lk.GuardCommands(ctx, nil, []any{"PING"}); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("GuardCommands: got %v, want ErrNotHeld", err)
		}
		if n := len(f.callsTo("ttl")); n != 0 {
			t.Errorf("calls to the strategy: got %d, want 0", n)
		}
	})
	t.Run("invalid arguments: an *ArgumentError naming each, with no call", func(t *testing.T) {
		f := guardingFake{newFake()}
		lk := obtain(t, f, time.Minute)
		for want, err := range map[string]error{
			"script":   second(lk.Guard(ctx, "", nil)),
			"commands": second(lk.GuardCommands(ctx, nil)),
			"keys":     second(lk.GuardCommands(ctx, []string{""}, []any{"PING"})),
		} {
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != want {
				t.Errorf("got %v, want an *ArgumentError named %s", err, want)
			}
		}
		if n := len(f.callsTo("ttl")); n != 0 {
			t.Errorf("calls to the strategy: got %d, want 0", n)
		}
	})
	t.Run("a held lock: the strategy's reply", func(t *testing.T) {
		lk := obtain(t, guardingFake{newFake()}, time.Minute)
		if reply, err := lk.Guard(ctx, "return 1", []string{"k:data"}); reply != "guarded" || err != nil {
			t.Errorf("Guard: got %v, %v; want guarded, nil", reply, err)
		}
	})
	t.Run("a lost lock: the loss, and the lock ends", func(t *testing.T) {
		f := guardingFake{newFake()}
		lk := obtain(t, f, time.Minute)
		f.drop("k")
		if _, err := lk.Guard(ctx, "return 1", nil); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Guard: got %v, want ErrExpired", err)
		}
		if err := lk.Err(); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Err: got %v, want ErrExpired", err)
		}
	})
}

// second returns the error of a call that returns a value and an error.
func second[T any](_ T, err error) error { return err }
