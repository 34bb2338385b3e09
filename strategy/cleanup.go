package strategy

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/internal/scope"
	"github.com/locksmith-go/lock/internal/wait"
)

// CleanupTimeout bounds a clean-up ([CleanUp]), which runs on a context
// detached from the caller's: long enough to outlast a short stall of the
// server (a pause, a failover, a loaded machine), short enough that
// clean-ups stuck on a dead server do not pile up. A key that a clean-up
// could not delete expires at the end of its TTL.
const CleanupTimeout = 5 * time.Second

// cleanupRetry is how long CleanUp waits before it tries again after a
// transport error.
const cleanupRetry = 50 * time.Millisecond

// CleanUp deletes what a request whose answer never came may have written
// under key: it calls del, which deletes the key if it still holds the
// request's value and returns nil or an error matching ErrNotHeld, until the
// server has answered twice. It runs on a context with ctx's values that
// survives its cancellation, bounded by [CleanupTimeout], and blocks until
// it is done: call it in a goroutine of its own when the caller must not
// wait. It returns nil, or why it gave up.
//
// Why twice: a request sent while the server is stalled (a SIGSTOP, a long
// command) waits in its socket, and so does the delete sent after it on
// another connection. When the server runs again, it may read both in the
// same turn of its event loop, the delete first, and then the write lands
// after the delete. The first answer shows that the server has run again
// and worked through what was waiting; a second delete, sent after that
// answer arrived, is read after it, and so after the write. Timeouts and
// dead connections are not answers: del is tried again. A refused
// connection counts as an answer (no server listens, so nothing waits in
// its sockets). Any other error, such as an error reply or a closed
// client, ends the clean-up at once: sending again would change nothing. A
// later holder's lock is never deleted, because every attempt has its own
// value.
//
// A Locker runs it after an attempt that failed without an answer. A
// strategy that must finish a clean-up after its own call returned (a
// multi-node strategy, for the nodes that had not answered yet) calls it
// with the context of that call; the clean-up then goes through the Op
// hooks of the Obtain or lock it belongs to, as the operation "cleanup",
// when the strategy implements [NodeReporter], so that a clean-up that gave
// up is seen.
func CleanUp(ctx context.Context, key string, del func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	defer cancel()
	run := func(ctx context.Context) error {
		for answers := 0; answers < 2; {
			err := del(ctx)
			switch {
			case err == nil, errors.Is(err, ErrNotHeld), errors.Is(err, syscall.ECONNREFUSED):
				answers++
				continue
			case !neterr.Unanswered(err):
				return cleanupError(key, err)
			}
			if ctx.Err() != nil || wait.Sleep(ctx, cleanupRetry) != nil {
				return cleanupError(key, fmt.Errorf("gave up after %v: %w", CleanupTimeout, err))
			}
		}
		return nil
	}
	if sc := scope.From(ctx); sc != nil {
		return sc.Op(ctx, "cleanup", key, run)
	}
	return run(ctx)
}

func cleanupError(key string, err error) error {
	return fmt.Errorf("lock: cleanup %q: %w", key, err)
}

// ReportNode reports one node's answer to the Node hooks of the Obtain or
// operation that ctx belongs to. Multi-node strategies call it, and
// implement [NodeReporter].
func ReportNode(ctx context.Context, node, outcome string, err error) {
	if sc := scope.From(ctx); sc != nil {
		sc.Node(ctx, node, outcome, err)
	}
}

// A Drainer is a Strategy that leaves calls running after the call that
// made them returned, such as a multi-node strategy's calls to the nodes
// that had not answered when a quorum had. A lock.Locker's Close calls
// Drain, which returns once they have ended; each must be bounded (by a
// node timeout, or by CleanupTimeout for a clean-up), so that Drain is.
type Drainer interface {
	Strategy
	// Drain waits for the calls the Strategy left running.
	Drain()
}
