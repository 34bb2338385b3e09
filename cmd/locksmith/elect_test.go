package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// lines returns the lines of the file path, complete ones only.
func lines(path string) []string {
	s := readFile(path)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.Split(s[:i], "\n")
	}
	return nil
}

// waitLine waits for a line of the file path that starts with prefix, after
// the first skip lines, and returns it and its index.
func waitLine(t *testing.T, path string, skip int, prefix string) (string, int) {
	t.Helper()
	var line string
	var at int
	eventually(t, fmt.Sprintf("a line %q in %s", prefix, filepath.Base(path)), func() bool {
		ls := lines(path)
		for i := skip; i < len(ls); i++ {
			if strings.HasPrefix(ls[i], prefix) {
				line, at = ls[i], i
				return true
			}
		}
		return false
	})
	return line, at
}

// nanos reads a time written by date +%s%N.
func nanos(t *testing.T, s string) time.Time {
	t.Helper()
	ns, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		t.Fatalf("a time from date +%%s%%N: %v (got %q)", err, s)
	}
	return time.Unix(0, ns)
}

// queued waits until n candidates wait in the queue of the election name.
func queued(t *testing.T, srv *redistest.Server, name string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d candidates queued on %s", n, name), func() bool {
		return send(t, srv, "ZCARD", "{"+name+"}:q") == strconv.Itoa(n)
	})
}

func TestElectExitCodes(t *testing.T) {
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
		{"the command's status 0", "", []string{"elect", "ok", "--", "true"}, 0},
		{"the command's status 3", "", []string{"elect", "three", "--", "sh", "-c", "exit 3"}, 3},
		{"the command killed by signal 15", "", []string{"elect", "killed", "--", "sh", "-c", "kill -TERM $$"}, exitSignal + 15},
		{"not elected with -n", "", []string{"elect", "-n", "busy", "--", "true"}, exitNotObtained},
		{"not elected when -w runs out", "", []string{"elect", "-w", "300ms", "busy", "--", "true"}, exitNotObtained},
		{"not executable", "", []string{"elect", "noexec", "--", notExecutable}, exitCannotExec},
		{"not found", "", []string{"elect", "nosuch", "--", "no-such-command-here"}, exitNotFound},
		{"usage: no NAME", "", []string{"elect", "--", "true"}, exitUsage},
		{"usage: two NAMEs", "", []string{"elect", "a", "b", "--", "true"}, exitUsage},
		{"usage: -- and no command", "", []string{"elect", "x", "--"}, exitUsage},
		{"usage: --loop without a command", "", []string{"elect", "--loop", "x"}, exitUsage},
		{"usage: -l with a command", "", []string{"elect", "-l", "x", "--", "true"}, exitUsage},
		{"usage: -n and -w", "", []string{"elect", "-n", "-w", "1s", "x", "--", "true"}, exitUsage},
		{"usage: a TTL too short for the grace", "", []string{"elect", "--ttl", "1s", "--kill-grace", "500ms", "x", "--", "true"}, exitUsage},
		{"usage: a TTL too short for any grace", "", []string{"elect", "--ttl", "250ms", "x", "--", "true"}, exitUsage},
		{"bad config", "LOCKSMITH_URL=nosuch://127.0.0.1:1", []string{"elect", "x", "--", "true"}, exitConfig},
		{"Redis unreachable", "LOCKSMITH_URL=single://" + redistest.ClosedAddr(t), []string{"elect", "x", "--", "true"}, exitUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := env
			if tc.env != "" {
				e = tc.env
			}
			if r := locksmith(t, []string{e}, tc.args...); r.code != tc.want {
				t.Errorf("locksmith %s: got %s\nwant exit %d", strings.Join(tc.args, " "), r, tc.want)
			}
		})
	}
	t.Run("a redlock configuration is refused, saying why", func(t *testing.T) {
		r := locksmith(t, []string{"LOCKSMITH_URL=redlock://" + srv.Addr}, "elect", "r", "--", "true")
		if want := "issues no fencing tokens, which number the terms: use the single strategy"; r.code != exitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("got %s\nwant exit %d and %q", r, exitUsage, want)
		}
	})
	t.Run("-n names the leader", func(t *testing.T) {
		p := startProc(t, []string{env}, "elect", "--identity", "web-3", "led", "--", "sleep", "1000")
		eventually(t, "web-3 leads", func() bool { return strings.HasSuffix(send(t, srv, "GET", "led"), "web-3") })
		r := locksmith(t, []string{env}, "elect", "-n", "led", "--", "true")
		if want := `leadership of "led" is held by web-3`; r.code != exitNotObtained || !strings.Contains(r.stderr, want) {
			t.Errorf("got %s\nwant exit %d and %q", r, exitNotObtained, want)
		}
		p.signal(syscall.SIGTERM)
		if r := p.wait(); r.code != exitSignal+15 {
			t.Errorf("the leader, sent SIGTERM: got %s\nwant exit %d", r, exitSignal+15)
		}
	})
	t.Run("lost: the key taken while the command runs", func(t *testing.T) {
		started := filepath.Join(t.TempDir(), "started")
		wait := start(t, []string{env}, "elect", "--ttl", "1s", "lost", "--", "sh", "-c", `touch "$0"; sleep 1000`, started)
		eventually(t, "the command started", func() bool { return exists(started) })
		hold(t, srv, "lost") // taken: the next refresh finds it so
		if r := wait(); r.code != exitLost || !strings.Contains(r.stderr, `leadership of "lost" lost (taken): the command was stopped`) {
			t.Errorf("got %s\nwant exit %d, lost (taken)", r, exitLost)
		}
	})
	t.Run("--loop campaigns again after a command that failed", func(t *testing.T) {
		runs := filepath.Join(t.TempDir(), "runs")
		p := startProc(t, []string{env}, "elect", "--loop", "looped", "--", "sh", "-c", `echo ran >> "$0"; exit 3`, runs)
		eventually(t, "three runs", func() bool { return len(lines(runs)) >= 3 })
		p.signal(syscall.SIGTERM)
		if r := p.wait(); r.code != 3 && r.code != exitSignal+15 {
			t.Errorf("sent SIGTERM: got %s\nwant exit 3 (the command's) or 143", r)
		}
	})
	t.Run("each resigned: the key is gone", func(t *testing.T) {
		for _, name := range []string{"ok", "three", "killed", "noexec", "nosuch", "looped"} {
			if got := send(t, srv, "EXISTS", name); got != "0" {
				t.Errorf("EXISTS %s after its election: got %s, want 0", name, got)
			}
		}
	})
}

