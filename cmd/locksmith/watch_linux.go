package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// monoNow reads CLOCK_MONOTONIC, in nanoseconds: the clock of Go's timers
// on Linux, and one clock for every process of the system, so that an
// absolute deadline means the same in locksmith and in its watchdog.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_MONOTONIC): %v", err)) // not on Linux
	}
	return ts.Nano()
}

// The protocol of the watchdog: one line per order or report.

// encode returns o as one line of the watchdog's protocol.
func (o order) encode() string {
	switch o.kind {
	case orderDeadline:
		return fmt.Sprintf("deadline %d\n", o.at)
	case orderStop:
		return "stop " + o.why + "\n"
	case orderSignal:
		return fmt.Sprintf("signal %d\n", int(o.sig))
	}
	return "kill " + o.why + "\n"
}

// parseOrder reads a line of encode.
func parseOrder(line string) (order, error) {
	verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	n, nerr := strconv.ParseInt(arg, 10, 64)
	switch {
	case verb == "deadline" && nerr == nil:
		return order{kind: orderDeadline, at: n}, nil
	case verb == "stop" && arg != "":
		return order{kind: orderStop, why: arg}, nil
	case verb == "signal" && nerr == nil:
		return order{kind: orderSignal, sig: syscall.Signal(n)}, nil
	case verb == "kill" && arg != "":
		return order{kind: orderKill, why: arg}, nil
	}
	return order{}, fmt.Errorf("watchdog: bad order %q", line)
}

// encode returns r as one line of the watchdog's protocol.
func (r watchReport) encode() string {
	switch r.kind {
	case reportStarted:
		return fmt.Sprintf("started %d\n", r.pid)
	case reportFailed:
		return fmt.Sprintf("failed %d %s\n", r.code, strings.ReplaceAll(r.text, "\n", " "))
	case reportSignal:
		return fmt.Sprintf("signal %d %s\n", int(r.sig), r.why)
	}
	return fmt.Sprintf("exited %d %d\n", r.code, int(r.sig))
}

// parseReport reads a line of encode.
func parseReport(line string) (watchReport, error) {
	f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
	num := func(i int) int {
		if i >= len(f) {
			return -1
		}
		n, err := strconv.Atoi(f[i])
		if err != nil {
			return -1
		}
		return n
	}
	rest := ""
	if len(f) == 3 {
		rest = f[2]
	}
	switch {
	case f[0] == "started" && num(1) > 0:
		return watchReport{kind: reportStarted, pid: num(1)}, nil
	case f[0] == "failed" && num(1) >= 0:
		return watchReport{kind: reportFailed, code: num(1), text: rest}, nil
	case f[0] == "signal" && num(1) > 0 && rest != "":
		return watchReport{kind: reportSignal, sig: syscall.Signal(num(1)), why: rest}, nil
	case f[0] == "exited" && num(1) >= 0 && num(2) >= 0:
		return watchReport{kind: reportExited, code: num(1), sig: syscall.Signal(num(2))}, nil
	}
	return watchReport{}, fmt.Errorf("watchdog: bad report %q", line)
}

// readLines sends each line of r to lines, and closes it at the end of r.
func readLines(r io.Reader, lines chan<- string) {
	defer close(lines)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return // a partial last line is a writer that died mid-line
		}
		lines <- line
	}
}

// The watchdog's descriptors: the orders it reads, the reports it writes.
const (
	ordersFD  = 3
	reportsFD = 4
)

