package main

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// The tests of run --permits, a semaphore of N: at most N runs at once, and
// of inspect and break of semaphores and read-write locks.

// waitFor is a command that writes its parent's pid (locksmith's) and its
// permit to the file $0, then runs until $0.done exists.
const waitFor = `echo "$PPID $LOCKSMITH_PERMIT" > "$0.tmp"; mv "$0.tmp" "$0"; while [ ! -e "$0.done" ]; do sleep 0.05; done`

// finish lets the waitFor command of path end.
func finish(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path+".done", nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pidAndPermit waits for the waitFor command of path to start, and returns
// the pid of its locksmith and its permit.
func pidAndPermit(t *testing.T, path string) (pid int, permit string) {
	t.Helper()
	eventually(t, "the command started", func() bool { return exists(path) })
	pidText, permit, _ := strings.Cut(strings.TrimSpace(readFile(path)), " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		t.Fatalf("the command's record %q: %v", readFile(path), err)
	}
	return pid, permit
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func TestRunPermitsAtMostN(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	_, env := runServer(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	// Each command logs its entry and exit with its permit, and stays until
	// two commands have entered: so two of them are inside at once, and a
	// third would be too, if the semaphore let it in.
	script := `echo "in $LOCKSMITH_PERMIT" >> "$0"; until [ "$(grep -c '^in' "$0")" -ge 2 ]; do sleep 0.05; done; ` +
		`sleep 0.2; echo "out $LOCKSMITH_PERMIT" >> "$0"`
	var waits []func() result
	for i := range 3 {
		result := filepath.Join(dir, "result-"+strconv.Itoa(i))
		waits = append(waits, start(t, []string{env, "LOCKSMITH_PERMIT=stale"}, "run", "--permits", "2", "-w", "1m", "--result-file", result,
			"workers", "--", "sh", "-c", script, log))
	}
	for i, wait := range waits {
		if r := wait(); r.code != 0 {
			t.Errorf("run %d: got %s\nwant exit 0", i, r)
		}
	}
	inside := map[string]bool{} // by permit
	most, ins := 0, 0
	sc := bufio.NewScanner(strings.NewReader(readFile(log)))
	for sc.Scan() {
		what, permit, _ := strings.Cut(sc.Text(), " ")
		switch {
		case permit != "0" && permit != "1":
			t.Errorf("log %q: got permit %q, want 0 or 1", sc.Text(), permit)
		case what == "in" && inside[permit]:
			t.Errorf("log %q: got permit %s held twice at once", sc.Text(), permit)
		}
		inside[permit] = what == "in"
		if what == "in" {
			ins++
		}
		n := 0
		for _, in := range inside {
			if in {
				n++
			}
		}
		most = max(most, n)
	}
	if most != 2 || ins != 3 {
		t.Errorf("got %d commands run, at most %d at once, want 3 run, at most 2 at once; the log:\n%s", ins, most, readFile(log))
	}
	for i := range 3 {
		var res runResult
		text := readFile(filepath.Join(dir, "result-"+strconv.Itoa(i)))
		if err := json.Unmarshal([]byte(text), &res); err != nil {
			t.Fatalf("--result-file %q: %v", text, err)
		}
		if res.Outcome != "completed" || res.Permits != 2 || res.Permit == nil || *res.Permit < 0 || *res.Permit > 1 || res.Fence == nil {
			t.Errorf("--result-file %d: got %s\nwant outcome completed, permits 2, permit 0 or 1, a fence", i, text)
		}
	}
	r := locksmith(t, []string{env, "LOCKSMITH_PERMIT=stale"}, "run", "plain", "--", "sh", "-c", `echo "permit=${LOCKSMITH_PERMIT-unset}"`)
	if want := "permit=unset\n"; r.code != 0 || r.stdout != want {
		t.Errorf("a plain lock's run: got %s\nwant exit 0 and stdout %q", r, want)
	}
}

func TestRunPermitsHolderKilled(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	wait, signal := startSignalled(t, []string{env}, "run", "--permits", "1", "--ttl", "2s", "--kill-grace", "200ms", "slots", "--",
		"sh", "-c", `echo $$ > "$0"; exec sleep 1000`, pidfile)
	pid := pidIn(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // if it ran on
	waiter := start(t, []string{env}, "--json", "run", "--permits", "1", "slots", "--", "sh", "-c", `echo "permit $LOCKSMITH_PERMIT"`)
	eventually(t, "the waiter queued", func() bool { return send(t, srv, "ZCARD", "{slots}:q") == "1" })
	signal(syscall.SIGKILL) // no release: the holder's lease ends with its TTL
	if r := wait(); r.code != -1 {
		t.Errorf("the holder: got %s\nwant locksmith killed", r)
	}
	r := waiter()
	if r.code != 0 || r.stdout != "permit 0\n" {
		t.Errorf("the waiter: got %s\nwant exit 0, and stdout \"permit 0\\n\"", r)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var e struct {
			Event   string `json:"event"`
			Permits *int   `json:"permits"`
			Permit  *int   `json:"permit"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		switch {
		case e.Permits != nil:
			got[e.Event] = "permits " + strconv.Itoa(*e.Permits)
		case e.Permit != nil:
			got[e.Event] = "permit " + strconv.Itoa(*e.Permit)
		}
	}
	if want := map[string]string{"waiting": "permits 1", "obtained": "permit 0"}; !maps.Equal(got, want) {
		t.Errorf("the waiter's events: got %q, want %q", got, want)
	}
	waitGone(t, pid, "the holder's command, once locksmith was killed")
}

func TestRunPermitsMismatch(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	dir := t.TempDir()
	held := filepath.Join(dir, "held")
	holder := start(t, []string{env}, "run", "--permits", "2", "pool", "--", "sh", "-c", waitFor, held)
	pidAndPermit(t, held)
	hold(t, srv, "plain")
	for _, tc := range []struct {
		name string
		args []string
		want []string // in stderr
	}{
		{"another N", []string{"--permits", "3", "pool"}, []string{`semaphore "pool" (3 permits) not obtained`, "a semaphore of 2 permits", "give its holders' --permits"}},
		{"no N", []string{"pool"}, []string{`the key holds a semaphore of 2 permits, not a plain lock; give its holders' --permits`}},
		{"a plain lock's NAME", []string{"--permits", "2", "plain"}, []string{`semaphore "plain" (2 permits) not obtained`, "a plain lock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran, result := filepath.Join(t.TempDir(), "ran"), filepath.Join(t.TempDir(), "result.json")
			args := append(append([]string{"run", "-n", "--result-file", result}, tc.args...), "--", "touch", ran)
			r := locksmith(t, []string{env}, args...)
			if r.code != exitUsage || !containsAll(r.stderr, tc.want) {
				t.Errorf("got %s\nwant exit %d, %q", r, exitUsage, tc.want)
			}
			if strings.Contains(r.stderr, "did not answer") {
				t.Errorf("got %s\nwant no word of Redis not answering", r)
			}
			if exists(ran) {
				t.Errorf("got the command run, want it not run")
			}
			var res runResult
			if err := json.Unmarshal([]byte(readFile(result)), &res); err != nil || res.Outcome != "usage" || res.ExitCode != exitUsage {
				t.Errorf("--result-file: got %s (%v), want outcome usage, exit_code 64", readFile(result), err)
			}
		})
	}
	t.Run("acquire", func(t *testing.T) {
		r := locksmith(t, []string{env}, "acquire", "-n", "pool")
		if want := `the key holds a semaphore of 2 permits, not a plain lock: acquire takes plain locks`; r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, want) {
			t.Errorf("got %s\nwant exit %d, no handle, %q", r, exitUsage, want)
		}
	})
	finish(t, held)
	if r := holder(); r.code != 0 {
		t.Errorf("the holder: got %s\nwant exit 0, untouched", r)
	}
	if v := get(t, srv, "plain"); v != "another-owner" {
		t.Errorf("GET plain: got %q, want the plain lock kept", v)
	}
}

func TestRunPermitsRefused(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want string // in stderr
	}{
		{"two NAMEs", env, []string{"--permits", "2", "r-a", "r-b"}, `run: --permits takes one NAME, got ["r-a" "r-b"]`},
		{"zero", env, []string{"--permits", "0", "r-a"}, "run: --permits 0: must be 1 to 1000"},
		{"negative", env, []string{"--permits", "-1", "r-a"}, "run: --permits -1: must be 1 to 1000"},
		{"more than MaxPermits", env, []string{"--permits", strconv.Itoa(lock.MaxPermits + 1), "r-a"}, "run: --permits 1001: must be 1 to 1000"},
		{"by setnx-getset", "LOCKSMITH_URL=setnx-getset://" + srv.Addr, []string{"--permits", "2", "r-a"}, "not supported"},
		{"by redlock", "LOCKSMITH_URL=redlock://" + srv.Addr, []string{"--permits", "2", "r-a"}, "not supported"},
		{"without scripts", env + "?without_scripts=true", []string{"--permits", "2", "r-a"}, "not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := filepath.Join(t.TempDir(), "ran")
			r := locksmith(t, []string{tc.env}, append(append([]string{"run"}, tc.args...), "--", "touch", ran)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("got %s\nwant exit %d, %q", r, exitUsage, tc.want)
			}
			if exists(ran) {
				t.Errorf("got the command run, want it not run")
			}
			absent(t, srv, "r-a", "r-b")
		})
	}
}

func TestInspectSemaphore(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	_, env := runServer(t)
	dir := t.TempDir()
	var (
		holders []func() result
		pids    = map[int]string{} // the holders' locksmith pids: their permits
	)
	for _, name := range []string{"first", "second"} {
		path := filepath.Join(dir, name)
		holders = append(holders, start(t, []string{env}, "run", "--permits", "2", "--ttl", "1m", "partner-api", "--", "sh", "-c", waitFor, path))
		pid, permit := pidAndPermit(t, path)
		pids[pid] = permit
	}
	third := start(t, []string{env}, "run", "--permits", "2", "partner-api", "--", "true")
	got := poll(t, func() (inspected, bool) {
		got, _ := inspectJSON(t, env, "partner-api")
		return got, got.Waiters == 1
	})
	if !got.Held || got.Permits != 2 || got.ReadWrite || got.Verdict != "semaphore: 2 of 2 permits held" || len(got.Holders) != 2 ||
		got.TTL <= 0 || got.TTL > time.Minute.Milliseconds() {
		t.Fatalf("got %+v\nwant held, permits 2, verdict \"semaphore: 2 of 2 permits held\", 2 holders, waiters 1, ttl_ms in (0, 60000]", got)
	}
	for _, h := range got.Holders {
		switch {
		case h.Holder == nil:
			t.Errorf("got holder %+v, want locksmith's metadata", h)
		case h.Permit == nil || strconv.Itoa(*h.Permit) != pids[h.Holder.PID]:
			t.Errorf("got holder %+v, want pid %d holding the permit its command was told, %q", h, h.Holder.PID, pids[h.Holder.PID])
		case len(h.Fingerprint) != 16 || h.TTL <= 0 || h.Side != "" || h.Holder.Via != "run" || h.Holder.Cmd != "sh":
			t.Errorf("got holder %+v, want a fingerprint, a TTL, no side, via run, cmd sh", h)
		}
	}
	if got.Holders[0].Fingerprint == got.Holders[1].Fingerprint {
		t.Errorf("got one fingerprint %s for both holders, want each its own", got.Holders[0].Fingerprint)
	}
	h := locksmith(t, []string{env}, "inspect", "partner-api")
	wants := []string{"semaphore: 2 of 2 permits held", "permits  2", "waiters  1", "PERMIT", got.Holders[0].Fingerprint, got.Holders[1].Fingerprint}
	for pid := range pids {
		wants = append(wants, strconv.Itoa(pid))
	}
	for _, want := range wants {
		if !strings.Contains(h.stdout, want) {
			t.Errorf("got %s\nwant %q in the table", h, want)
		}
	}
	for i, path := range []string{"first", "second"} {
		finish(t, filepath.Join(dir, path))
		if r := holders[i](); r.code != 0 {
			t.Errorf("holder %s: got %s\nwant exit 0", path, r)
		}
	}
	if r := third(); r.code != 0 {
		t.Errorf("the third: got %s\nwant exit 0", r)
	}
	if got, r := inspectJSON(t, env, "partner-api"); r.code != exitNotHeld || got.Held || got.Holders != nil {
		t.Errorf("got %s\nwant exit %d, free, no holders", r, exitNotHeld)
	}
}

func TestInspectReadWrite(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	_, env := runServer(t)
	l := locker(t, env)
	var readers []string // their fingerprints
	for _, metadata := range []string{"reader-1", ""} {
		lk, err := l.Obtain(ctx(t), "catalog", time.Minute, lock.WithRead(), lock.WithMetadata(metadata))
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, strategy.Fingerprint(lk.Token()))
	}
	got, r := inspectJSON(t, env, "catalog")
	if r.code != 0 || !got.Held || !got.ReadWrite || got.Permits != 0 || got.Verdict != "read-write: held by 2 readers" || len(got.Holders) != 2 {
		t.Fatalf("got %s\nwant exit 0, held, read_write, verdict \"read-write: held by 2 readers\", 2 holders", r)
	}
	var fingerprints []string
	for _, h := range got.Holders {
		fingerprints = append(fingerprints, h.Fingerprint)
		if h.Side != "read" || h.Permit != nil || h.Holder != nil {
			t.Errorf("got holder %+v, want side read, no permit, no locksmith holder", h)
		}
	}
	if slices.Sort(fingerprints); !slices.Equal(fingerprints, slices.Sorted(slices.Values(readers))) {
		t.Errorf("got fingerprints %q, want the readers' %q", fingerprints, readers)
	}
	h := locksmith(t, []string{env}, "inspect", "catalog")
	for _, want := range []string{"read-write: held by 2 readers", "SIDE", "read", `"reader-1"`, readers[0], readers[1]} {
		if !strings.Contains(h.stdout, want) {
			t.Errorf("got %s\nwant %q in the table", h, want)
		}
	}
	if strings.Contains(h.stdout, "permits") {
		t.Errorf("got %s\nwant no permits row for a read-write lock", h)
	}
}

func TestBreakSemaphore(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	_, env := runServer(t)
	dir := t.TempDir()
	var (
		waits []func() result
		pids  []int
	)
	for _, name := range []string{"first", "second"} {
		path := filepath.Join(dir, name)
		waits = append(waits, start(t, []string{env}, "run", "--permits", "3", "--ttl", "3s", "--kill-grace", "200ms", "exports", "--",
			"sh", "-c", waitFor, path))
		pid, _ := pidAndPermit(t, path)
		pids = append(pids, pid)
	}
	got, _ := inspectJSON(t, env, "exports")
	if len(got.Holders) != 2 {
		t.Fatalf("got %+v, want 2 holders", got)
	}
	if r := locksmith(t, []string{env}, "break", "exports", "--older-than", "1ms"); r.code != exitUsage || !strings.Contains(r.stderr, "--fingerprint F") {
		t.Errorf("break --older-than: got %s\nwant exit %d, pointing to --fingerprint F", r, exitUsage)
	}
	first := slices.IndexFunc(got.Holders, func(h sharedHolder) bool { return h.Holder.PID == pids[0] })
	fp := got.Holders[first].Fingerprint
	b := locksmith(t, []string{env}, "--json", "break", "exports", "--fingerprint", fp)
	if parsed := parse(t, b); b.code != 0 || !parsed.Broken || !strings.HasPrefix(parsed.Note, "the holder's lease is ended") {
		t.Errorf("break --fingerprint %s: got %s\nwant exit 0, broken, the holder's lease ended", fp, b)
	}
	if r := waits[0](); r.code != exitLost {
		t.Errorf("the holder broken: got %s\nwant exit %d", r, exitLost)
	}
	if got, _ := inspectJSON(t, env, "exports"); len(got.Holders) != 1 || got.Holders[0].Holder.PID != pids[1] {
		t.Errorf("got %+v, want the second holder alone", got)
	}
	finish(t, filepath.Join(dir, "second"))
	if r := waits[1](); r.code != 0 {
		t.Errorf("the other holder: got %s\nwant exit 0, untouched", r)
	}
}
