package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// The tests of locks of several NAMEs: run, acquire, refresh, release and
// inspect take them as one lock, all or nothing.

// pttlOf returns the PTTL of key on srv.
func pttlOf(t *testing.T, srv *redistest.Server, key string) time.Duration {
	t.Helper()
	ms, err := strconv.Atoi(send(t, srv, "PTTL", key))
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return time.Duration(ms) * time.Millisecond
}

// keyspaceHits returns how many reads of srv found their key.
func keyspaceHits(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	for _, line := range strings.Split(send(t, srv, "INFO", "stats"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "keyspace_hits:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("INFO stats: keyspace_hits %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("INFO stats: no keyspace_hits")
	return 0
}

// absent fails t unless every one of keys is absent from srv.
func absent(t *testing.T, srv *redistest.Server, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v := get(t, srv, k); v != "" {
			t.Errorf("GET %s: got %q, want no key", k, v)
		}
	}
}

func TestRunSeveralNames(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)

	t.Run("holds every name while the command runs, and releases them all", func(t *testing.T) {
		dir := t.TempDir()
		envFile := filepath.Join(dir, "env")
		wait := start(t, []string{env, "LOCKSMITH_FENCES=stale"}, "run", "hold-b", "hold-a", "hold-b", "--",
			"sh", "-c", `env > "$0.tmp"; mv "$0.tmp" "$0"; while [ ! -e "$0.done" ]; do sleep 0.05; done`, envFile)
		eventually(t, "the command's environment", func() bool { return exists(envFile) })
		a, b := get(t, srv, "hold-a"), get(t, srv, "hold-b")
		if a == "" || a != b {
			t.Errorf("while the command runs: got hold-a %q and hold-b %q, want both held with one value", a, b)
		}
		fenceA, fenceB := get(t, srv, "{hold-a}:fence"), get(t, srv, "{hold-b}:fence")
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
		for k, want := range map[string]string{
			"LOCKSMITH_LOCK":   "hold-a",
			"LOCKSMITH_LOCKS":  "hold-a hold-b",
			"LOCKSMITH_FENCE":  fenceA,
			"LOCKSMITH_FENCES": "hold-a=" + fenceA + " hold-b=" + fenceB,
			"LOCKSMITH_HELD":   "1",
		} {
			if got[k] != want {
				t.Errorf("%s: got %q, want %q", k, got[k], want)
			}
		}
		absent(t, srv, "hold-a", "hold-b")
	})

	t.Run("one name held: -n exits 75, runs nothing and takes no name", func(t *testing.T) {
		hold(t, srv, "busy-b")
		ran := filepath.Join(t.TempDir(), "ran")
		r := locksmith(t, []string{env}, "run", "-n", "busy-a", "busy-b", "busy-c", "--", "touch", ran)
		if r.code != exitNotObtained || !strings.Contains(r.stderr, `"busy-b"`) {
			t.Errorf("got %s\nwant exit %d, naming busy-b", r, exitNotObtained)
		}
		if exists(ran) {
			t.Errorf("got the command run, want it not run")
		}
		absent(t, srv, "busy-a", "busy-c")
		if v := get(t, srv, "busy-b"); v != "another-owner" {
			t.Errorf("GET busy-b: got %q, want the other owner's value kept", v)
		}
	})

	t.Run("a waiter gets every name once the held one is released", func(t *testing.T) {
		h, _ := acquire(t, env, "wait-b")
		hits := keyspaceHits(t, srv)
		wait := start(t, []string{env}, "run", "wait-a", "wait-b", "--", "true")
		// Each attempt reads wait-b, found held: two reads, and the waiter
		// has tried again.
		eventually(t, "the waiter tried twice", func() bool { return keyspaceHits(t, srv) >= hits+2 })
		if r := locksmith(t, []string{env, handleEnv + "=" + h}, "release", "wait-b"); r.code != 0 {
			t.Fatalf("release wait-b: got %s\nwant exit 0", r)
		}
		if r := wait(); r.code != 0 {
			t.Fatalf("the waiter: got %s\nwant exit 0", r)
		}
		absent(t, srv, "wait-a", "wait-b")
	})

	t.Run("lost when one name is taken", func(t *testing.T) {
		dir := t.TempDir()
		wait := start(t, []string{env}, "run", "--ttl", "1s", "--kill-grace", "200ms", "lost-a", "lost-b", "--",
			"sh", "-c", `touch "$0"; sleep 1000`, filepath.Join(dir, "started"))
		eventually(t, "the command started", func() bool { return exists(filepath.Join(dir, "started")) })
		hold(t, srv, "lost-b") // taken: the next refresh finds it so, and extends neither
		r := wait()
		if r.code != exitLost || !strings.Contains(r.stderr, `lock ["lost-a" "lost-b"] lost (taken)`) {
			t.Errorf("got %s\nwant exit %d, lock [\"lost-a\" \"lost-b\"] lost (taken)", r, exitLost)
		}
		absent(t, srv, "lost-a")
	})

	t.Run("the result file and the events name them all", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "result.json")
		r := locksmith(t, []string{env}, "--json", "run", "--result-file", path, "res-b", "res-a", "--", "true")
		if r.code != 0 {
			t.Fatalf("got %s\nwant exit 0", r)
		}
		var res runResult
		if err := json.Unmarshal([]byte(readFile(path)), &res); err != nil {
			t.Fatalf("--result-file: %v", err)
		}
		if res.Lock != "res-a" || !slices.Equal(res.Locks, []string{"res-a", "res-b"}) || res.Fence == nil ||
			len(res.Fences) != 2 || res.Fences["res-a"] != *res.Fence || res.Fences["res-b"] <= 0 || !res.Released {
			t.Errorf("--result-file: got %s\nwant lock res-a, locks [res-a res-b], fence res-a's, fences of both, released", readFile(path))
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			var e struct {
				Event string   `json:"event"`
				Lock  string   `json:"lock"`
				Locks []string `json:"locks"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("event %q: %v", line, err)
			}
			if e.Lock != "" && (e.Lock != "res-a" || !slices.Equal(e.Locks, []string{"res-a", "res-b"})) {
				t.Errorf("event %s: got lock %q, locks %q, want res-a, [res-a res-b]", e.Event, e.Lock, e.Locks)
			}
		}
	})

	t.Run("one name has none of the variables of several", func(t *testing.T) {
		r := locksmith(t, []string{env, "LOCKSMITH_LOCKS=stale", "LOCKSMITH_FENCES=stale"}, "run", "one", "one", "--",
			"sh", "-c", `echo "$LOCKSMITH_LOCK locks=${LOCKSMITH_LOCKS-unset} fences=${LOCKSMITH_FENCES-unset}"`)
		if want := "one locks=unset fences=unset\n"; r.code != 0 || r.stdout != want {
			t.Errorf("got %s\nwant exit 0 and stdout %q", r, want)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			env  string
			args []string
			want string // in stderr
		}{
			{"an empty name", env, []string{"run", "ref-a", "", "--", "touch"}, "NAME must not be empty"},
			{"by setnx-getset", "LOCKSMITH_URL=setnx-getset://" + srv.Addr, []string{"run", "ref-a", "ref-b", "--", "touch"}, "setnx-getset"},
			{"without a command", env, []string{"run", "ref-a", "ref-b"}, "missing the command"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ran := filepath.Join(t.TempDir(), "ran")
				r := locksmith(t, []string{tc.env}, append(tc.args, ran)...)
				if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
					t.Errorf("got %s\nwant exit %d, %q", r, exitUsage, tc.want)
				}
				if exists(ran) {
					t.Errorf("got the command run, want it not run")
				}
				absent(t, srv, "ref-a", "ref-b")
			})
		}
	})
}

func TestPlumbingSeveralNames(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	t.Run("acquire, refresh, release, with the names in any order", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		h, _ := acquire(t, env, "job-b", "job-a", "--ttl", "10s")
		if d, err := decodeHandle(h); err != nil || !slices.Equal(d.names, []string{"job-a", "job-b"}) {
			t.Errorf("got the handle's names %q (%v), want [job-a job-b]", d.names, err)
		}
		a, b := get(t, srvs[0], "job-a"), get(t, srvs[0], "job-b")
		if a == "" || a != b {
			t.Fatalf("got job-a %q and job-b %q, want both held with one value", a, b)
		}
		with := []string{env, handleEnv + "=" + h}
		if r := locksmith(t, with, "refresh", "job-a", "job-b", "--ttl", "1h"); r.code != 0 {
			t.Fatalf("refresh: got %s\nwant exit 0", r)
		}
		for _, k := range []string{"job-a", "job-b"} {
			if got := pttlOf(t, srvs[0], k); got <= 10*time.Second {
				t.Errorf("PTTL %s: got %v, want more than the 10s acquire set", k, got)
			}
		}
		if get(t, srvs[0], "job-a") != a || get(t, srvs[0], "job-b") != b {
			t.Errorf("got the values changed by the refresh, want them kept")
		}
		if r := locksmith(t, with, "release", "job-b", "job-a"); r.code != 0 {
			t.Fatalf("release: got %s\nwant exit 0", r)
		}
		absent(t, srvs[0], "job-a", "job-b")
	})

	t.Run("names that are not the handle's are a usage error", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		many, _ := acquire(t, env, "m-a", "m-b")
		one, _ := acquire(t, env, "m-c")
		before := []string{get(t, srvs[0], "m-a"), get(t, srvs[0], "m-b"), get(t, srvs[0], "m-c")}
		for _, tc := range []struct {
			handle string
			names  []string
		}{
			{many, []string{"m-a"}},
			{many, []string{"m-a", "m-c"}},
			{many, []string{"m-a", "m-b", "m-c"}},
			{one, []string{"m-c", "m-a"}},
		} {
			for _, op := range []string{"refresh", "release"} {
				r := locksmith(t, []string{env, handleEnv + "=" + tc.handle}, append([]string{op}, tc.names...)...)
				if r.code != exitUsage || !strings.Contains(r.stderr, "the handle is of") {
					t.Errorf("%s %q: got %s\nwant exit %d, \"the handle is of\"", op, tc.names, r, exitUsage)
				}
			}
		}
		after := []string{get(t, srvs[0], "m-a"), get(t, srvs[0], "m-b"), get(t, srvs[0], "m-c")}
		if !slices.Equal(after, before) {
			t.Errorf("got the locks changed, want them intact")
		}
	})

	t.Run("refresh extends every name or none", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		h, _ := acquire(t, env, "r-a", "r-b", "--ttl", "10s")
		send(t, srvs[0], "DEL", "r-b") // as an expiry does
		r := locksmith(t, []string{env, handleEnv + "=" + h}, "refresh", "r-a", "r-b", "--ttl", "1h")
		if r.code != exitLost || !strings.Contains(r.stderr, `"r-b": it expired`) {
			t.Errorf("got %s\nwant exit %d, naming r-b as expired", r, exitLost)
		}
		if got := pttlOf(t, srvs[0], "r-a"); got > 10*time.Second {
			t.Errorf("PTTL r-a: got %v, want at most the 10s acquire set", got)
		}
		absent(t, srvs[0], "r-b")
	})

	t.Run("release deletes what it holds, and names the others", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		h, _ := acquire(t, env, "d-a", "d-b")
		send(t, srvs[0], "SET", "d-b", "another-owner", "PX", "60000")
		r := locksmith(t, []string{env, handleEnv + "=" + h}, "release", "d-a", "d-b")
		if r.code != exitLost || !strings.Contains(r.stderr, `"d-b": another holder has it`) {
			t.Errorf("got %s\nwant exit %d, naming d-b as taken", r, exitLost)
		}
		absent(t, srvs[0], "d-a")
		if v := get(t, srvs[0], "d-b"); v != "another-owner" {
			t.Errorf("GET d-b: got %q, want the other owner's value kept", v)
		}
	})

	t.Run("one name held: not obtained, nothing taken", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		acquire(t, env, "n-b")
		if r := locksmith(t, []string{env}, "acquire", "-n", "n-a", "n-b"); r.code != exitNotObtained || r.stdout != "" {
			t.Errorf("got %s\nwant exit %d, nothing on stdout", r, exitNotObtained)
		}
		absent(t, srvs[0], "n-a")
	})

	t.Run("--json: the names and each one's fence", func(t *testing.T) {
		env := url(t, "single")
		r := locksmith(t, []string{env}, "acquire", "--json", "j-b", "j-a")
		var got struct {
			Handle      string           `json:"handle"`
			Locks       []string         `json:"locks"`
			Fingerprint string           `json:"fingerprint"`
			Fence       int64            `json:"fence"`
			Fences      map[string]int64 `json:"fences"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
			t.Fatalf("got %s (%v)\nwant exit 0 and JSON", r, err)
		}
		h, err := decodeHandle(got.Handle)
		if err != nil || got.Fingerprint != strategy.Fingerprint(h.token) || !slices.Equal(got.Locks, []string{"j-a", "j-b"}) ||
			len(got.Fences) != 2 || got.Fences["j-a"] != got.Fence || got.Fences["j-b"] <= 0 {
			t.Errorf("got %+v (%v), want locks [j-a j-b], the handle's fingerprint, a fence per name, fence j-a's", got, err)
		}
	})

	t.Run("setnx-getset refuses several names before it takes any", func(t *testing.T) {
		env, srvs := servers(t, "setnx-getset", 1)
		r := locksmith(t, []string{env}, "acquire", "s-a", "s-b")
		if r.code != exitUsage || !strings.Contains(r.stderr, "setnx-getset") {
			t.Errorf("got %s\nwant exit %d naming setnx-getset", r, exitUsage)
		}
		absent(t, srvs[0], "s-a", "s-b")
	})
}

