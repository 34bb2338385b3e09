package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// runServer starts a redis-server of the test's own, and returns it with
// the LOCKSMITH_URL of the single strategy over it.
func runServer(t *testing.T) (*redistest.Server, string) {
	t.Helper()
	redistest.RequireBinary(t)
	srv := redistest.Start(t, 1)[0]
	return srv, "LOCKSMITH_URL=single://" + srv.Addr
}

// send sends one command to srv and returns its reply as text.
func send(t *testing.T, srv *redistest.Server, args ...string) string {
	t.Helper()
	reply, err := srv.Command(ctx(t), args...)
	if err != nil {
		t.Fatalf("redis %q: %v", args, err)
	}
	return reply
}

// eventually polls cond until it holds, failing t after a generous bound:
// a hang detector, not a timing assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(hang / 2); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, hang/2)
		}
	}
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readFile returns the content of path, or "" if it cannot be read.
func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// pidIn waits for path to hold a pid, and returns it.
func pidIn(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, "a pid in "+path, func() bool {
		s := readFile(path)
		var err error
		pid, err = strconv.Atoi(strings.TrimSpace(s))
		return strings.HasSuffix(s, "\n") && err == nil
	})
	return pid
}

// gone reports whether the process pid has ended: it does not exist, or is
// a zombie that nobody reaped yet.
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) != nil
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(s[i+1:], " Z")
}

// waitGone waits for the process pid to end.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	eventually(t, what+" (pid "+strconv.Itoa(pid)+") ended", func() bool { return gone(pid) })
}

// start starts locksmith with env and args, and returns what waits for it.
func start(t *testing.T, env []string, args ...string) func() result {
	t.Helper()
	wait, _ := startSignalled(t, env, args...)
	return wait
}

// startSignalled starts locksmith with env and args, and returns what waits
// for it and what sends it a signal (see startProc).
func startSignalled(t *testing.T, env []string, args ...string) (func() result, func(syscall.Signal)) {
	t.Helper()
	p := startProc(t, env, args...)
	return p.wait, p.signal
}

// proc is a locksmith that a test started. Its output goes to files, not
// pipes: waiting for it then never waits for a process that outlived it
// and holds the pipe (such as a command that a test wants killed with it),
// and the test can read it while it runs.
type proc struct {
	t              *testing.T
	cmd            *exec.Cmd
	args           []string
	stdout, stderr string // the files of its output
	done           chan error
}

// startProc starts locksmith with env and args; the test's end kills it.
func startProc(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	p := &proc{t: t, args: args, stdout: filepath.Join(dir, "stdout"), stderr: filepath.Join(dir, "stderr"), done: make(chan error, 1)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = environ(env...)
	for _, f := range []struct {
		path string
		to   *io.Writer
	}{{p.stdout, &p.cmd.Stdout}, {p.stderr, &p.cmd.Stderr}} {
		file, err := os.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close() // locksmith has its own copy
		*f.to = file
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting locksmith: %v", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		err := <-p.done
		p.done <- err // for a wait after the clean-up
	})
	return p
}

// wait waits for the locksmith to exit, killing it (and failing the test)
// if it hangs.
func (p *proc) wait() result {
	p.t.Helper()
	var err error
	select {
	case err = <-p.done:
		p.done <- err // for the clean-up
	case <-time.After(hang):
		_ = p.cmd.Process.Kill()
		p.t.Fatalf("locksmith %s hung for %v\nstderr:\n%s", strings.Join(p.args, " "), hang, readFile(p.stderr))
	}
	r := result{code: p.cmd.ProcessState.ExitCode(), stdout: readFile(p.stdout), stderr: readFile(p.stderr)}
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		p.t.Fatalf("waiting for locksmith: %v", err)
	}
	return r
}

// signal sends sig to the locksmith process alone (not its group).
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("sending %v to locksmith: %v", sig, err)
	}
}

// hold makes another owner hold the lock name on srv for a minute.
func hold(t *testing.T, srv *redistest.Server, name string) {
	t.Helper()
	send(t, srv, "SET", name, "another-owner", "PX", "60000")
}

