//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// The tests of elect that need Linux: the watchdog, and /proc to tell a
// stopped process.

// offset formats d, an offset from a deadline, with its sign.
func offset(d time.Duration) string {
	if d = d.Round(time.Millisecond); d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// elector returns an Elector of the library on name, over srv, for the
// test to campaign with.
func elector(t *testing.T, srv *redistest.Server, name string, opts ...elect.Option) *elect.Elector {
	t.Helper()
	c, err := config.ParseURL("single://" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	l, err := config.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	e, err := elect.New(l, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// stopped reports whether the process pid is stopped (by SIGSTOP).
func stopped(pid int) bool {
	stat := readFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && strings.HasPrefix(stat[i+1:], " T")
}

func TestElectLeaderStopped(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	// The leader's command writes the time every 20ms, and records SIGTERM,
	// which it ignores: only SIGKILL ends it.
	leader := startProc(t, []string{env}, "--json", "elect", "--ttl", "3s", "stopped", "--", "sh", "-c",
		`trap 'date +%s%N > "$0.term"' TERM; echo $$ > "$0.pid"; while :; do date +%s%N >> "$0"; sleep 0.02; done`, a)
	cmdPID := pidIn(t, a+".pid")
	t.Cleanup(func() { _ = syscall.Kill(cmdPID, syscall.SIGKILL) }) // if it ran on
	next := startProc(t, []string{env}, "elect", "--ttl", "3s", "stopped", "--", "sh", "-c",
		`date +%s%N > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 1000`, b)
	queued(t, srv, "stopped", 1)

	stoppedAt := time.Now()
	leader.signal(syscall.SIGSTOP)
	eventually(t, "the leader's locksmith stopped", func() bool { return stopped(leader.cmd.Process.Pid) })
	t.Cleanup(func() { _ = syscall.Kill(leader.cmd.Process.Pid, syscall.SIGCONT) })
	// When was the old command gone? Seen from here, a little late.
	goneAt := make(chan time.Time, 1)
	go func() {
		for !gone(cmdPID) {
			time.Sleep(2 * time.Millisecond)
		}
		goneAt <- time.Now()
	}()
	eventually(t, "the next leader's command started", func() bool { return exists(b) })
	started := nanos(t, readFile(b))
	var died time.Time
	select {
	case died = <-goneAt:
	default:
		t.Fatalf("the stopped leader's command still runs while the next leader's does")
	}
	writes := lines(a)
	last := nanos(t, writes[len(writes)-1])
	t.Run("the stopped leader's command got SIGTERM", func(t *testing.T) {
		if !exists(a + ".term") {
			t.Errorf("no SIGTERM recorded by the old command: want SIGTERM before SIGKILL")
		}
	})
	t.Run("the stopped leader's command is killed before the next leader's starts", func(t *testing.T) {
		if !last.Before(started) || !died.Before(started) {
			t.Errorf("the old command last wrote at %v and was seen gone at %v, the new one started at %v: want both before it",
				last.Format(time.StampMicro), died.Format(time.StampMicro), started.Format(time.StampMicro))
		}
	})
	leader.signal(syscall.SIGCONT)
	r := leader.wait()
	t.Run("resumed, the stopped leader exits 79", func(t *testing.T) {
		if r.code != exitLost {
			t.Errorf("got %s\nwant exit %d", r, exitLost)
		}
	})
	t.Run("resumed, the stopped leader runs no command", func(t *testing.T) {
		if ls := lines(a); len(ls) != len(writes) {
			t.Errorf("the old command's writes: got %d once resumed, want the %d of before", len(ls), len(writes))
		}
	})
	next.signal(syscall.SIGTERM)
	if r := next.wait(); r.code != exitSignal+15 {
		t.Errorf("the next leader, sent SIGTERM: got %s\nwant exit %d", r, exitSignal+15)
	}
	var deadline time.Time // D, the stopped leader's last validity deadline, which its lost event gives
	for _, e := range parseEvents(t, r.stderr) {
		if e.Event == "lost" {
			deadline = e.ValidUntil
		}
	}
	if deadline.IsZero() {
		t.Fatalf("no lost event in\n%s", r.stderr)
	}
	term := nanos(t, readFile(a+".term"))
	t.Logf("SIGSTOP of the leader's locksmith at D%s; its watchdog's SIGTERM at D%s; its command's last write at D%s, "+
		"seen gone at D%s; the next leader's command started at D%s, %v after the old one was seen gone, %v after the SIGSTOP (--ttl 3s, kill-grace 500ms)",
		offset(stoppedAt.Sub(deadline)), offset(term.Sub(deadline)), offset(last.Sub(deadline)), offset(died.Sub(deadline)),
		offset(started.Sub(deadline)), started.Sub(died).Round(time.Millisecond), started.Sub(stoppedAt).Round(time.Millisecond))
}

func TestElectListen(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	ctx := ctx(t)
	observer := startProc(t, []string{env}, "elect", "-l", "--interval", "20ms", "watched")
	out := observer.stdout
	n := 0 // the lines seen so far
	next := func(t *testing.T, want string) {
		t.Helper()
		line, at := waitLine(t, out, n, "")
		if !strings.HasPrefix(line, want) {
			t.Errorf("line %d: got %q, want %q...", at+1, line, want)
		}
		n = at + 1
	}
	e := elector(t, srv, "watched", elect.WithIdentity("test-1"))
	var term *elect.Term
	t.Run("a key never elected: vacant term=0", func(t *testing.T) {
		next(t, "vacant term=0")
	})
	t.Run("an election: elected, with the leader and its TTL", func(t *testing.T) {
		var err error
		if term, err = e.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		next(t, fmt.Sprintf("elected term=%d leader=test-1 ttl_ms=", term.Number()))
	})
	t.Run("a proclamation: proclaimed, with the new identity", func(t *testing.T) {
		if err := term.Proclaim(ctx, "test-1 addr=10.0.0.7"); err != nil {
			t.Fatal(err)
		}
		next(t, fmt.Sprintf(`proclaimed term=%d leader="test-1 addr=10.0.0.7"`, term.Number()))
	})
	t.Run("a resignation: vacant, with the last term", func(t *testing.T) {
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		next(t, fmt.Sprintf("vacant term=%d", term.Number()))
	})
	t.Run("terms unseen: gap, with their count, then the new leader", func(t *testing.T) {
		// Stopped, the observer reads nothing while three terms come and go.
		observer.signal(syscall.SIGSTOP)
		eventually(t, "the observer stopped", func() bool { return stopped(observer.cmd.Process.Pid) })
		for range 3 {
			passing, err := e.Campaign(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := passing.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if term, err = e.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		observer.signal(syscall.SIGCONT)
		next(t, "gap missed=3")
		next(t, fmt.Sprintf("elected term=%d leader=test-1 ttl_ms=", term.Number()))
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		next(t, fmt.Sprintf("vacant term=%d", term.Number()))
	})
	t.Run("interrupted: exit 130", func(t *testing.T) {
		observer.signal(syscall.SIGINT)
		if r := observer.wait(); r.code != exitSignal+2 {
			t.Errorf("got %s\nwant exit %d", r, exitSignal+2)
		}
	})
}

// watchdog is a locksmith __watch that a test started, and speaks to.
type watchdog struct {
	p       *proc
	orders  *os.File
	reports chan string
}

// startWatchdog starts locksmith __watch with the grace, margin and
// deadline d given, over the command argv.
func startWatchdog(t *testing.T, grace, margin time.Duration, d int64, argv ...string) *watchdog {
	t.Helper()
	ordersR, ordersW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	reportsR, reportsW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, done: make(chan error, 1), stdout: filepath.Join(t.TempDir(), "out")}
	p.stderr = p.stdout
	p.cmd = exec.Command(bin, append([]string{watchCommand, strconv.FormatInt(int64(grace), 10), strconv.FormatInt(int64(margin), 10),
		strconv.FormatInt(d, 10), "--"}, argv...)...)
	p.cmd.Env = environ()
	p.cmd.ExtraFiles = []*os.File{ordersR, reportsW}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ordersR.Close()
	reportsW.Close()
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		ordersW.Close()
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	w := &watchdog{p: p, orders: ordersW, reports: make(chan string, 64)}
	go func() {
		defer close(w.reports)
		s := bufio.NewScanner(reportsR)
		for s.Scan() {
			w.reports <- s.Text()
		}
	}()
	return w
}

// order sends o to the watchdog.
func (w *watchdog) order(o order) {
	w.p.t.Helper()
	if _, err := w.orders.WriteString(o.encode()); err != nil {
		w.p.t.Fatal(err)
	}
}

// next returns the watchdog's next report, and when it came.
func (w *watchdog) next() (string, time.Time) {
	w.p.t.Helper()
	select {
	case r, ok := <-w.reports:
		if !ok {
			w.p.t.Fatalf("the watchdog ended its reports")
		}
		return r, time.Now()
	case <-time.After(hang):
		w.p.t.Fatalf("no report from the watchdog within %v", hang)
	}
	return "", time.Time{}
}

// expect fails t unless the watchdog's next reports are want, in order.
func (w *watchdog) expect(t *testing.T, want ...string) []time.Time {
	t.Helper()
	var at []time.Time
	for _, want := range want {
		got, when := w.next()
		if got != want {
			t.Fatalf("the watchdog's report: got %q, want %q", got, want)
		}
		at = append(at, when)
	}
	return at
}

func TestElectWatchdog(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	const grace, margin = 300 * time.Millisecond, 100 * time.Millisecond
	// The command records SIGTERM, ignores it, and exits 7 on SIGUSR1;
	// it touches its file ($0) once its traps are set.
	script := `trap 'date +%s%N > "$0.term"' TERM; trap 'exit 7' USR1; touch "$0"; while :; do sleep 0.01; done`
	started := func(t *testing.T, w *watchdog, f string) {
		t.Helper()
		if r, _ := w.next(); !strings.HasPrefix(r, "started ") {
			t.Fatalf("the watchdog's first report: got %q, want started PID", r)
		}
		eventually(t, "the command's traps set", func() bool { return exists(f) })
	}
	t.Run("SIGTERM at D - grace - margin, SIGKILL at D - margin", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "cmd")
		d := monoNow() + int64(2*time.Second)
		wall := time.Now().Add(time.Duration(d - monoNow()))
		w := startWatchdog(t, grace, margin, d, "sh", "-c", script, f)
		started(t, w, f)
		at := w.expect(t, "signal 15 deadline", "signal 9 validity", "exited 0 9")
		term := nanos(t, readFile(f+".term"))
		t.Logf("D - grace - margin = D-400ms: SIGTERM at D%s; D - margin = D-100ms: SIGKILL reported at D%s",
			offset(term.Sub(wall)), offset(at[1].Sub(wall)))
	})
	t.Run("a later deadline moves the schedule", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "cmd")
		d := monoNow() + int64(2*time.Second)
		w := startWatchdog(t, grace, margin, d, "sh", "-c", script, f)
		started(t, w, f)
		w.order(order{kind: orderDeadline, at: monoNow() + int64(time.Hour)})
		for monoNow() < d+int64(200*time.Millisecond) { // past the first deadline
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case r := <-w.reports:
			t.Fatalf("the watchdog's report after a later deadline: got %q, want none before the later deadline", r)
		default:
		}
		if exists(f + ".term") {
			t.Errorf("SIGTERM came after a later deadline: want none before it")
		}
		w.order(order{kind: orderSignal, sig: syscall.SIGUSR1})
		w.expect(t, "signal 10 forwarded", "exited 7 0")
	})
	t.Run("stop: SIGTERM at once, SIGKILL after the grace", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "cmd")
		w := startWatchdog(t, grace, margin, monoNow()+int64(time.Hour), "sh", "-c", script, f)
		started(t, w, f)
		w.order(order{kind: orderStop, why: "lost"})
		at := w.expect(t, "signal 15 lost", "signal 9 kill-grace", "exited 0 9")
		if !exists(f + ".term") {
			t.Errorf("no SIGTERM recorded by the command: want SIGTERM before SIGKILL")
		}
		t.Logf("SIGKILL reported %v after SIGTERM, for a grace of %v", at[1].Sub(at[0]).Round(time.Millisecond), grace)
	})
	t.Run("the orders' end (locksmith died) kills at once", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "cmd")
		w := startWatchdog(t, grace, margin, monoNow()+int64(time.Hour), "sh", "-c", script, f)
		started(t, w, f)
		w.orders.Close()
		w.expect(t, "signal 9 orphaned", "exited 0 9")
		if r := w.p.wait(); r.code != 0 {
			t.Errorf("the watchdog: got %s\nwant exit 0", r)
		}
	})
	t.Run("a command not found: failed 127", func(t *testing.T) {
		w := startWatchdog(t, grace, margin, monoNow()+int64(time.Hour), "no-such-command-here")
		if r, _ := w.next(); !strings.HasPrefix(r, "failed 127 cannot run no-such-command-here") {
			t.Errorf("the watchdog's report: got %q, want failed 127 cannot run no-such-command-here...", r)
		}
	})
}

// TestElectInProcessSchedule: where there is no watchdog (elsewhere than
// on Linux), the same schedule runs within locksmith.
func TestElectInProcessSchedule(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	f := filepath.Join(t.TempDir(), "cmd")
	script := `trap 'date +%s%N > "$0.term"' TERM; while :; do sleep 0.01; done`
	d := time.Now().Add(time.Second)
	g, err := startInProcess([]string{"sh", "-c", script, f}, environ(), nil, nil, nil, d, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for r := range g.reports {
		got = append(got, strings.TrimSuffix(r.encode(), "\n"))
	}
	g.close()
	if len(got) != 4 || !strings.HasPrefix(got[0], "started ") ||
		strings.Join(got[1:], "; ") != "signal 15 deadline; signal 9 validity; exited 0 9" {
		t.Errorf("the reports: got %q, want started PID, signal 15 deadline, signal 9 validity, exited 0 9", got)
	}
	t.Logf("D - grace - margin = D-400ms: SIGTERM at D%s", offset(nanos(t, readFile(f+".term")).Sub(d)))
}
