// Package neterr classifies the errors of a command sent to Redis: whether
// the server may or may not have received it, and whether an error reply
// can change if the command is sent again.
package neterr

import (
	"context"
	"errors"
	"io"
	"iter"
	"net"
	"slices"
	"strings"
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

// Final reports whether err is an error reply of Redis that sending the
// command again cannot change, such as NOPERM (an ACL), WRONGTYPE, OOM or a
// script's error: err, or an error it wraps, is such a reply, and nothing in
// it is a reply that passes by itself (see transient), a timeout, a dead
// connection or a refused one. The drivers return an error reply as an
// error whose text is the reply's, which starts with its code in capitals
// (driver.Conn's contract): that is how it is told apart from the client's
// own errors, whatever the driver (rueidis leaves out the generic code ERR:
// its error type tells it).
func Final(err error) bool {
	if err == nil || Unanswered(err) || errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	final := false
	for e := range tree(err) {
		code, msg, ok := replyOf(e)
		switch {
		case !ok:
		case transient(code, msg):
			return false
		default:
			final = true
		}
	}
	return final
}

// rueidisReply is the method set of rueidis's RedisError, whose text
// leaves out the generic code ERR.
type rueidisReply interface {
	IsNil() bool
	IsNoScript() bool
}

// replyOf returns the code and text of e, if e is an error reply: an
// error whose text starts with its code, a word of two capital letters or
// more, then a space (io.EOF's "EOF" has none); or rueidis's RedisError
// of the generic code ERR, which its text leaves out.
func replyOf(e error) (code, msg string, ok bool) {
	msg = e.Error()
	if code, ok := codeOf(msg); ok {
		return code, msg, true
	}
	if r, ok := e.(rueidisReply); ok && !r.IsNil() {
		return "ERR", "ERR " + msg, true
	}
	return "", "", false
}

// Transient are the codes of the error replies that a server gives while it
// is in a state that passes without anyone acting on it: loading its data
// (LOADING), running a slow script (BUSY), moving a slot or electing a
// master (TRYAGAIN, CLUSTERDOWN, MOVED, ASK), cut from its master
// (MASTERDOWN), demoted during a failover (READONLY), short of replicas
// (NOREPLICAS), or without a script that is loaded again on the next call
// (NOSCRIPT). docs/safety.md lists them.
var Transient = []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MOVED", "ASK", "MASTERDOWN", "READONLY", "NOREPLICAS", "NOSCRIPT"}

// maxClients is the one reply with the generic code ERR that passes: the
// server has as many clients as it takes, until one leaves.
const maxClients = "ERR max number of clients reached"

// transient reports whether the reply msg, of code, passes by itself.
func transient(code, msg string) bool {
	return slices.Contains(Transient, code) || strings.HasPrefix(msg, maxClients)
}

// codeOf returns the code that msg starts with, if any.
func codeOf(msg string) (string, bool) {
	code, _, ok := strings.Cut(msg, " ")
	if !ok || len(code) < 2 {
		return "", false
	}
	for _, r := range code {
		if r < 'A' || r > 'Z' {
			return "", false
		}
	}
	return code, true
}

// tree yields err and every error it wraps, depth first, as errors.Is
// walks them.
func tree(err error) iter.Seq[error] {
	return func(yield func(error) bool) {
		var walk func(error) bool
		walk = func(e error) bool {
			if e == nil {
				return true
			}
			if !yield(e) {
				return false
			}
			switch u := e.(type) {
			case interface{ Unwrap() error }:
				return walk(u.Unwrap())
			case interface{ Unwrap() []error }:
				for _, e := range u.Unwrap() {
					if !walk(e) {
						return false
					}
				}
			}
			return true
		}
		walk(err)
	}
}