func TestRunExitCodes(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hold(t, srv, "busy")
	for _, tc := range []struct {
		name string
		env  string // LOCKSMITH_URL; env when empty
		args []string
		want int
	}{
		{"the command's status 0", "", []string{"run", "ok", "--", "true"}, 0},
		{"the command's status 3", "", []string{"run", "three", "--", "sh", "-c", "exit 3"}, 3},
		{"the command's status through -c", "", []string{"run", "shell", "-c", "exit 4"}, 4},
		{"not obtained with -n", "", []string{"run", "-n", "busy", "--", "true"}, exitNotObtained},
		{"not obtained with -n and -E", "", []string{"run", "-n", "-E", "9", "busy", "--", "true"}, 9},
		{"not obtained when -w runs out", "", []string{"run", "-w", "300ms", "busy", "--", "true"}, exitNotObtained},
		{"max runtime", "", []string{"run", "--max-runtime", "200ms", "slow", "--", "sleep", "1000"}, exitMaxRuntime},
		{"not executable", "", []string{"run", "noexec", "--", notExecutable}, exitCannotExec},
		{"not found", "", []string{"run", "nosuch", "--", "no-such-command-here"}, exitNotFound},
		{"not found, by path", "", []string{"run", "nosuch", "--", filepath.Join(dir, "nosuch")}, exitNotFound},
		{"killed by signal 15", "", []string{"run", "killed", "--", "sh", "-c", "kill -TERM $$"}, exitSignal + 15},
		{"usage: no --", "", []string{"run", "x", "true"}, exitUsage},
		{"usage: no command", "", []string{"run", "x", "--"}, exitUsage},
		{"usage: no name", "", []string{"run", "--", "true"}, exitUsage},
		{"usage: -c and a command", "", []string{"run", "x", "-c", "true", "--", "true"}, exitUsage},
		{"usage: -n and -w", "", []string{"run", "-n", "-w", "1s", "x", "--", "true"}, exitUsage},
		{"usage: -E out of range", "", []string{"run", "-E", "256", "x", "--", "true"}, exitUsage},
		{"usage: TTL too short for the grace", "", []string{"run", "--ttl", "10s", "--kill-grace", "5s", "x", "--", "true"}, exitUsage},
		{"a TTL of 10s with the default grace, scaled to it", "", []string{"run", "--ttl", "10s", "ten", "--", "true"}, 0},
		{"a TTL of 3s with the default grace, scaled to it", "", []string{"run", "--ttl", "3s", "three-s", "--", "true"}, 0},
		{"usage: TTL too short for any grace", "", []string{"run", "--ttl", "250ms", "x", "--", "true"}, exitUsage},
		{"usage: refresh not shorter than the TTL", "", []string{"run", "--ttl", "10s", "--refresh", "10s", "x", "--", "true"}, exitUsage},
		{"bad config", "LOCKSMITH_URL=nosuch://127.0.0.1:1", []string{"run", "x", "--", "true"}, exitConfig},
		{"Redis unreachable", "LOCKSMITH_URL=single://" + redistest.ClosedAddr(t), []string{"run", "x", "--", "true"}, exitUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := env
			if tc.env != "" {
				e = tc.env
			}
			r := locksmith(t, []string{e}, tc.args...)
			if r.code != tc.want {
				t.Errorf("locksmith %s: got %s\nwant exit %d", strings.Join(tc.args, " "), r, tc.want)
			}
		})
	}
	t.Run("lost", func(t *testing.T) {
		dir := t.TempDir()
		wait := start(t, []string{env}, "run", "--ttl", "1s", "--kill-grace", "200ms", "lost", "--",
			"sh", "-c", `touch "$0"; sleep 1000`, filepath.Join(dir, "started"))
		eventually(t, "the command started", func() bool { return exists(filepath.Join(dir, "started")) })
		hold(t, srv, "lost") // taken: the next refresh finds it so
		if r := wait(); r.code != exitLost {
			t.Errorf("got %s\nwant exit %d", r, exitLost)
		}
	})
	t.Run("the lock is released after each", func(t *testing.T) {
		for _, name := range []string{"ok", "three", "shell", "slow", "noexec", "nosuch", "killed"} {
			if got := send(t, srv, "EXISTS", name); got != "0" {
				t.Errorf("EXISTS %s after its run: got %s, want 0", name, got)
			}
		}
	})
}

