package readme

import (
	"context"
	"errors"
	"time"

	"github.com/locksmith-go/lock"
)

// Do is docs/safety.md's "Run work under a lock: lock.Do".
func Do(ctx context.Context, locker *lock.Locker) {
	err := lock.Do(ctx, locker, "report:daily", 30*time.Second, func(ctx context.Context) error {
		return writeReport(ctx) // stop when ctx is done: the lock was lost
	})
	switch {
	case errors.Is(err, lock.ErrNotObtained):
		// another worker holds it; fn did not run
	case errors.Is(err, lock.ErrLost):
		// the lock was lost before fn returned: its work may overlap another holder's
	case err != nil:
		// fn's own error, as fn returned it (or the release's error)
	}
}

func writeReport(ctx context.Context) error { return ctx.Err() }

// Fencing is docs/safety.md's "Fencing tokens".
func Fencing(ctx context.Context, locker *lock.Locker, invoices Store, invoice string) error {
	lk, err := locker.Obtain(ctx, "invoice:42", 30*time.Second, lock.WithFencing())
	if err != nil {
		return err
	}
	token, _ := lk.Fence()
	err = invoices.Save(ctx, invoice, token) // rejected if token < the largest token Save has seen
	return errors.Join(err, lk.Release(ctx))
}

// Store is a resource that checks fencing tokens.
type Store interface {
	// Save stores the invoice, unless a larger token was seen.
	Save(ctx context.Context, invoice string, token int64) error
}
