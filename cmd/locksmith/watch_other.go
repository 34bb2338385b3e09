//go:build !linux

package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// monoBase is the origin of monoNow.
var monoBase = time.Now()

// monoNow reads the monotonic clock of this process, in nanoseconds.
func monoNow() int64 { return int64(time.Since(monoBase)) }

// startGuard starts the command argv under a goroutine of locksmith's
// (startInProcess): only Linux has the watchdog, a process of its own (and
// the parent-death signals it needs). So a locksmith stopped with SIGSTOP
// stops its schedule too, and its command may run on while the next leader
// starts.
func startGuard(argv, env []string, stdin io.Reader, stdout, stderr io.Writer, d time.Time, grace time.Duration) (*guard, error) {
	return startInProcess(argv, env, stdin, stdout, stderr, d, grace)
}

// watchMain refuses: the watchdog is a process of its own on Linux alone.
func watchMain([]string) int {
	fmt.Fprintf(os.Stderr, "locksmith: %s is locksmith elect's watchdog, which runs on Linux alone\n", watchCommand)
	return exitUsage
}
