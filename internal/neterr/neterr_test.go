package neterr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name             string
		err              error
		dead, unanswered bool
	}{
		{"EOF", io.EOF, true, true},
		{"wrapped reset", fmt.Errorf("read: %w", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true, true},
		{"broken pipe", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, true, true},
		{"closed connection", net.ErrClosed, true, true},
		{"network timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, false, true},
		{"context deadline", fmt.Errorf("redis: %w", context.DeadlineExceeded), false, true},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, false, false},
		{"error reply", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), false, false},
		{"cancelled", context.Canceled, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Dead(c.err); got != c.dead {
				t.Errorf("Dead(%v) = %v, want %v", c.err, got, c.dead)
			}
			if got := Unanswered(c.err); got != c.unanswered {
				t.Errorf("Unanswered(%v) = %v, want %v", c.err, got, c.unanswered)
			}
		})
	}
}
