package main

import (
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestRedisURL: locksmith takes go-redis's URLs, redis://host:port, in
// LOCKSMITH_URL and in --url, as the single strategy over that server.
func TestRedisURL(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	env := url(t, "redis")
	acquire(t, env, "job", "--ttl", "1m")

	t.Run("LOCKSMITH_URL", func(t *testing.T) {
		got, r := inspectJSON(t, env, "job")
		if r.code != 0 || !got.Held || got.Verdict != "held" {
			t.Errorf("got %s\nwant exit 0, held", r)
		}
	})
	t.Run("LOCKSMITH_URL, a free lock", func(t *testing.T) {
		r := locksmith(t, []string{env}, "inspect", "x")
		if r.code != exitNotHeld || !strings.Contains(r.stdout, "free") {
			t.Errorf("got %s\nwant exit %d and \"free\"", r, exitNotHeld)
		}
	})
	t.Run("--url", func(t *testing.T) {
		r := locksmith(t, nil, "--url", strings.TrimPrefix(env, "LOCKSMITH_URL="), "inspect", "job")
		if r.code != 0 || !strings.Contains(r.stdout, "held") {
			t.Errorf("got %s\nwant exit 0 and \"held\"", r)
		}
	})
	t.Run("a go-redis option that is no setting", func(t *testing.T) {
		r := locksmith(t, nil, "--url", strings.TrimPrefix(env, "LOCKSMITH_URL=")+"?max_retries=2", "inspect", "job")
		if r.code != exitConfig || !strings.Contains(r.stderr, `option "max_retries": is not a locksmith setting`) {
			t.Errorf("got %s\nwant exit %d, naming max_retries", r, exitConfig)
		}
	})
}
