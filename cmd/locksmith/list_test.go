package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// holdFor obtains key for a minute with metadata, released when t ends.
func holdFor(t *testing.T, l *lock.Locker, key, metadata string) *lock.Lock {
	t.Helper()
	lk, err := l.Obtain(ctx(t), key, time.Minute, lock.WithMetadata(metadata))
	if err != nil {
		t.Fatalf("Obtain %q: %v", key, err)
	}
	t.Cleanup(func() { _ = lk.Release(context.Background()) })
	return lk
}

// contend queues a waiter for key, which l holds, until t ends, and returns
// once the queue counts it.
func contend(t *testing.T, l *lock.Locker, key string) {
	t.Helper()
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if lk, err := l.Obtain(wctx, key, time.Minute, lock.WithRetry(lock.Linear(50*time.Millisecond))); err == nil {
			_ = lk.Release(context.Background())
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	redistest.Eventually(t, "a waiter in the queue of "+key, func(ctx context.Context) bool {
		st, err := l.Inspect(ctx, key)
		return err == nil && st.Waiters == 1
	})
}

// listed is an object of ls's JSON array, as the tests read it.
type listed struct {
	inspected
	HeldFor *int64 `json:"held_for_ms"`
	Waited  *int64 `json:"waited_ms"`
}

func TestLs(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	env := url(t, "single")
	l := locker(t, env)
	h := me("run", "/bin/sleep")
	a := holdFor(t, l, "ls:a", h.String())
	b := holdFor(t, l, "ls:b", "host=web-3")
	holdFor(t, l, "lsx:outside", "")
	tokens := [2]string{a.Token(), b.Token()}

	t.Run("a row per held lock under the prefix", func(t *testing.T) {
		r := locksmith(t, []string{env}, "ls", "ls:")
		if r.code != 0 {
			t.Fatalf("got %s\nwant exit 0", r)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "LOCK ") || !strings.HasPrefix(lines[1], "ls:a ") || !strings.HasPrefix(lines[2], "ls:b ") {
			t.Fatalf("got stdout\n%s\nwant a header, then the rows of ls:a and ls:b", r.stdout)
		}
		for _, want := range []string{strategy.Fingerprint(a.Token()), h.User + "@" + h.Host + " pid " + strconv.Itoa(h.PID) + " sleep"} {
			if !strings.Contains(lines[1], want) {
				t.Errorf("got the row %q, want %q in it", lines[1], want)
			}
		}
		if want := `"host=web-3"`; !strings.Contains(lines[2], want) {
			t.Errorf("got the row %q, want %q in it", lines[2], want)
		}
		noSecret(t, tokens[0], r)
		noSecret(t, tokens[1], r)
	})

	t.Run("json", func(t *testing.T) {
		r := locksmith(t, []string{env}, "--json", "ls", "ls:")
		var got []listed
		if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil {
			t.Fatalf("got %s (%v)\nwant exit 0 and a JSON array", r, err)
		}
		if len(got) != 2 || got[0].Name != "ls:a" || got[1].Name != "ls:b" {
			t.Fatalf("got %+v, want ls:a and ls:b", got)
		}
		if g := got[0]; !g.Held || g.Fingerprint != strategy.Fingerprint(a.Token()) || g.Holder == nil || g.Holder.PID != h.PID || g.TTL <= 0 {
			t.Errorf("got %+v, want ls:a held, by this test's holder, with a TTL", g)
		}
		if g := got[0]; g.HeldFor == nil || *g.HeldFor <= 0 || g.Waited != nil {
			t.Errorf("got held_for_ms %v, waited_ms %v; want a positive held_for_ms (its Locker stamped the value), no waited_ms", g.HeldFor, g.Waited)
		}
		if g := got[1]; g.Metadata != "host=web-3" || g.Holder != nil {
			t.Errorf("got %+v, want ls:b's raw metadata", g)
		}
		noSecret(t, tokens[0], r)
		noSecret(t, tokens[1], r)
	})

	t.Run("none", func(t *testing.T) {
		r := locksmith(t, []string{env}, "--json", "ls", "ls:none:")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
			t.Errorf("got %s\nwant exit 0 and []", r)
		}
	})

	t.Run("at most --limit", func(t *testing.T) {
		r := locksmith(t, []string{env}, "ls", "--limit", "1", "ls:")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 2 || !strings.Contains(r.stderr, "--limit") {
			t.Errorf("got %s\nwant exit 0, one row, and a warning that names --limit", r)
		}
	})
}

