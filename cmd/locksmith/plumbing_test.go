package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// pttl returns the PTTL of the lock on key, as inspect reads it.
func pttl(t *testing.T, env, key string) time.Duration {
	t.Helper()
	got, r := inspectJSON(t, env, key)
	if r.code != 0 {
		t.Fatalf("inspect %s: got %s\nwant exit 0", key, r)
	}
	return time.Duration(got.TTL) * time.Millisecond
}

func TestPlumbing(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	t.Run("acquire, refresh, release", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		h, token := acquire(t, env, "job")
		if got, _ := inspectJSON(t, env, "job"); got.Fingerprint != strategy.Fingerprint(token) || got.Holder == nil || got.Holder.Via != "acquire" {
			t.Errorf("got %+v, want held by the handle's token, via acquire", got)
		}
		before := get(t, srvs[0], "job")
		with := []string{env, handleEnv + "=" + h}
		if r := locksmith(t, with, "refresh", "job"); r.code != 0 {
			t.Fatalf("refresh: got %s\nwant exit 0", r)
		}
		if after := get(t, srvs[0], "job"); after != before {
			t.Errorf("got the value changed by the refresh, want it kept (token and metadata)")
		}
		if r := locksmith(t, with, "release", "job"); r.code != 0 {
			t.Fatalf("release: got %s\nwant exit 0", r)
		}
		if v := get(t, srvs[0], "job"); v != "" {
			t.Errorf("got the key still set after release, want it deleted")
		}
	})

	t.Run("refresh extends the PTTL", func(t *testing.T) {
		env := url(t, "single")
		h, _ := acquire(t, env, "job", "--ttl", "10s")
		if r := locksmith(t, []string{env, handleEnv + "=" + h}, "refresh", "job", "--ttl", "1h"); r.code != 0 {
			t.Fatalf("refresh: got %s\nwant exit 0", r)
		}
		if got := pttl(t, env, "job"); got <= 10*time.Second {
			t.Errorf("got PTTL %v, want more than the 10s acquire set", got)
		}
	})

	t.Run("the handle travels through a file and stdin", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		file := filepath.Join(t.TempDir(), "handle")
		r := locksmith(t, []string{env}, "acquire", "job", "--handle-file", file)
		if r.code != 0 || r.stdout != "" {
			t.Fatalf("acquire: got %s\nwant exit 0, nothing on stdout", r)
		}
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("got the handle file %v (%v), want mode 0600", fi, err)
		}
		b, _ := os.ReadFile(file)
		cmd, stdout, stderr := command(t, []string{env}, "refresh", "job", "--handle-file", "-")
		cmd.Stdin = strings.NewReader(string(b))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if r := wait(t, cmd, stdout, stderr); r.code != 0 {
			t.Fatalf("refresh from stdin: got %s\nwant exit 0", r)
		}
		if r := locksmith(t, []string{env}, "release", "job", "--handle-file", file); r.code != 0 {
			t.Fatalf("release from the file: got %s\nwant exit 0", r)
		}
		if v := get(t, srvs[0], "job"); v != "" {
			t.Errorf("got the key still set after release, want it deleted")
		}
	})

	t.Run("a stale handle releases nothing", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		old, _ := acquire(t, env, "job")
		if r := locksmith(t, []string{env, handleEnv + "=" + old}, "release", "job"); r.code != 0 {
			t.Fatalf("release: got %s\nwant exit 0", r)
		}
		acquire(t, env, "job")
		before := get(t, srvs[0], "job")
		for _, op := range []string{"release", "refresh"} {
			r := locksmith(t, []string{env, handleEnv + "=" + old}, op, "job")
			if r.code != exitLost || !strings.Contains(r.stderr, "not held any more") {
				t.Errorf("%s: got %s\nwant exit %d, \"not held any more\"", op, r, exitLost)
			}
		}
		if after := get(t, srvs[0], "job"); after != before {
			t.Errorf("got the newer holder's lock changed or deleted, want it intact")
		}
	})

	t.Run("a handle of a lock that expired takes nothing", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		h, _ := acquire(t, env, "job")
		if _, err := srvs[0].Command(ctx(t), "DEL", "job"); err != nil { // as an expiry does
			t.Fatal(err)
		}
		for _, op := range []string{"refresh", "release"} {
			if r := locksmith(t, []string{env, handleEnv + "=" + h}, op, "job"); r.code != exitLost {
				t.Errorf("%s: got %s\nwant exit %d", op, r, exitLost)
			}
		}
		if v := get(t, srvs[0], "job"); v != "" {
			t.Errorf("got the lock taken again, want it free")
		}
	})

	t.Run("a malformed or missing handle is a usage error", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		acquire(t, env, "job")
		before := get(t, srvs[0], "job")
		for _, h := range []string{"", "x", "not-a-token.e30", strings.Repeat("A", 22) + ".!!"} {
			r := locksmith(t, []string{env, handleEnv + "=" + h}, "release", "job")
			if r.code != exitUsage || (h != "" && strings.Contains(r.stderr, h)) {
				t.Errorf("handle %q: got %s\nwant exit %d, and the handle not quoted", h, r, exitUsage)
			}
		}
		if get(t, srvs[0], "job") != before {
			t.Errorf("got the lock changed, want it intact")
		}
	})

	t.Run("the handle never appears in stderr", func(t *testing.T) {
		env := url(t, "single")
		r := locksmith(t, []string{env}, "-v", "acquire", "job")
		h := strings.TrimSpace(r.stdout)
		decoded, err := decodeHandle(h)
		if err != nil {
			t.Fatalf("acquire: got %s: %v", r, err)
		}
		token := decoded.token
		with := []string{env, handleEnv + "=" + h}
		rs := []result{
			{stderr: r.stderr},
			locksmith(t, with, "-v", "refresh", "job"),
			locksmith(t, with, "-v", "refresh", "job", "--ttl", "-1s"),
			locksmith(t, with, "-v", "release", "job"),
			locksmith(t, with, "-v", "release", "job"), // not held any more
			locksmith(t, with, "-v", "refresh", "job"),
			locksmith(t, []string{env}, "-v", "acquire", "--json", "job"),
		}
		noSecret(t, token, rs...)
	})

	t.Run("busy with -n: not obtained", func(t *testing.T) {
		env := url(t, "single")
		acquire(t, env, "job")
		if r := locksmith(t, []string{env}, "acquire", "-n", "job"); r.code != exitNotObtained || r.stdout != "" {
			t.Errorf("got %s\nwant exit %d, nothing on stdout", r, exitNotObtained)
		}
		if r := locksmith(t, []string{env}, "acquire", "-w", "100ms", "job"); r.code != exitNotObtained {
			t.Errorf("-w 100ms: got %s\nwant exit %d", r, exitNotObtained)
		}
	})

	t.Run("--json: the fence, the fingerprint, the handle", func(t *testing.T) {
		env := url(t, "single")
		r := locksmith(t, []string{env}, "acquire", "--json", "--ttl", "1m", "job")
		var got struct {
			Handle      string `json:"handle"`
			Fingerprint string `json:"fingerprint"`
			Fence       int64  `json:"fence"`
			TTL         int64  `json:"ttl_ms"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
			t.Fatalf("got %s (%v)\nwant exit 0 and JSON", r, err)
		}
		h, err := decodeHandle(got.Handle)
		if err != nil || got.Fingerprint != strategy.Fingerprint(h.token) || got.Fence <= 0 || got.TTL != 60000 {
			t.Errorf("got %+v (%v), want a handle, its fingerprint, a fence, ttl_ms 60000", got, err)
		}
	})

	t.Run("setnx-getset cannot hand a lock over: refused before it is taken", func(t *testing.T) {
		env, srvs := servers(t, "setnx-getset", 1)
		r := locksmith(t, []string{env}, "acquire", "job")
		if r.code != exitUsage || !strings.Contains(r.stderr, "setnx-getset") || !strings.Contains(r.stderr, "locksmith run") {
			t.Errorf("got %s\nwant exit %d naming setnx-getset and locksmith run", r, exitUsage)
		}
		if v := get(t, srvs[0], "job"); v != "" {
			t.Errorf("got the key set to %q, want nothing written", v)
		}
	})

	t.Run("bad durations are usage errors", func(t *testing.T) {
		env := url(t, "single")
		for _, args := range [][]string{
			{"acquire", "job", "--ttl", "0"},
			{"acquire", "job", "-w", "-1s"},
			{"acquire", "job", "-n", "-w", "1s"},
			{"refresh", "job", "--ttl", "-1s"},
		} {
			if r := locksmith(t, []string{env, handleEnv + "=" + strings.Repeat("A", 22) + "."}, args...); r.code != exitUsage {
				t.Errorf("%s: got %s\nwant exit %d", strings.Join(args, " "), r, exitUsage)
			}
		}
	})
}