func TestElectEnvironment(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	envFile := filepath.Join(t.TempDir(), "env")
	wait := start(t, []string{env, "LOCKSMITH_TERM=stale", "LOCKSMITH_FENCE=stale"}, "elect", "--ttl", "20s", "--identity", "web-3", "envy", "--",
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
	for k, want := range map[string]string{"LOCKSMITH_TERM": fence, "LOCKSMITH_LEADER": "web-3", "LOCKSMITH_LOCK": "envy",
		"LOCKSMITH_LEASE_MS": "20000", "LOCKSMITH_FENCE": ""} {
		if got[k] != want {
			t.Errorf("%s: got %q, want %q", k, got[k], want)
		}
	}
	if token := value[:22]; strings.Contains(readFile(envFile), token) { // the stored value is the token, then the identity
		t.Errorf("the command's environment holds the lease's token")
	}
}

func TestElectNeverOverlaps(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	_, env := runServer(t)
	dir := t.TempDir()
	// Each command claims a directory that only one can create, and gives
	// it back, even when SIGTERM ends it: mkdir fails for a second command
	// inside, which records the overlap.
	script := `trap 'rmdir "$0/held"; exit 0' TERM; ` +
		`mkdir "$0/held" || { echo "$LOCKSMITH_TERM $LOCKSMITH_LEADER" >> "$0/overlaps"; exit 99; }; ` +
		`echo "$LOCKSMITH_TERM $LOCKSMITH_LEADER" >> "$0/terms"; sleep 0.05; rmdir "$0/held"`
	var ps []*proc
	for _, id := range []string{"a", "b"} {
		ps = append(ps, startProc(t, []string{env}, "elect", "--loop", "--ttl", "3s", "--identity", id, "shared", "--", "sh", "-c", script, dir))
	}
	terms := filepath.Join(dir, "terms")
	eventually(t, "40 terms, 10 of each candidate's at least", func() bool {
		n := map[string]int{}
		for _, l := range lines(terms) {
			_, id, _ := strings.Cut(l, " ")
			n[id]++
		}
		return n["a"]+n["b"] >= 40 && n["a"] >= 10 && n["b"] >= 10
	})
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
	}
	for i, p := range ps {
		if r := p.wait(); r.code != 0 && r.code != exitSignal+15 {
			t.Errorf("candidate %d, sent SIGTERM: got %s\nwant exit 0 (its command's, trapping SIGTERM) or 143 (campaigning)", i, r)
		}
	}
	if o := readFile(filepath.Join(dir, "overlaps")); o != "" {
		t.Errorf("commands that found another running: got %q, want none", o)
	}
	var last int64
	ls := lines(terms)
	for _, l := range ls {
		n, _ := strconv.ParseInt(strings.Fields(l)[0], 10, 64)
		if n <= last {
			t.Errorf("term %d after term %d: want each term larger than the one before", n, last)
		}
		last = n
	}
	t.Logf("%d terms, no overlap", len(ls))
}