func TestRunKillsTheGroup(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	// The command leaves a grandchild, whose pid it writes first.
	grandchild := `sleep 1000 & echo $! > "$0"; `
	for i, tc := range []struct {
		name   string
		args   []string
		script string
		act    func(t *testing.T, lock string, signal func(syscall.Signal))
		want   int
	}{
		{"when the command exits", nil, grandchild + "exit 0", nil, 0},
		{"at max runtime", []string{"--max-runtime", "300ms"}, grandchild + "wait", nil, exitMaxRuntime},
		{"on a forwarded SIGTERM", nil, grandchild + "wait", func(t *testing.T, _ string, signal func(syscall.Signal)) { signal(syscall.SIGTERM) }, exitSignal + 15},
		{"on loss", []string{"--ttl", "1s", "--kill-grace", "200ms"}, grandchild + "wait", func(t *testing.T, lock string, _ func(syscall.Signal)) { hold(t, srv, lock) }, exitLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pid")
			lock := fmt.Sprintf("group-%d", i)
			args := append(append([]string{"run"}, tc.args...), lock, "--", "sh", "-c", tc.script, pidfile)
			wait, signal := startSignalled(t, []string{env}, args...)
			pid := pidIn(t, pidfile)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // if it ran on
			if tc.act != nil {
				tc.act(t, lock, signal)
			}
			if r := wait(); r.code != tc.want {
				t.Errorf("got %s\nwant exit %d", r, tc.want)
			}
			// SIGKILL ends the grandchild when the kernel next runs it, which
			// on a loaded machine can be after locksmith exited.
			waitGone(t, pid, "the grandchild, killed with its group")
		})
	}
}

func TestRunWaiting(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	for i, tc := range []struct {
		name string
		args []string
		sig  syscall.Signal // sent once locksmith queued; 0: none
		want int
	}{
		{"SIGINT gives up", nil, syscall.SIGINT, exitSignal + 2},
		{"SIGTERM gives up", nil, syscall.SIGTERM, exitSignal + 15},
		{"SIGHUP gives up", nil, syscall.SIGHUP, exitSignal + 1},
		{"-w running out gives up", []string{"-w", "500ms"}, 0, exitNotObtained},
	} {
		t.Run(tc.name+", and leaves the queue", func(t *testing.T) {
			lock := fmt.Sprintf("waited-%d", i)
			queue := "{" + lock + "}:q"
			hold(t, srv, lock)
			wait, signal := startSignalled(t, []string{env}, append(append([]string{"run"}, tc.args...), lock, "--", "true")...)
			eventually(t, "locksmith queued", func() bool { return send(t, srv, "ZCARD", queue) == "1" })
			if tc.sig != 0 {
				signal(tc.sig)
			}
			if r := wait(); r.code != tc.want {
				t.Errorf("got %s\nwant exit %d", r, tc.want)
			}
			if got := send(t, srv, "ZCARD", queue); got != "0" {
				t.Errorf("the lock's queue once locksmith gave up: got %s waiters, want 0", got)
			}
		})
	}
	t.Run("a release wakes the waiter", func(t *testing.T) {
		dir := t.TempDir()
		first := start(t, []string{env}, "run", "turns", "--", "sh", "-c", `touch "$0"; while [ ! -e "$0.done" ]; do sleep 0.05; done`, filepath.Join(dir, "first"))
		eventually(t, "the first command started", func() bool { return exists(filepath.Join(dir, "first")) })
		second := start(t, []string{env}, "--json", "run", "turns", "--", "true")
		eventually(t, "the second locksmith queued", func() bool { return send(t, srv, "ZCARD", "{turns}:q") == "1" })
		if err := os.WriteFile(filepath.Join(dir, "first.done"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := first(); r.code != 0 {
			t.Errorf("the first: got %s\nwant exit 0", r)
		}
		if r := second(); r.code != 0 {
			t.Errorf("the second: got %s\nwant exit 0", r)
		}
	})
}

func TestRunSignals(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	_, env := runServer(t)
	// The command traps signals, and writes their names to a file.
	trap := `trap 'echo USR1 >> "$0"' USR1; trap 'echo TERM >> "$0"; exit 0' TERM; trap 'echo INT >> "$0"' INT; ` +
		`echo ready >> "$0"; while :; do sleep 0.05; done`
	t.Run("SIGUSR1 and SIGTERM reach the command", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "log")
		wait, signal := startSignalled(t, []string{env}, "run", "forwarded", "--", "sh", "-c", trap, log)
		eventually(t, "the command ready", func() bool { return readFile(log) == "ready\n" })
		signal(syscall.SIGUSR1)
		eventually(t, "the command got SIGUSR1", func() bool { return readFile(log) == "ready\nUSR1\n" })
		signal(syscall.SIGTERM)
		if r := wait(); r.code != 0 {
			t.Errorf("got %s\nwant exit 0, the command's own", r)
		}
		if got, want := readFile(log), "ready\nUSR1\nTERM\n"; got != want {
			t.Errorf("the command's log: got %q, want %q", got, want)
		}
	})
	t.Run("a second SIGINT kills at once", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "log")
		wait, signal := startSignalled(t, []string{env}, "run", "--kill-grace", "1h", "--ttl", "4h", "twice", "--", "sh", "-c", trap, log)
		eventually(t, "the command ready", func() bool { return readFile(log) == "ready\n" })
		signal(syscall.SIGINT)
		eventually(t, "the command got SIGINT", func() bool { return readFile(log) == "ready\nINT\n" })
		signal(syscall.SIGINT)
		if r := wait(); r.code != exitSignal+9 {
			t.Errorf("got %s\nwant exit %d (SIGKILL)", r, exitSignal+9)
		}
	})
	t.Run("SIGKILL after the grace when SIGTERM is ignored", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "log")
		ignore := `trap 'echo TERM >> "$0"' TERM; echo ready >> "$0"; while :; do sleep 0.05; done`
		wait, signal := startSignalled(t, []string{env}, "run", "--kill-grace", "300ms", "graced", "--", "sh", "-c", ignore, log)
		eventually(t, "the command ready", func() bool { return readFile(log) == "ready\n" })
		signal(syscall.SIGTERM)
		if r := wait(); r.code != exitSignal+9 {
			t.Errorf("got %s\nwant exit %d (SIGKILL)", r, exitSignal+9)
		}
		if got, want := readFile(log), "ready\nTERM\n"; got != want {
			t.Errorf("the command's log: got %q, want %q", got, want)
		}
	})
}

