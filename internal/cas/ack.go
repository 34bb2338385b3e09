package cas

import (
	"context"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// Ack asks that Replicas replicas acknowledge a write, within Timeout.
type Ack struct {
	Replicas int
	Timeout  time.Duration
}

// Acked runs write with c pinned to one connection to the server that holds
// key (driver.Pin), then, if write succeeded, WAIT ack.Replicas on that connection, which counts the
// replicas that acknowledged its writes. It returns write's error, WAIT's,
// or an *strategy.ReplicaError when fewer than ack.Replicas acknowledged.
// Like a call, the whole is sent once more, on another connection, when its
// connection was dead (see resend); write must be safe to send twice.
func Acked(ctx context.Context, c driver.Conn, key string, ack Ack, write func(driver.Conn) error) error {
	_, err := resend(ctx, func() (struct{}, error) {
		return struct{}{}, driver.Pin(ctx, c, key, func(one driver.Conn) error {
			if err := write(one); err != nil {
				return err
			}
			return wait(ctx, one, ack)
		})
	})
	return err
}

// wait sends WAIT on c, for at most ack.Timeout and never past ctx's
// deadline: WAIT's own timeout is cut to half the time left, so that its
// answer (how many replicas) comes back before the deadline, and is at
// least 1ms, since WAIT 0 would block for ever (the driver ends the call at
// ctx's deadline in any case).
func wait(ctx context.Context, c driver.Conn, ack Ack) error {
	t := ack.Timeout
	if dl, ok := ctx.Deadline(); ok {
		t = min(t, time.Until(dl)/2)
	}
	reply, err := driver.Do(ctx, c, "WAIT", ack.Replicas, max(t.Milliseconds(), 1))
	if err != nil {
		return err
	}
	n, ok := reply.(int64)
	if !ok {
		return fmt.Errorf("WAIT: got reply %T, want an integer", reply)
	}
	if n < int64(ack.Replicas) {
		return &strategy.ReplicaError{Want: ack.Replicas, Got: int(n)}
	}
	return nil
}
