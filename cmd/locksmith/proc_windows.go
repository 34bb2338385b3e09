package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// forwardedSignals: on Windows, run is not supported (see startChild);
// Ctrl-C still cancels a wait.
var forwardedSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// terminating reports whether sig asks to stop.
func terminating(os.Signal) bool { return true }

// child is never started on Windows.
type child struct {
	pid    int
	exited chan struct{}
}

// startChild refuses: run needs process groups and signals.
func startChild(*exec.Cmd) (*child, error) {
	return nil, errors.New("locksmith run needs a Unix system: process groups and signals")
}

func (c *child) signal(os.Signal) error { return nil }

func (c *child) reap() (*os.ProcessState, error) { return nil, nil }

// signalNames names the signals that Windows knows.
var signalNames = map[syscall.Signal]string{
	syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL",
}