func TestRunLocksmithKilled(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	_, env := runServer(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	wait, signal := startSignalled(t, []string{env}, "run", "orphan", "--", "sh", "-c", `echo $$ > "$0"; exec sleep 1000`, pidfile)
	pid := pidIn(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // if it ran on
	signal(syscall.SIGKILL)
	if r := wait(); r.code != -1 {
		t.Errorf("got %s\nwant locksmith killed", r)
	}
	waitGone(t, pid, "the command, once locksmith was killed")
}

// event is a line of run's --json events.
type event struct {
	Time       time.Time `json:"time"`
	Event      string    `json:"event"`
	Signal     string    `json:"signal"`
	ValidUntil time.Time `json:"valid_until"`
}

// parseEvents reads the --json events of stderr.
func parseEvents(t *testing.T, stderr string) []event {
	t.Helper()
	var evs []event
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "{") {
			continue
		}
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs
}

func TestRunPausedRedis(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	dir := t.TempDir()
	term := filepath.Join(dir, "term")
	result := filepath.Join(dir, "result.json")
	// The command records when SIGTERM came, and ignores it.
	script := `trap 'date +%s%N > "$0"' TERM; touch "$0.ready"; while :; do sleep 0.05; done`
	wait := start(t, []string{env}, "--json", "run", "--ttl", "3s", "--kill-grace", "500ms", "--result-file", result,
		"paused", "--", "sh", "-c", script, term)
	eventually(t, "the command started", func() bool { return exists(term + ".ready") })
	expiry := pauseClients(t, srv, "paused")
	srv.Pause()
	defer srv.Resume()
	r := wait()
	if r.code != exitLost {
		t.Fatalf("got %s\nwant exit %d", r, exitLost)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(readFile(term)), 10, 64)
	if err != nil {
		t.Fatalf("the command's record of SIGTERM: %v (got %q)", err, readFile(term))
	}
	termAt := time.Unix(0, ns)
	var killAt, deadline time.Time
	for _, e := range parseEvents(t, r.stderr) {
		switch {
		case e.Event == "signal" && e.Signal == "SIGKILL":
			killAt = e.Time
		case e.Event == "lost":
			deadline = e.ValidUntil
		}
	}
	if killAt.IsZero() || deadline.IsZero() {
		t.Fatalf("no SIGKILL or lost event in\n%s", r.stderr)
	}
	if !termAt.Before(killAt) || !killAt.Before(expiry) {
		t.Errorf("SIGTERM at %v, SIGKILL at %v, the key's expiry at %v or later: want them in this order",
			termAt.Format(time.StampMicro), killAt.Format(time.StampMicro), expiry.Format(time.StampMicro))
	}
	t.Logf("validity deadline D %s; SIGTERM D%+v, SIGKILL D%+v; the key's expiry D%+v or later",
		deadline.Format(time.StampMicro), termAt.Sub(deadline), killAt.Sub(deadline), expiry.Sub(deadline))
	var res runResult
	if err := json.Unmarshal([]byte(readFile(result)), &res); err != nil {
		t.Fatalf("--result-file: %v", err)
	}
	if res.Outcome != "lost" || res.LossReason != "unconfirmed" || res.Signal != "SIGKILL" || res.ExitCode != exitLost {
		t.Errorf("--result-file: got %+v, want outcome lost, loss_reason unconfirmed, signal SIGKILL, exit_code 79", res)
	}
}

// pauseClients reads key's PTTL and pauses every client of srv (CLIENT
// PAUSE ALL) in one transaction, so that no refresh lands between the two,
// and returns the earliest time the key can expire: the PTTL after the
// transaction was sent. (Read before a pause of its own, a refresh landing
// in between would move the key's expiry, and the lock's validity with it,
// past the time the test holds it to.)
func pauseClients(t *testing.T, srv *redistest.Server, key string) time.Time {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	var pttl *redis.DurationCmd
	sent := time.Now()
	if _, err := c.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
		pttl = p.PTTL(ctx(t), key)
		p.Do(ctx(t), "CLIENT", "PAUSE", hang.Milliseconds(), "ALL")
		return nil
	}); err != nil || pttl.Val() <= 0 {
		t.Fatalf("PTTL %s and CLIENT PAUSE: got %v, %v, want a positive TTL", key, pttl.Val(), err)
	}
	return sent.Add(pttl.Val())
}