// startGuard starts the command argv, with env and the streams given, under
// a watchdog of its own: locksmith __watch GRACE MARGIN DEADLINE -- argv,
// the locksmith binary run again (/proc/self/exe, so that an upgrade of the
// binary in place changes nothing), in a process group of its own (a
// terminal's signals reach locksmith alone, which forwards them), with
// SIGTERM as its parent-death signal, and two pipes: the orders on its
// descriptor 3, the reports on 4.
func startGuard(argv, env []string, stdin io.Reader, stdout, stderr io.Writer, d time.Time, grace time.Duration) (*guard, error) {
	ordersR, ordersW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	reportsR, reportsW, err := os.Pipe()
	if err != nil {
		ordersR.Close()
		ordersW.Close()
		return nil, err
	}
	args := append([]string{watchCommand, strconv.FormatInt(int64(grace), 10), strconv.FormatInt(int64(killMargin), 10),
		strconv.FormatInt(mono(d), 10), "--"}, argv...)
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.ExtraFiles = []*os.File{ordersR, reportsW} // 3 and 4
	w, err := startProcess(cmd, syscall.SIGTERM)
	ordersR.Close()
	reportsW.Close()
	if err != nil {
		ordersW.Close()
		reportsR.Close()
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	lines := make(chan string, 16)
	go readLines(reportsR, lines)
	reports := make(chan watchReport, 16)
	go func() {
		defer close(reports)
		defer reportsR.Close()
		for line := range lines {
			r, err := parseReport(line)
			if err != nil {
				reports <- watchReport{kind: reportFailed, code: exitInternal, text: err.Error()}
				return
			}
			reports <- r
		}
	}()
	var mu sync.Mutex
	return &guard{
		reports: reports,
		send: func(o order) {
			mu.Lock()
			defer mu.Unlock()
			_, _ = io.WriteString(ordersW, o.encode()) // a watchdog gone says so by its reports
		},
		close: func() {
			mu.Lock()
			ordersW.Close()
			mu.Unlock()
			<-w.exited
			_, _ = w.reap()
		},
	}, nil
}

// watchMain is the watchdog, locksmith __watch GRACE MARGIN DEADLINE --
// CMD [ARG...]: it starts CMD in a process group of its own, with SIGKILL
// as its parent-death signal, and enforces its kill schedule (see
// schedule) from the orders it reads on descriptor 3, reporting on 4. When
// the orders end (locksmith died), or its parent-death signal comes
// (SIGTERM, after which its parent is another process), it kills CMD's
// group at once. It returns
// its exit code: 0 once CMD was reaped, whatever CMD's status (reported).
func watchMain(args []string) int {
	if len(args) < 5 || args[3] != "--" {
		fmt.Fprintf(os.Stderr, "locksmith: %s is locksmith elect's watchdog, not a command\n", watchCommand)
		return exitUsage
	}
	var n [3]int64
	for i := range n {
		var err error
		if n[i], err = strconv.ParseInt(args[i], 10, 64); err != nil {
			fmt.Fprintf(os.Stderr, "locksmith: %s: %v\n", watchCommand, err)
			return exitUsage
		}
	}
	grace, margin, d, argv := time.Duration(n[0]), time.Duration(n[1]), n[2], args[4:]
	// Neither descriptor may reach CMD: it would keep the reports open
	// after the watchdog died.
	syscall.CloseOnExec(ordersFD)
	syscall.CloseOnExec(reportsFD)
	in, out := os.NewFile(ordersFD, "orders"), os.NewFile(reportsFD, "reports")
	if in == nil || out == nil {
		fmt.Fprintf(os.Stderr, "locksmith: %s: no descriptors 3 and 4\n", watchCommand)
		return exitUsage
	}
	var mu sync.Mutex
	tell := func(r watchReport) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = io.WriteString(out, r.encode()) // locksmith gone: nobody to tell
	}
	// Caught, never ignored: an ignored signal would stay ignored in CMD.
	ppid := os.Getppid()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	c, err := startChild(cmd)
	if err != nil {
		tell(startFailed(argv[0], err))
		return 0
	}
	tell(watchReport{kind: reportStarted, pid: c.pid})
	orders := make(chan order)
	go func() {
		lines := make(chan string)
		go readLines(in, lines)
		for line := range lines {
			if o, err := parseOrder(line); err == nil {
				orders <- o
			}
		}
		orders <- order{kind: orderKill, why: "orphaned"} // locksmith died
	}()
	go func() {
		// A signal to the watchdog is its parent-death signal, or came to
		// every process of a service at once (systemd's stop, say): then
		// locksmith, alive, forwards it to CMD's group and keeps the grace.
		for range sigs {
			if os.Getppid() != ppid { // reparented: locksmith died
				orders <- order{kind: orderKill, why: "orphaned"}
				return
			}
		}
	}()
	schedule(c, d, grace, margin, orders, tell)
	return 0
}
