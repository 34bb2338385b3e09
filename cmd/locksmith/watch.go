package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// The kill schedule of elect's command is enforced by a watchdog, not by
// the process that campaigns: a locksmith stopped with SIGSTOP (or starved,
// or swapped out) cannot fire its timers, while its lease runs out on the
// server and the next leader starts. The watchdog starts the command in a
// process group of its own, receives each new validity deadline D of the
// term as an absolute time on the monotonic clock (CLOCK_MONOTONIC, which
// is system-wide on Linux, so that the delay of the message cannot move
// the deadline later), and sends SIGTERM to the group at D - grace -
// margin and SIGKILL at D - margin by itself, unless a later deadline
// came first. On Linux it is a process of its own (locksmith __watch,
// watch_linux.go); elsewhere, a goroutine of locksmith's (watch_other.go),
// which a stopped locksmith stops too.

// watchCommand is the hidden subcommand that runs the watchdog.
const watchCommand = "__watch"

// orderKind is what an order asks of the watchdog.
type orderKind int

const (
	orderDeadline orderKind = iota + 1 // at: the term's new validity deadline D
	orderStop                          // why: SIGTERM now, SIGKILL within the grace
	orderSignal                        // sig: forward it to the group
	orderKill                          // why: SIGKILL now (locksmith is gone)
)

// order is what locksmith tells the watchdog.
type order struct {
	kind orderKind
	at   int64 // orderDeadline: nanoseconds on the monotonic clock (monoNow)
	sig  syscall.Signal
	why  string
}

// reportKind is what a report tells locksmith.
type reportKind int

const (
	reportStarted reportKind = iota + 1 // pid: the command started
	reportFailed                        // code, text: the command could not start (126, 127)
	reportSignal                        // sig, why: a signal went to the group
	reportExited                        // code, sig: the command exited, its group was killed, it was reaped
)

// watchReport is what the watchdog tells locksmith.
type watchReport struct {
	kind reportKind
	pid  int
	code int // reportFailed: the exit code; reportExited: the exit status (when sig is 0)
	sig  syscall.Signal
	why  string
	text string
}

// exitOf returns the exit status of the exited command st, or the signal
// that killed it.
func exitOf(st *os.ProcessState) (code int, sig syscall.Signal) {
	if st == nil {
		return exitInternal, 0
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 0, ws.Signal()
	}
	return st.ExitCode(), 0
}

// exitText says how a command exited, as os.ProcessState does.
func exitText(code int, sig syscall.Signal) string {
	if sig != 0 {
		return "signal: " + sig.String()
	}
	return "exit status " + strconv.Itoa(code)
}

// startFailed is the report of a command that could not start: 127 when
// it was not found, 126 otherwise, as the shells say.
func startFailed(argv0 string, err error) watchReport {
	code := exitCannotExec
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		code = exitNotFound
	}
	return watchReport{kind: reportFailed, code: code, text: fmt.Sprintf("cannot run %s: %v", argv0, err)}
}

// schedule enforces the kill schedule of the command c, started in a
// process group of its own, with the kill grace and margin of elect, from
// the validity deadline d (on the monotonic clock, monoNow), and reports
// what it does. It returns once c exited, what was left of its group was
// killed (it would run on without the leadership), and c was reaped.
//
//   - At d - grace - margin, unless a later deadline came first, SIGTERM
//     goes to the group, and at d - margin SIGKILL: the deadlines after a
//     SIGTERM move nothing.
//   - A stop order sends SIGTERM at once, and SIGKILL grace later, or at
//     d - margin if that comes first.
//   - A forwarded terminating signal is followed by SIGKILL grace later,
//     or at d - margin if that comes first; a second SIGINT kills at once.
//   - A kill order, and the end of the orders (locksmith died), kill at
//     once.
func schedule(c *child, d int64, grace, margin time.Duration, orders <-chan order, tell func(watchReport)) {
	var (
		stopping bool  // SIGTERM went for the schedule or a stop: the deadline is final
		killBy   int64 // when SIGKILL is due, but for d - margin; 0: none
		killed   bool
		ints     int // SIGINTs forwarded
	)
	send := func(sig syscall.Signal, why string) {
		_ = c.signal(sig)
		tell(watchReport{kind: reportSignal, sig: sig, why: why})
	}
	killWithin := func(d time.Duration) {
		if by := monoNow() + int64(d); killBy == 0 || by < killBy {
			killBy = by
		}
	}
	stop := func(why string) {
		if !stopping {
			stopping = true
			send(syscall.SIGTERM, why)
		}
		killWithin(grace)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		kill, why := d-int64(margin), "validity" // SIGKILL before the deadline, always
		if killBy != 0 && killBy < kill {
			kill, why = killBy, "kill-grace"
		}
		term := d - int64(grace+margin)
		next := kill
		if !stopping && term < next {
			next = term
		}
		var due <-chan time.Time
		if !killed {
			timer.Reset(time.Duration(next - monoNow()))
			due = timer.C
		}
		select {
		case <-c.exited:
			_ = c.signal(syscall.SIGKILL) // what is left of the group
			st, _ := c.reap()
			code, sig := exitOf(st)
			tell(watchReport{kind: reportExited, code: code, sig: sig})
			return
		case o, ok := <-orders:
			if !ok {
				orders, o = nil, order{kind: orderKill, why: "orphaned"}
			}
			switch o.kind {
			case orderDeadline:
				if !stopping && o.at > d {
					d = o.at
				}
			case orderStop:
				stop(o.why)
			case orderSignal:
				send(o.sig, "forwarded")
				if terminating(o.sig) {
					killWithin(grace)
					if o.sig == syscall.SIGINT {
						if ints++; ints > 1 {
							killBy = monoNow() // a second SIGINT kills at once
						}
					}
				}
			case orderKill:
				if !killed {
					send(syscall.SIGKILL, o.why)
					killed = true
				}
			}
		case <-due:
			now := monoNow()
			if !stopping && now >= term {
				stop("deadline")
			}
			if now >= kill {
				send(syscall.SIGKILL, why)
				killed = true
			}
		}
	}
}

// guard is the watchdog of one command, as elect sees it: the orders it
// sends, and the reports it reads, until the exit of the command (or a
// reportFailed) closes them.
type guard struct {
	reports <-chan watchReport
	send    func(order)
	// close ends the orders and waits for the watchdog to end; call it
	// once the reports are closed.
	close func()
}

// mono returns the deadline t on the monotonic clock of the watchdog.
func mono(t time.Time) int64 { return monoNow() + int64(time.Until(t)) }