func TestLsUsage(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	env := url(t, "single")
	for _, args := range [][]string{{"ls"}, {"ls", "a:", "b:"}, {"ls", "--limit", "0", "a:"}, {"ls", "--timeout", "0s", "a:"}, {"top", "--interval", "0s"}, {"top", "a:", "b:"}} {
		if r := locksmith(t, []string{env}, args...); r.code != exitUsage {
			t.Errorf("locksmith %q: got %s\nwant exit %d", args, r, exitUsage)
		}
	}
}

// frameHeader is the first line of a frame of top's, with its refresh's
// number.
var frameHeader = regexp.MustCompile(`^locksmith top "[^"]*" .* refresh (\d+), every`)

// TestTopStream checks top when stdout is not a terminal: it writes each
// refresh, the most contended lock first, and quits at q on stdin.
func TestTopStream(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	env := url(t, "single")
	l := locker(t, env)
	holdFor(t, l, "tops:a-calm", "")
	hot := holdFor(t, l, "tops:hot", "")
	contend(t, l, "tops:hot")

	cmd, _, stderr := command(t, []string{env}, "top", "tops:")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = nil // StdoutPipe's
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	var frame []string
	for len(frame) < 5 && lines.Scan() { // the header, the status, a blank line, the table's header, its first row
		if frameHeader.MatchString(lines.Text()) {
			frame = nil
		}
		frame = append(frame, lines.Text())
	}
	if len(frame) < 5 || frameHeader.FindStringSubmatch(frame[0])[1] != "1" {
		t.Fatalf("got the frame %q, want refresh 1's", frame)
	}
	if row := strings.Fields(frame[4]); len(row) < 2 || row[0] != "tops:hot" || row[1] != "1" {
		t.Errorf("got the first row %q, want tops:hot, with 1 waiter", frame[4])
	}
	if strings.Contains(strings.Join(frame, "\n"), hot.Token()) {
		t.Errorf("got a token in the frame %q", frame)
	}
	if _, err := in.Write([]byte("q\n")); err != nil {
		t.Fatal(err)
	}
	go func() { // drain, so that top never blocks on a full pipe
		for lines.Scan() {
		}
	}()
	r := wait(t, cmd, new(bytes.Buffer), stderr)
	if r.code != 0 || r.stderr != "" {
		t.Errorf("after q: got %s\nwant exit 0, and nothing on stderr", r)
	}
}

// tmux returns the tmux binary, skipping t when there is none, unless
// LOCKSMITH_FULL=1 or LOCKSMITH_REQUIRE_TMUX=1 (set by .ci/run, which
// installs it): then its absence fails t.
func tmux(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	switch {
	case err == nil:
		return bin
	case redistest.Full() || os.Getenv("LOCKSMITH_REQUIRE_TMUX") == "1":
		t.Fatalf("no tmux (Debian: apt-get install tmux), and LOCKSMITH_FULL=1 or LOCKSMITH_REQUIRE_TMUX=1: %v", err)
	}
	t.Skip("no tmux: apt-get install tmux")
	return ""
}

// terminal is a tmux server of a test's own, whose one session runs a
// shell script in a terminal of 160 × 30.
type terminal struct {
	t          *testing.T
	tmux, sock string
}

