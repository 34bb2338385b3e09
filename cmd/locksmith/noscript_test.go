package main

import (
	"context"
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestWithoutScripts: with without_scripts=true in its configuration,
// locksmith locks for a user whose ACL denies @scripting: run, acquire,
// refresh, release and inspect succeed, several names as one lock are
// refused, and the server counts no script command (INFO commandstats, which counts refused calls too).
func TestWithoutScripts(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	const password = "Pa55-word-of-noscript"
	srv := redistest.Start(t, 1, "--user", "noscript", "on", ">"+password, "~*", "&*", "+@all", "-@scripting")[0]
	env := "LOCKSMITH_URL=single://noscript:" + password + "@" + srv.Addr + "?without_scripts=true"
	t.Run("run", func(t *testing.T) {
		if r := locksmith(t, []string{env}, "run", "job", "--", "true"); r.code != 0 {
			t.Errorf("got %s\nwant exit 0", r)
		}
	})
	t.Run("acquire, inspect, refresh, release", func(t *testing.T) {
		handle, _ := acquire(t, env, "held", "--ttl", "1m")
		if got, r := inspectJSON(t, env, "held"); r.code != 0 || !got.Held {
			t.Errorf("inspect: got %s\nwant exit 0, held", r)
		}
		for _, cmd := range []string{"refresh", "release"} {
			if r := locksmith(t, []string{env, handleEnv + "=" + handle}, cmd, "held"); r.code != 0 {
				t.Errorf("%s: got %s\nwant exit 0", cmd, r)
			}
		}
		if got, r := inspectJSON(t, env, "held"); r.code != exitNotHeld || got.Held {
			t.Errorf("inspect after release: got %s\nwant exit %d, free", r, exitNotHeld)
		}
	})
	t.Run("several names are one lock, released after", func(t *testing.T) {
		if r := locksmith(t, []string{env}, "run", "many-a", "many-b", "--", "sh", "-c", `test "$LOCKSMITH_LOCKS" = "many-a many-b"`); r.code != 0 {
			t.Errorf("got %s\nwant exit 0", r)
		}
		for _, k := range []string{"many-a", "many-b"} {
			if n, err := srv.Command(context.Background(), "EXISTS", k); err != nil || n != "0" {
				t.Errorf("EXISTS %s: got %s (%v), want 0", k, n, err)
			}
		}
	})
	stats, err := srv.Command(context.Background(), "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "script"} {
		if strings.Contains(stats, "cmdstat_"+c+":") {
			t.Errorf("INFO commandstats counts %s, want no script sent", c)
		}
	}
}
