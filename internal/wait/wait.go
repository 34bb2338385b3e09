// Package wait holds the two questions about a context that the lock
// package, the strategies and the otel wrapper all ask: is it over, and
// sleep unless it ends first.
package wait

import (
	"context"
	"time"
)

// Over reports whether ctx is done or past its deadline: a driver can report
// its own timeout at the deadline a moment before ctx's timer fires.
func Over(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(dl)
}

// Sleep waits for d, or until ctx is done; it returns ctx.Err() then.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