func TestRunNeverOverlaps(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	_, env := runServer(t)
	dir := t.TempDir()
	// Each command claims a directory that only one can create, and gives
	// it back: mkdir fails for a second command inside.
	script := `mkdir "$0/held" || exit 99; sleep 0.2; rmdir "$0/held"`
	var waits []func() result
	for range 3 {
		waits = append(waits, start(t, []string{env}, "run", "shared", "--", "sh", "-c", script, dir))
	}
	for i, wait := range waits {
		if r := wait(); r.code != 0 {
			t.Errorf("run %d: got %s\nwant exit 0 (99: two commands held the lock at once)", i, r)
		}
	}
}

func TestRunEnvironment(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env")
	wait := start(t, []string{env, "LOCKSMITH_FENCE=stale"}, "run", "--ttl", "20s", "envy", "--",
		"sh", "-c", `env > "$0.tmp"; mv "$0.tmp" "$0"; while [ ! -e "$0.done" ]; do sleep 0.05; done`, envFile)
	eventually(t, "the command's environment", func() bool { return exists(envFile) })
	value := send(t, srv, "GET", "envy")
	fence := send(t, srv, "GET", "{envy}:fence")
	if err := os.WriteFile(envFile+".done", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := wait(); r.code != 0 {
		t.Fatalf("got %s\nwant exit 0", r)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(readFile(envFile), "\n") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			got[k] = v
		}
	}
	for k, want := range map[string]string{"LOCKSMITH_LOCK": "envy", "LOCKSMITH_FENCE": fence, "LOCKSMITH_HELD": "1", "LOCKSMITH_LEASE_MS": "20000"} {
		if got[k] != want {
			t.Errorf("%s: got %q, want %q", k, got[k], want)
		}
	}
	token := value[:22] // the stored value is the token, then the metadata
	if strings.Contains(readFile(envFile), token) {
		t.Errorf("the command's environment holds the lock's token")
	}
	t.Run("no fence where the strategy issues none", func(t *testing.T) {
		legacy := "LOCKSMITH_URL=setnx-getset://" + srv.Addr
		r := locksmith(t, []string{legacy, "LOCKSMITH_FENCE=stale"}, "run", "legacy", "--", "sh", "-c", `echo "fence=${LOCKSMITH_FENCE-unset} held=$LOCKSMITH_HELD"`)
		if want := "fence=unset held=1\n"; r.code != 0 || r.stdout != want {
			t.Errorf("got %s\nwant exit 0 and stdout %q", r, want)
		}
	})
}