func TestElectLeaderKilled(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	leader := startProc(t, []string{env}, "elect", "--ttl", "3s", "handover", "--",
		"sh", "-c", `echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 1000`, a)
	cmdPID := pidIn(t, a)
	t.Cleanup(func() { _ = syscall.Kill(cmdPID, syscall.SIGKILL) }) // if it ran on
	next := startProc(t, []string{env}, "elect", "--ttl", "3s", "handover", "--",
		"sh", "-c", `date +%s%N > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 1000`, b)
	queued(t, srv, "handover", 1)

	killed := time.Now()
	leader.signal(syscall.SIGKILL)
	waitGone(t, cmdPID, "the killed leader's command")
	gone := time.Now()
	eventually(t, "the next leader's command started", func() bool { return exists(b) })
	started := nanos(t, readFile(b))
	t.Run("the killed leader's command is killed at once, by its watchdog", func(t *testing.T) {
		if !gone.Before(started) {
			t.Errorf("the old command was seen gone at %v, the new one started at %v: want the old one gone first",
				gone.Format(time.StampMicro), started.Format(time.StampMicro))
		}
	})
	t.Run("the next candidate leads once the lease ran out", func(t *testing.T) {
		next.signal(syscall.SIGTERM)
		if r := next.wait(); r.code != exitSignal+15 {
			t.Errorf("the next leader, sent SIGTERM: got %s\nwant exit %d", r, exitSignal+15)
		}
	})
	t.Logf("SIGKILL of the leader's locksmith: its command gone within %v; the next leader's command started %v after the SIGKILL (--ttl 3s)",
		gone.Sub(killed).Round(time.Millisecond), started.Sub(killed).Round(time.Millisecond))
}

func TestElectHold(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	t.Run("prints the elected line, and SIGINT resigns and exits 0", func(t *testing.T) {
		p := startProc(t, []string{env}, "elect", "--identity", "web 3", "primary")
		line, _ := waitLine(t, p.stdout, 0, "elected ")
		if want := fmt.Sprintf(`elected term=%s leader="web 3" ttl_ms=`, send(t, srv, "GET", "{primary}:fence")); !strings.HasPrefix(line, want) {
			t.Errorf("the elected line: got %q, want %q...", line, want)
		}
		if got := send(t, srv, "EXISTS", "primary"); got != "1" {
			t.Errorf("EXISTS primary while it leads: got %s, want 1", got)
		}
		p.signal(syscall.SIGINT)
		if r := p.wait(); r.code != 0 {
			t.Errorf("got %s\nwant exit 0", r)
		}
		if got := send(t, srv, "EXISTS", "primary"); got != "0" {
			t.Errorf("EXISTS primary once resigned: got %s, want 0", got)
		}
	})
	t.Run("a lost term exits 79", func(t *testing.T) {
		p := startProc(t, []string{env}, "elect", "--ttl", "1s", "taken")
		waitLine(t, p.stdout, 0, "elected ")
		hold(t, srv, "taken")
		if r := p.wait(); r.code != exitLost || !strings.Contains(r.stderr, `leadership of "taken" lost (taken)`) {
			t.Errorf("got %s\nwant exit %d, lost (taken)", r, exitLost)
		}
	})
}
