package main

import (
	"errors"

	"github.com/locksmith-go/lock"
)

// The exit codes of locksmith's own outcomes, from sysexits.h where one fits.
// A command run under the lock exits with its own status, or 128+N when a
// signal N killed it; locksmith then exits with the same.
const (
	exitOK           = 0
	exitNotHeld      = 1   // inspect: the lock is free; break: nothing broken (free, or the guard did not match)
	exitLegacyFound  = 1   // check-legacy: legacy activity found
	exitInconclusive = 3   // check-legacy: a server denied a command the check needs
	exitUsage        = 64  // EX_USAGE: a bad flag, argument or command line
	exitUnavailable  = 69  // EX_UNAVAILABLE: Redis unreachable, did not answer, or auth failed
	exitInternal     = 70  // EX_SOFTWARE: a bug of locksmith's
	exitNotObtained  = 75  // EX_TEMPFAIL: another owner holds the lock (-n), or held it until --wait ran out
	exitConfig       = 78  // EX_CONFIG: a bad URL or setting
	exitLost         = 79  // the lock was lost: run stopped its command; refresh and release found it gone
	exitMaxRuntime   = 124 // --max-runtime ran out, as timeout(1)
	exitCannotExec   = 126 // the command is not executable, as the shells
	exitNotFound     = 127 // the command was not found, as the shells
	exitSignal       = 128 // + N: killed by signal N, or interrupted by it while waiting
)

// exitError is an error that sets locksmith's exit code.
type exitError struct {
	code int
	err  error // nil: exit quietly, with nothing more to say
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exit wraps err so that locksmith exits with code. A nil err exits quietly.
func exit(code int, err error) error { return &exitError{code, err} }

// codeOf returns the exit code for err: an exitError's own code, 75 for a
// lock that another owner held (lock.ErrNotObtained, even when Redis then
// did not answer), 64 for an invalid argument, and 69 for any other error
// of a lock operation, from Redis or the network.
func codeOf(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &e):
		return e.code
	case errors.Is(err, lock.ErrNotObtained):
		return exitNotObtained
	case errors.As(err, new(*lock.ArgumentError)):
		return exitUsage
	default:
		return exitUnavailable
	}
}

// silent reports whether err was already reported, or needs no words.
func silent(err error) bool {
	var e *exitError
	return errors.As(err, &e) && e.err == nil
}