// startTerminal starts a tmux server that runs script (sh) in a session,
// killed when t ends.
func startTerminal(t *testing.T, script string) *terminal {
	t.Helper()
	dir := t.TempDir()
	term := &terminal{t, tmux(t), filepath.Join(dir, "tmux.sock")}
	file := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	term.run("-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "30", "sh "+file)
	t.Cleanup(func() { _ = exec.Command(term.tmux, "-S", term.sock, "kill-server").Run() })
	return term
}

// run runs the tmux command args on the terminal's server.
func (term *terminal) run(args ...string) string {
	term.t.Helper()
	out, err := exec.Command(term.tmux, append([]string{"-S", term.sock}, args...)...).CombinedOutput()
	if err != nil {
		term.t.Fatalf("tmux %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen returns what the terminal shows.
func (term *terminal) screen() string {
	term.t.Helper()
	return term.run("capture-pane", "-p")
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestTopTerminal runs top in a real terminal (tmux): it shows a lock
// that becomes contended within two refreshes, most contended first, and
// q and Ctrl-C quit it cleanly, the terminal back in its mode.
func TestTopTerminal(t *testing.T) {
	tmux(t)
	redistest.ParallelUnlessFull(t)
	env := url(t, "single")
	l := locker(t, env)
	holdFor(t, l, "topt:a-calm", "")
	holdFor(t, l, "topt:hot", "")
	dir := t.TempDir()
	code, stty, errs := filepath.Join(dir, "code"), filepath.Join(dir, "stty"), filepath.Join(dir, "stderr")
	var vars []string
	for _, kv := range environ(env) {
		vars = append(vars, shellQuote(kv))
	}
	script := "env -i " + strings.Join(vars, " ") + " " + shellQuote(bin) + " top topt: 2>" + shellQuote(errs) + "\n" +
		"echo $? >" + shellQuote(code) + ".tmp; stty -a >" + shellQuote(stty) + "; mv " + shellQuote(code) + ".tmp " + shellQuote(code) + "\n" +
		"sleep 600\n"

	// refresh returns the number of the refresh on screen, and the screen.
	refresh := func(term *terminal) (int, string) {
		s := term.screen()
		for _, line := range strings.Split(s, "\n") {
			if m := frameHeader.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				return n, s
			}
		}
		return 0, s
	}
	// awaitRefresh waits until the screen shows refresh n or a later one.
	awaitRefresh := func(term *terminal, n int) (int, string) {
		t.Helper()
		var got int
		var s string
		redistest.Eventually(t, "refresh "+strconv.Itoa(n)+" on screen", func(context.Context) bool {
			got, s = refresh(term)
			return got >= n
		})
		return got, s
	}
	// exited waits for top's exit code, and checks that it left the
	// terminal as it found it: canonical, echoing, off the alternate screen.
	exited := func(term *terminal) int {
		t.Helper()
		redistest.Eventually(t, "top's exit", func(context.Context) bool {
			_, err := os.Stat(code)
			return err == nil
		})
		b, _ := os.ReadFile(code)
		mode, _ := os.ReadFile(stty)
		for _, flag := range []string{"icanon", "echo"} {
			if !regexp.MustCompile(`(^|\s)` + flag + `(\s|$)`).Match(mode) {
				t.Errorf("after top: got the terminal's mode\n%s\nwant %s", mode, flag)
			}
		}
		if e, _ := os.ReadFile(errs); len(e) > 0 {
			t.Errorf("got stderr %q, want none", e)
		}
		if s := term.screen(); frameHeader.MatchString(strings.TrimSpace(s)) || strings.Contains(s, "topt:hot") {
			t.Errorf("after top: got the screen\n%s\nwant top's frame gone (the alternate screen left)", s)
		}
		_ = os.Remove(code)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}

	term := startTerminal(t, script)
	first, _ := awaitRefresh(term, 1)
	contend(t, l, "topt:hot")
	// The refresh under way as the waiter came may have listed before it;
	// the next one lists after.
	n, s := awaitRefresh(term, first+2)
	var rows []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "topt:") {
			rows = append(rows, line)
		}
	}
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "topt:hot ") || strings.Fields(rows[0])[1] != "1" {
		t.Fatalf("refresh %d (the waiter came after refresh %d): got the screen\n%s\nwant topt:hot first, with 1 waiter, then topt:a-calm", n, first, s)
	}
	term.run("send-keys", "q")
	if c := exited(term); c != 0 {
		t.Errorf("after q: got exit %d, want 0", c)
	}

	term = startTerminal(t, script)
	awaitRefresh(term, 1)
	term.run("send-keys", "C-c")
	if c := exited(term); c != exitSignal+2 {
		t.Errorf("after Ctrl-C: got exit %d, want %d", c, exitSignal+2)
	}
}

// TestLsStrategies: ls lists under redlock (over three servers) and
// setnx-getset as under single.
func TestLsStrategies(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	for _, strategy := range []string{"redlock", "setnx-getset"} {
		t.Run(strategy, func(t *testing.T) {
			env := url(t, strategy)
			if strategy == "redlock" {
				env, _ = servers(t, strategy, 3)
			}
			l := locker(t, env)
			lk, err := l.Obtain(ctx(t), "lss:a", time.Minute)
			if err != nil {
				t.Fatalf("Obtain: %v", err)
			}
			t.Cleanup(func() { _ = lk.Release(context.Background()) })
			r := locksmith(t, []string{env}, "ls", "lss:")
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "lss:a ") {
				t.Errorf("got %s\nwant exit 0 and the row of lss:a", r)
			}
		})
	}
}
