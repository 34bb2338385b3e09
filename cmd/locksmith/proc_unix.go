//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// forwardedSignals are the signals run catches from its start: while it
// waits for the lock, the terminating ones cancel the wait; while the
// command runs, all of them go to the command's process group. SIGQUIT is
// among them so that Go's stack dump never leaves the command orphaned.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

// terminating reports whether sig asks to stop: run gives up waiting, or
// stops the command (SIGKILL after --kill-grace).
func terminating(sig os.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		return true
	}
	return false
}

// signal sends sig to the child's whole process group. A group that is
// gone already is no error.
func (c *child) signal(sig os.Signal) error {
	err := syscall.Kill(-c.pid, sig.(syscall.Signal))
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// signalNames names the signals that run catches, sends, or may see kill
// the command.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGWINCH: "SIGWINCH", syscall.SIGXCPU: "SIGXCPU", syscall.SIGSYS: "SIGSYS",
}
