package readme

import (
	"context"
	"errors"
	"time"

	"github.com/locksmith-go/lock"
)

// Transfer is docs/multi-key.md's first fragment.
func Transfer(ctx context.Context, locker *lock.Locker, from, to string) error {
	lk, err := locker.ObtainMany(ctx, []string{"{stock}:" + from, "{stock}:" + to}, 10*time.Second,
		lock.WithRetry(lock.Linear(100*time.Millisecond)))
	var held *lock.KeyError
	switch {
	case errors.As(err, &held) && errors.Is(err, lock.ErrNotObtained):
		return err // held.Key is the key another owner held; none of the keys is ours
	case err != nil:
		return err
	}
	defer lk.Release(ctx) // deletes every key; an error names each key it no longer held

	return move(ctx, from, to) // both warehouses are ours
}

func move(ctx context.Context, _, _ string) error { return ctx.Err() }

// FencesPerKey is docs/multi-key.md's "Fencing" fragment.
func FencesPerKey(ctx context.Context, locker *lock.Locker, keys []string, store Store) error {
	lk, err := locker.ObtainMany(ctx, keys, 30*time.Second, lock.WithFencing())
	if err != nil {
		return err
	}
	defer lk.Release(ctx)
	for _, key := range lk.Keys() {
		fence, _ := lk.FenceOf(key)                         // each key's own counter
		if err := store.Save(ctx, key, fence); err != nil { // the store rejects a smaller token for that key
			return err
		}
	}
	return nil
}
