package readme

import (
	"context"
	"errors"
	"time"

	"github.com/locksmith-go/lock"
)

// GuardedWrite is docs/safety.md's "On the lock's server: a guarded write".
func GuardedWrite(ctx context.Context, locker *lock.Locker) error {
	const setBalance = `return redis.call('SET', KEYS[1], ARGV[1])`

	lk, err := locker.Obtain(ctx, "{acct:7}", 30*time.Second)
	if err != nil {
		return err
	}
	defer lk.Release(ctx)
	_, err = lk.Guard(ctx, setBalance, []string{"{acct:7}:balance"}, "120")
	if errors.Is(err, lock.ErrNotHeld) {
		// the lock was lost before the write: nothing was written
	}
	return err
}

// GuardedCommands is docs/safety.md's guarded write without Lua.
func GuardedCommands(ctx context.Context, lk *lock.Lock) error {
	_, err := lk.GuardCommands(ctx, []string{"{acct:7}:balance"},
		[]any{"SET", "{acct:7}:balance", "120"})
	return err
}
