package conformance

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
)

// A guarded write, in both forms: a script (Lock.Guard) and commands
// (Lock.GuardCommands), each setting a key to a value.
type guardForm struct {
	name  string
	write func(ctx context.Context, lk *lock.Lock, key, value string) error
}

var (
	scriptForm = guardForm{"script", func(ctx context.Context, lk *lock.Lock, key, value string) error {
		_, err := lk.Guard(ctx, `return redis.call('SET', KEYS[1], ARGV[1])`, []string{key}, value)
		return err
	}}
	commandsForm = guardForm{"commands", func(ctx context.Context, lk *lock.Lock, key, value string) error {
		_, err := lk.GuardCommands(ctx, []string{key}, []any{"SET", key, value})
		return err
	}}
	// appendForm's writes append value to the list key.
	appendForms = []guardForm{
		{"script", func(ctx context.Context, lk *lock.Lock, key, value string) error {
			_, err := lk.Guard(ctx, `return redis.call('RPUSH', KEYS[1], ARGV[1])`, []string{key}, value)
			return err
		}},
		{"commands", func(ctx context.Context, lk *lock.Lock, key, value string) error {
			_, err := lk.GuardCommands(ctx, []string{key}, []any{"RPUSH", key, value})
			return err
		}},
	}
)

// guardKeys returns a lock key and a data key in its Cluster hash slot.
func guardKeys(t *testing.T) (key, data string) {
	k := "{" + Key(t) + "}"
	return k, k + ":data"
}

// guards returns lk's guarded write in form f, or nil, having logged why,
// when the Locker cannot guard: the strategy refuses guarded writes (an
// *ArgumentError named "lock" matching errors.ErrUnsupported), or the
// server runs no scripts and f is the script form (an error matching
// errors.ErrUnsupported).
func guards(t *testing.T, ctx context.Context, lk *lock.Lock, f guardForm, data string) func(string) error {
	t.Helper()
	err := f.write(ctx, lk, data, "first")
	switch {
	case err == nil:
		return func(v string) error { return f.write(ctx, lk, data, v) }
	case argumentError(err, "lock") && errors.Is(err, errors.ErrUnsupported):
		t.Logf("the strategy refuses guarded writes: %v", err)
	case f.name == "script" && errors.Is(err, errors.ErrUnsupported):
		t.Logf("the server runs no scripts: %v", err)
	default:
		t.Fatalf("guarded write (%s) of a held lock = %v, want nil", f.name, err)
	}
	return nil
}

// value returns the string at key on c, or "" when there is none.
func value(t *testing.T, ctx context.Context, c driver.Conn, key string) string {
	t.Helper()
	v, _, err := c.Get(ctx, key)
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// guardedWriteNeedsTheLock (and guardedCommandsNeedTheLock): a guarded
// write lands while the lock is held, and writes nothing once the key was
// deleted (as an expiry would), overwritten (taken), or broken, nor, with
// no round trip, once ValidUntil has passed.
func (s suite) guardedWriteNeedsTheLock(t *testing.T, ctx context.Context) {
	s.guardedNeedsTheLock(t, ctx, scriptForm)
}

func (s suite) guardedCommandsNeedTheLock(t *testing.T, ctx context.Context) {
	s.guardedNeedsTheLock(t, ctx, commandsForm)
}

func (s suite) guardedNeedsTheLock(t *testing.T, ctx context.Context, f guardForm) {
	l := s.h.NewLocker(t)
	c := s.h.Conns(t)[0]
	lost := func(t *testing.T, name string, lose func(key string) error, want error) {
		t.Run(name, func(t *testing.T) {
			key, data := guardKeys(t)
			lk := s.obtain(t, ctx, l, key, longTTL)
			write := guards(t, ctx, lk, f, data)
			if write == nil {
				return
			}
			if got := value(t, ctx, c, data); got != "first" {
				t.Fatalf("data after a guarded write = %q, want %q", got, "first")
			}
			if err := lose(key); err != nil {
				t.Fatalf("losing the lock: %v", err)
			}
			if err := write("stale"); !errors.Is(err, want) {
				t.Errorf("guarded write after the lock was %s = %v, want %v", name, err, want)
			}
			if got := value(t, ctx, c, data); got != "first" {
				t.Errorf("data after a stale guarded write = %q, want %q", got, "first")
			}
			if lk.Err() == nil {
				t.Errorf("Err after a guarded write found the lock %s = nil, want the loss", name)
			}
		})
	}
	lost(t, "deleted", func(key string) error { _, err := c.Del(ctx, key); return err }, lock.ErrExpired)
	lost(t, "taken", func(key string) error { _, _, err := c.GetSet(ctx, key, "another owner's value"); return err }, lock.ErrTaken)
	lost(t, "broken", func(key string) error { _, err := l.Break(ctx, key, ""); return err }, lock.ErrNotHeld)
	t.Run("lapsed", func(t *testing.T) {
		key, data := guardKeys(t)
		lk := s.obtain(t, ctx, l, key, s.h.ShortTTL)
		write := guards(t, ctx, lk, f, data)
		if write == nil {
			return
		}
		time.Sleep(time.Until(lk.ValidUntil()))
		if _, err := c.Del(ctx, data); err != nil {
			t.Fatal(err)
		}
		if err := write("stale"); !errors.Is(err, lock.ErrLapsed) {
			t.Errorf("guarded write after ValidUntil = %v, want ErrLapsed", err)
		}
		if got := value(t, ctx, c, data); got != "" {
			t.Errorf("data after a lapsed guarded write = %q, want none", got)
		}
	})
}

// guardedWriteRacesAnAcquire: a holder writes, guarded, as fast as it can,
// to a list, while its lock is deleted behind its back and another holder
// obtains the lock and then appends B to the same list: none of the first
// holder's entries comes after B, in either form.
func (s suite) guardedWriteRacesAnAcquire(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	c := s.h.Conns(t)[0]
	for _, f := range appendForms {
		t.Run(f.name, func(t *testing.T) {
			for round := range 3 {
				key, data := guardKeys(t)
				first := s.obtain(t, ctx, l, key, longTTL)
				write := guards(t, ctx, first, f, data)
				if write == nil {
					return
				}
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for write("A") == nil {
					}
				}()
				waitLen(t, ctx, c, data, 5)
				if _, err := c.Del(ctx, key); err != nil {
					t.Fatal(err)
				}
				s.obtain(t, ctx, l, key, longTTL)
				// The second holder is in: from now on, the first one's
				// writes must fail.
				if _, err := driver.Do(ctx, c, "RPUSH", data, "B"); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
				entries, err := driver.Do(ctx, c, "LRANGE", data, 0, -1)
				if err != nil {
					t.Fatal(err)
				}
				list, _ := entries.([]any)
				if at := slices.Index(list, any("B")); at < 0 || slices.Contains(list[at:], any("A")) {
					t.Fatalf("round %d: the list = %v, want no A after the first B: the first holder wrote while the second held the lock", round, list)
				}
			}
		})
	}
}

