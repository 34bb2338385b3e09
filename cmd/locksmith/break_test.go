package main

import (
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

func TestBreak(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	t.Run("no guard is a usage error naming the three", func(t *testing.T) {
		env := url(t, "single")
		acquire(t, env, "job")
		r := locksmith(t, []string{env}, "break", "job")
		if r.code != exitUsage {
			t.Errorf("got %s\nwant exit %d", r, exitUsage)
		}
		for _, want := range []string{"--fingerprint", "--older-than", "--force"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("got stderr %q, want %q in it", r.stderr, want)
			}
		}
	})

	t.Run("two guards are a usage error", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		acquire(t, env, "job")
		before := get(t, srvs[0], "job")
		if r := locksmith(t, []string{env}, "break", "job", "--force", "--older-than", "1s"); r.code != exitUsage {
			t.Errorf("got %s\nwant exit %d", r, exitUsage)
		}
		if after := get(t, srvs[0], "job"); after != before {
			t.Errorf("got the lock's value changed, want it intact")
		}
	})

	t.Run("an empty --fingerprint is a usage error, not --force", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		acquire(t, env, "job")
		if r := locksmith(t, []string{env}, "break", "job", "--fingerprint", ""); r.code != exitUsage {
			t.Errorf("got %s\nwant exit %d", r, exitUsage)
		}
		if get(t, srvs[0], "job") == "" {
			t.Errorf("got the lock deleted, want it intact")
		}
	})

	t.Run("a --fingerprint that is no fingerprint is a usage error", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		acquire(t, env, "job")
		r := locksmith(t, []string{env}, "break", "job", "--fingerprint", "xyz")
		if r.code != exitUsage || !strings.Contains(r.stderr, "invalid fingerprint") {
			t.Errorf("got %s\nwant exit %d, naming the fingerprint", r, exitUsage)
		}
		if get(t, srvs[0], "job") == "" {
			t.Errorf("got the lock deleted, want it intact")
		}
	})

	t.Run("a token passed as --fingerprint is a usage error, and not shown", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		_, token := acquire(t, env, "job")
		r := locksmith(t, []string{env}, "break", "job", "--fingerprint", token)
		if r.code != exitUsage || !strings.Contains(r.stderr, "invalid fingerprint") {
			t.Errorf("got %s\nwant exit %d, naming the fingerprint", r, exitUsage)
		}
		noSecret(t, token, r)
		if get(t, srvs[0], "job") == "" {
			t.Errorf("got the lock deleted, want it intact")
		}
	})

	t.Run("--fingerprint of the holder breaks it, and says what it broke", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		_, token := acquire(t, env, "job", "--ttl", "1m")
		fp := strategy.Fingerprint(token)
		r := locksmith(t, []string{env}, "break", "job", "--fingerprint", fp)
		if r.code != 0 {
			t.Fatalf("got %s\nwant exit 0", r)
		}
		if v := get(t, srvs[0], "job"); v != "" {
			t.Errorf("got the key still set, want it deleted")
		}
		for _, want := range []string{fp, "broken", "yes", "acquire", "ttl", "locksmith run", "fencing"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("got %s\nwant %q in it", r, want)
			}
		}
		noSecret(t, token, r)
	})

	t.Run("a stale fingerprint deletes nothing", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		old, oldToken := acquire(t, env, "job")
		if r := locksmith(t, []string{env, handleEnv + "=" + old}, "release", "job"); r.code != 0 {
			t.Fatalf("release: got %s\nwant exit 0", r)
		}
		_, newToken := acquire(t, env, "job")
		before := get(t, srvs[0], "job")
		r := locksmith(t, []string{env}, "break", "job", "--fingerprint", strategy.Fingerprint(oldToken))
		if r.code != exitNotHeld {
			t.Errorf("got %s\nwant exit %d", r, exitNotHeld)
		}
		if after := get(t, srvs[0], "job"); after != before || !strings.HasPrefix(after, newToken) {
			t.Errorf("got the newer holder's lock changed or deleted, want it intact")
		}
		if !strings.Contains(r.stderr, "nothing broken") || !strings.Contains(r.stderr, strategy.Fingerprint(newToken)) {
			t.Errorf("got stderr %q, want \"nothing broken\" and the holder's fingerprint", r.stderr)
		}
	})

	t.Run("--older-than a younger holder deletes nothing", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		acquire(t, env, "job", "--ttl", "1m")
		before := get(t, srvs[0], "job")
		r := locksmith(t, []string{env}, "break", "job", "--older-than", "1h")
		if r.code != exitNotHeld || !strings.Contains(r.stderr, "nothing broken") {
			t.Errorf("got %s\nwant exit %d, \"nothing broken\"", r, exitNotHeld)
		}
		if after := get(t, srvs[0], "job"); after != before {
			t.Errorf("got the lock changed or deleted, want it intact")
		}
	})

	t.Run("--older-than an older locksmith holder breaks it", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		h := me("run", "backup.sh")
		h.Start = h.Start.Add(-2 * time.Hour)
		if _, err := locker(t, env).Obtain(ctx(t), "job", time.Minute, lock.WithMetadata(h.String())); err != nil {
			t.Fatal(err)
		}
		r := locksmith(t, []string{env}, "break", "job", "--older-than", "1h")
		if r.code != 0 || !strings.Contains(r.stdout, "backup.sh") {
			t.Errorf("got %s\nwant exit 0 and the holder's command", r)
		}
		if v := get(t, srvs[0], "job"); v != "" {
			t.Errorf("got the key still set, want it deleted")
		}
	})

	t.Run("--older-than a holder without locksmith metadata deletes nothing", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		if _, err := locker(t, env).Obtain(ctx(t), "job", time.Minute, lock.WithMetadata("worker-7")); err != nil {
			t.Fatal(err)
		}
		r := locksmith(t, []string{env}, "break", "job", "--older-than", "1ms")
		if r.code != exitNotHeld || !strings.Contains(r.stderr, "no locksmith metadata") {
			t.Errorf("got %s\nwant exit %d, \"no locksmith metadata\"", r, exitNotHeld)
		}
		if get(t, srvs[0], "job") == "" {
			t.Errorf("got the lock deleted, want it intact")
		}
	})

	t.Run("--force breaks whoever holds it", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		if _, err := locker(t, env).Obtain(ctx(t), "job", time.Minute); err != nil {
			t.Fatal(err)
		}
		if r := locksmith(t, []string{env}, "break", "job", "--force"); r.code != 0 {
			t.Errorf("got %s\nwant exit 0", r)
		}
		if v := get(t, srvs[0], "job"); v != "" {
			t.Errorf("got the key still set, want it deleted")
		}
	})

	t.Run("a free lock: nothing to break", func(t *testing.T) {
		env := url(t, "single")
		if r := locksmith(t, []string{env}, "break", "job", "--force"); r.code != exitNotHeld || !strings.Contains(r.stderr, "not held") {
			t.Errorf("got %s\nwant exit %d, \"not held\"", r, exitNotHeld)
		}
	})

	t.Run("--json: what it broke, no token", func(t *testing.T) {
		env := url(t, "single")
		_, token := acquire(t, env, "job")
		r := locksmith(t, []string{env}, "break", "--json", "job", "--force")
		got := parse(t, r)
		if r.code != 0 || !got.Broken || !got.Held || got.Fingerprint != strategy.Fingerprint(token) || got.Holder == nil || got.Note == "" {
			t.Errorf("got %s\nwant exit 0, broken, the holder's fingerprint and metadata, a note", r)
		}
		noSecret(t, token, r)
	})

	t.Run("redlock: every node", func(t *testing.T) {
		env, srvs := servers(t, "redlock", 3)
		token := everyNode(t, env, "job")
		r := locksmith(t, []string{env}, "break", "--json", "job", "--fingerprint", strategy.Fingerprint(token))
		got := parse(t, r)
		if r.code != 0 || !got.Broken || len(got.Nodes) != 3 {
			t.Fatalf("got %s\nwant exit 0, broken, 3 nodes", r)
		}
		for i, s := range srvs {
			if n := got.Nodes[i]; n.Node != s.Addr || !n.Held || n.Fingerprint != strategy.Fingerprint(token) || n.Broken == nil || !*n.Broken {
				t.Errorf("got node %d %+v, want %s held by the fingerprint, broken", i, n, s.Addr)
			}
			if v := get(t, s, "job"); v != "" {
				t.Errorf("got the key still set on %s, want it deleted", s.Addr)
			}
		}
	})

	t.Run("redlock with a node down: the others broken, and exit 69", func(t *testing.T) {
		env, srvs := servers(t, "redlock", 3)
		everyNode(t, env, "job")
		srvs[1].Kill()
		r := locksmith(t, []string{env}, "break", "--json", "job", "--force")
		got := parse(t, r)
		if r.code != exitUnavailable || got.Broken || got.Error == "" || len(got.Nodes) != 3 {
			t.Fatalf("got %s\nwant exit %d, broken false, an error, 3 nodes", r, exitUnavailable)
		}
		for i, n := range got.Nodes {
			if want := i != 1; n.Broken == nil || *n.Broken != want {
				t.Errorf("got node %d %+v, want broken %v", i, n, want)
			}
		}
		for _, i := range []int{0, 2} {
			if v := get(t, srvs[i], "job"); v != "" {
				t.Errorf("got the key still set on %s, want it deleted", srvs[i].Addr)
			}
		}
	})

	t.Run("a break wakes a waiter", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		acquire(t, env, "job", "--ttl", "1h")
		cmd, stdout, stderr := command(t, []string{env}, "acquire", "-w", "1m", "job")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		poll(t, func() (inspected, bool) {
			got, _ := inspectJSON(t, env, "job")
			return got, got.Waiters == 1
		})
		if r := locksmith(t, []string{env}, "break", "job", "--force"); r.code != 0 {
			t.Fatalf("break: got %s\nwant exit 0", r)
		}
		r := wait(t, cmd, stdout, stderr)
		if r.code != 0 {
			t.Fatalf("the waiter: got %s\nwant exit 0", r)
		}
		h, err := decodeHandle(r.stdout)
		if err != nil || !strings.HasPrefix(get(t, srvs[0], "job"), h.token) {
			t.Errorf("got the lock not held by the waiter's handle (%v), want the waiter to hold it", err)
		}
	})
}
