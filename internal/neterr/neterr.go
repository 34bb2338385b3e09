// Package neterr classifies the errors of a command sent to Redis: whether
// the server may or may not have received it.
package neterr

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// Dead reports whether err says that the connection was closed or reset by
// its peer. It is false for timeouts: a command that timed out may still be
// on its way.
func Dead(err error) bool {
	if Timeout(err) {
		return false
	}
	for _, dead := range []error{io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE} {
		if errors.Is(err, dead) {
			return true
		}
	}
	return false
}

// Timeout reports whether err is a timeout: a network timeout, or a
// context's deadline.
func Timeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// Unanswered reports whether err leaves the command's fate unknown: it timed
// out, or its connection died, so the server may have run it, or may run it
// still. A reply that is an error, a refused connection, or a client that is
// closed or misconfigured are answers of a kind: sending again changes
// nothing.
func Unanswered(err error) bool { return Timeout(err) || Dead(err) }