// waitLen waits until the list at key has n entries at least.
func waitLen(t *testing.T, ctx context.Context, c driver.Conn, key string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(waitBound); ; time.Sleep(time.Millisecond) {
		got, err := driver.Do(ctx, c, "LLEN", key)
		if err != nil {
			t.Fatal(err)
		}
		if got.(int64) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("LLEN %s = %v after %v, want %d", key, got, waitBound, n)
		}
	}
}

// guardedWriteChecksEveryKey: a guarded write of a lock of several keys,
// one of which was deleted behind its back, writes nothing, and names that
// key, in either form.
func (s suite) guardedWriteChecksEveryKey(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	c := s.h.Conns(t)[0]
	for _, f := range []guardForm{scriptForm, commandsForm} {
		t.Run(f.name, func(t *testing.T) {
			key, data := guardKeys(t)
			keys := []string{key + ":a", key + ":b", key + ":c"}
			lk, err := l.ObtainMany(ctx, keys, longTTL)
			if argumentError(err, "keys") {
				t.Logf("the strategy refuses locks of several keys: %v", err)
				return
			} else if err != nil {
				t.Fatalf("ObtainMany(%q) = %v, want a lock", keys, err)
			}
			release(t, lk)
			write := guards(t, ctx, lk, f, data)
			if write == nil {
				return
			}
			if _, err := c.Del(ctx, keys[1]); err != nil {
				t.Fatal(err)
			}
			err = write("stale")
			var ke *lock.KeyError
			if !errors.Is(err, lock.ErrExpired) || !errors.As(err, &ke) || ke.Key != keys[1] {
				t.Errorf("guarded write after a member was lost = %v, want ErrExpired in a *KeyError of %q", err, keys[1])
			}
			if got := value(t, ctx, c, data); got != "first" {
				t.Errorf("data after a guarded write with a member lost = %q, want %q", got, "first")
			}
		})
	}
}

// guardedWriteInvalidArguments: an empty script, no commands, an empty
// command and an empty key are refused with an *ArgumentError, and a nil
// lock's guarded write with ErrNotHeld, before anything is sent.
func (s suite) guardedWriteInvalidArguments(t *testing.T, ctx context.Context) {
	l := s.h.NewLocker(t)
	key, data := guardKeys(t)
	lk := s.obtain(t, ctx, l, key, longTTL)
	for _, c := range []struct {
		name string
		call func(*lock.Lock) error
		want string
	}{
		{"empty script", func(lk *lock.Lock) error { _, err := lk.Guard(ctx, "", []string{data}); return err }, "script"},
		{"no commands", func(lk *lock.Lock) error { _, err := lk.GuardCommands(ctx, []string{data}); return err }, "commands"},
		{"empty command", func(lk *lock.Lock) error { _, err := lk.GuardCommands(ctx, nil, []any{}); return err }, "commands"},
		{"command not named", func(lk *lock.Lock) error { _, err := lk.GuardCommands(ctx, nil, []any{42}); return err }, "commands"},
		{"empty key", func(lk *lock.Lock) error { _, err := lk.Guard(ctx, "return 1", []string{""}); return err }, "keys"},
		{"nil ctx", func(lk *lock.Lock) error {
			var none context.Context // nil
			_, err := lk.Guard(none, "return 1", nil)
			return err
		}, "ctx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(lk); !argumentError(err, c.want) {
				t.Errorf("got %v, want an *ArgumentError named %s", err, c.want)
			}
		})
	}
	t.Run("nil lock", func(t *testing.T) {
		var none *lock.Lock
		if _, err := none.Guard(ctx, "return 1", nil); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Guard of a nil lock = %v, want ErrNotHeld", err)
		}
	})
	if lk.Err() != nil {
		t.Errorf("Err after refused guarded writes = %v, want nil: a refused argument must not end the lock", lk.Err())
	}
}