func TestRunResultFile(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	read := func(t *testing.T, path string) (runResult, string) {
		t.Helper()
		text := readFile(path)
		var res runResult
		if err := json.Unmarshal([]byte(text), &res); err != nil {
			t.Fatalf("--result-file %q: %v", text, err)
		}
		return res, text
	}
	t.Run("completed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "result.json")
		if r := locksmith(t, []string{env}, "run", "--result-file", path, "done", "--", "sh", "-c", "exit 5"); r.code != 5 {
			t.Fatalf("got %s\nwant exit 5", r)
		}
		res, text := read(t, path)
		if res.Outcome != "completed" || res.ExitCode != 5 || res.ChildStatus == nil || *res.ChildStatus != 5 ||
			res.Fence == nil || !res.Released || res.Lock != "done" || res.LostAt != nil {
			t.Errorf("--result-file: got %s\nwant outcome completed, exit_code 5, child_status 5, a fence, released", text)
		}
	})
	// running starts locksmith run on name, whose command runs until it is
	// stopped, and returns the path of its --result-file and what waits for
	// it, once the command started.
	running := func(t *testing.T, name string) (string, func() result) {
		t.Helper()
		dir := t.TempDir()
		path := filepath.Join(dir, "result.json")
		wait := start(t, []string{env}, "run", "--result-file", path, "--ttl", "1s", "--kill-grace", "200ms", name, "--",
			"sh", "-c", `touch "$0"; sleep 1000`, filepath.Join(dir, "started"))
		eventually(t, "the command started", func() bool { return exists(filepath.Join(dir, "started")) })
		return path, wait
	}
	t.Run("lost", func(t *testing.T) {
		path, wait := running(t, "taken")
		token := send(t, srv, "GET", "taken")[:22]
		hold(t, srv, "taken")
		if r := wait(); r.code != exitLost {
			t.Fatalf("got %s\nwant exit %d", r, exitLost)
		}
		res, text := read(t, path)
		if res.Outcome != "lost" || res.ExitCode != exitLost || res.LossReason != "taken" || res.Signal != "SIGTERM" ||
			res.LostAt == nil || res.ValidUntil == nil || res.Released {
			t.Errorf("--result-file: got %s\nwant outcome lost, exit_code 79, loss_reason taken, signal SIGTERM, lost_at, valid_until, not released", text)
		}
		if strings.Contains(text, token) {
			t.Errorf("--result-file holds the token")
		}
	})
	t.Run("broken", func(t *testing.T) {
		path, wait := running(t, "broken")
		if r := locksmith(t, []string{env}, "break", "broken", "--force"); r.code != 0 {
			t.Fatalf("break: got %s\nwant exit 0", r)
		}
		if r := wait(); r.code != exitLost {
			t.Fatalf("got %s\nwant exit %d", r, exitLost)
		}
		if res, text := read(t, path); res.Outcome != "lost" || res.LossReason != "broken" || res.Signal != "SIGTERM" {
			t.Errorf("--result-file: got %s\nwant outcome lost, loss_reason broken, signal SIGTERM", text)
		}
	})
	t.Run("not obtained", func(t *testing.T) {
		hold(t, srv, "held")
		path := filepath.Join(t.TempDir(), "result.json")
		if r := locksmith(t, []string{env}, "run", "-n", "--result-file", path, "held", "--", "true"); r.code != exitNotObtained {
			t.Fatalf("got %s\nwant exit %d", r, exitNotObtained)
		}
		if res, text := read(t, path); res.Outcome != "not_obtained" || res.ExitCode != exitNotObtained || res.ChildStatus != nil {
			t.Errorf("--result-file: got %s\nwant outcome not_obtained, exit_code 75, no child_status", text)
		}
	})
}