func TestInspectSeveralNames(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	env := url(t, "single")
	_, token := acquire(t, env, "i-a", "i-b")
	t.Run("held: a table each", func(t *testing.T) {
		r := locksmith(t, []string{env}, "inspect", "i-b", "i-a")
		blocks := strings.Split(r.stdout, "\n\n")
		first := func(block string) string {
			line, _, _ := strings.Cut(block, "\n")
			return strings.Join(strings.Fields(line), " ")
		}
		if r.code != 0 || len(blocks) != 2 || first(blocks[0]) != "lock i-b" || first(blocks[1]) != "lock i-a" {
			t.Errorf("got %s\nwant exit 0, a table for i-b, then one for i-a", r)
		}
	})
	t.Run("--json: an array", func(t *testing.T) {
		r := locksmith(t, []string{env}, "inspect", "--json", "i-a", "i-b", "i-free")
		var got []inspected
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("got %s: %v", r, err)
		}
		if r.code != exitNotHeld || len(got) != 3 {
			t.Fatalf("got %s\nwant exit %d (one is free), three objects", r, exitNotHeld)
		}
		for i, name := range []string{"i-a", "i-b"} {
			if got[i].Name != name || !got[i].Held || got[i].Fingerprint != strategy.Fingerprint(token) {
				t.Errorf("object %d: got %+v, want %s held by the handle's token", i, got[i], name)
			}
		}
		if got[2].Name != "i-free" || got[2].Held {
			t.Errorf("object 2: got %+v, want i-free, free", got[2])
		}
	})
}
