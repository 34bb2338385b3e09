package main

import (
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// readTimeout is the read_timeout of the servers that TestNoAnswer pauses.
const readTimeout = 2 * time.Second

// TestNoAnswer: against a paused server (SIGSTOP), every subcommand exits
// with 69 and says that Redis did not answer, never that another owner
// holds the lock; one that may leave a key behind says which, and until
// when. Each returns within its --wait plus the read timeout plus 1s: the
// check allows a second more, for a loaded machine (before, a clean-up
// added up to 5s, and rueidis's client waited for its first dial as it
// opened). The subcommands run over go-redis, and those that do not wait
// over each driver. It is the package's one test that times the binary,
// so it runs before the others, which run side by side (without
// LOCKSMITH_FULL=1).
func TestNoAnswer(t *testing.T) {
	type call struct {
		name string
		args []string
		wait time.Duration // --wait
		left bool          // it says that the key may stay until its TTL
	}
	calls := []call{
		{"run -w", []string{"run", "-w", "1s", "job", "--", "true"}, time.Second, true},
		{"run -n", []string{"run", "-n", "job", "--", "true"}, 0, true},
		{"acquire -w", []string{"acquire", "-w", "1s", "job"}, time.Second, true},
		{"acquire -n", []string{"acquire", "-n", "job"}, 0, true},
		{"inspect", []string{"inspect", "job"}, 0, false},
		{"break", []string{"break", "job", "--force"}, 0, false},
	}
	type driverCall struct {
		call
		driver string
	}
	var tcs []driverCall
	for _, c := range calls {
		tcs = append(tcs, driverCall{c, "goredis"})
	}
	for _, driver := range []string{"redigo", "rueidis"} {
		tcs = append(tcs, driverCall{calls[1], driver}, driverCall{calls[4], driver})
	}
	for _, tc := range tcs {
		t.Run(tc.driver+"/"+tc.name, func(t *testing.T) {
			srv, env := runServer(t)
			env += "?driver=" + tc.driver + "&read_timeout=" + readTimeout.String()
			srv.Pause()
			defer srv.Resume()
			start := time.Now()
			r := locksmith(t, []string{env}, tc.args...)
			took := time.Since(start)
			t.Logf("locksmith %s against a paused server: exit %d after %v\n%s", strings.Join(tc.args, " "), r.code, took.Round(time.Millisecond), r.stderr)
			if r.code != exitUnavailable {
				t.Errorf("got %s\nwant exit %d", r, exitUnavailable)
			}
			if !strings.Contains(r.stderr, "Redis did not answer") || strings.Contains(r.stderr, "held by another owner") {
				t.Errorf("got stderr %q, want it to say that Redis did not answer, and not that another owner holds the lock", r.stderr)
			}
			if want := `lock "job": Redis did not answer, and its key may stay until its TTL (30s) ends`; strings.Contains(r.stderr, want) != tc.left {
				t.Errorf("got stderr %q, want %q in it: %v", r.stderr, want, tc.left)
			}
			if bound := tc.wait + readTimeout + 2*time.Second; took > bound {
				t.Errorf("got exit after %v, want it within %v (--wait %v, read_timeout %v)", took, bound, tc.wait, readTimeout)
			}
		})
	}

	t.Run("refresh and release", func(t *testing.T) {
		srv, env := runServer(t)
		env += "?read_timeout=" + readTimeout.String()
		handle, _ := acquire(t, env, "job")
		srv.Pause()
		defer srv.Resume()
		for _, verb := range []string{"refresh", "release"} {
			start := time.Now()
			r := locksmith(t, []string{env, handleEnv + "=" + handle}, verb, "job")
			took := time.Since(start)
			if r.code != exitUnavailable || !strings.Contains(r.stderr, "Redis did not answer") {
				t.Errorf("%s: got %s\nwant exit %d, saying that Redis did not answer", verb, r, exitUnavailable)
			}
			if bound := readTimeout + 2*time.Second; took > bound {
				t.Errorf("%s: got exit after %v, want it within %v", verb, took, bound)
			}
		}
	})
}

// TestRunHeldThenNoAnswer: a run that found the lock held, and then got no
// answer, exits with 75 (the lock was held) and says both.
func TestRunHeldThenNoAnswer(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	hold(t, srv, "job")
	done := start(t, []string{env}, "run", "-w", "3s", "job", "--", "true")
	// Queued: its first attempt found the lock held.
	for deadline := time.Now().Add(hang / 2); send(t, srv, "EXISTS", "{job}:q") != "1"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run did not queue for the held lock within %v", hang/2)
		}
	}
	srv.Pause()
	defer srv.Resume()
	r := done()
	if r.code != exitNotObtained {
		t.Errorf("got %s\nwant exit %d", r, exitNotObtained)
	}
	if want := `lock "job" was held by another owner, then Redis did not answer`; !strings.Contains(r.stderr, want) {
		t.Errorf("got stderr %q, want %q in it", r.stderr, want)
	}
}
