package main

import (
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

func TestFenceSet(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	t.Run("sets the key with --token", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		if r := locksmith(t, []string{env}, "fence", "set", "orders:42", "paid", "--token", "7"); r.code != 0 {
			t.Fatalf("got %s\nwant exit 0", r)
		}
		if got := get(t, srvs[0], "orders:42"); got != "paid" {
			t.Errorf("orders:42: got %q, want %q", got, "paid")
		}
		if got := get(t, srvs[0], "{orders:42}:fenced"); got != "7" {
			t.Errorf("the fence: got %q, want %q", got, "7")
		}
	})

	t.Run("a stale token exits 1 naming the key and both tokens, and writes nothing", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		if r := locksmith(t, []string{env}, "fence", "set", "orders:42", "paid", "--token", "7"); r.code != 0 {
			t.Fatalf("got %s\nwant exit 0", r)
		}
		r := locksmith(t, []string{env}, "fence", "set", "orders:42", "refunded", "--token", "6")
		if r.code != exitStale {
			t.Fatalf("got %s\nwant exit %d", r, exitStale)
		}
		for _, want := range []string{"orders:42", "6", "7", "stale"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("got stderr %q, want %q in it", r.stderr, want)
			}
		}
		if got := get(t, srvs[0], "orders:42"); got != "paid" {
			t.Errorf("orders:42: got %q, want %q", got, "paid")
		}
	})

	t.Run("the token comes from LOCKSMITH_FENCE without --token", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		if r := locksmith(t, []string{env, "LOCKSMITH_FENCE=9"}, "fence", "set", "k", "v"); r.code != 0 {
			t.Fatalf("got %s\nwant exit 0", r)
		}
		if got := get(t, srvs[0], "{k}:fenced"); got != "9" {
			t.Errorf("the fence: got %q, want %q", got, "9")
		}
	})

	t.Run("--token wins over LOCKSMITH_FENCE", func(t *testing.T) {
		env, srvs := servers(t, "single", 1)
		if r := locksmith(t, []string{env, "LOCKSMITH_FENCE=9"}, "fence", "set", "k", "v", "--token", "11"); r.code != 0 {
			t.Fatalf("got %s\nwant exit 0", r)
		}
		if got := get(t, srvs[0], "{k}:fenced"); got != "11" {
			t.Errorf("the fence: got %q, want %q", got, "11")
		}
	})

	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"no token", nil, []string{"k", "v"}},
		{"an empty LOCKSMITH_FENCE", []string{"LOCKSMITH_FENCE="}, []string{"k", "v"}},
		{"a LOCKSMITH_FENCE that is no number", []string{"LOCKSMITH_FENCE=stale"}, []string{"k", "v"}},
		{"a zero --token", nil, []string{"k", "v", "--token", "0"}},
		{"a --token that is no number", nil, []string{"k", "v", "--token", "x"}},
		{"a key with '}' but no hash tag", nil, []string{"a}b", "v", "--token", "1"}},
		{"one argument", nil, []string{"k", "--token", "1"}},
	} {
		t.Run(tc.name+" is a usage error", func(t *testing.T) {
			env, srvs := servers(t, "single", 1)
			r := locksmith(t, append([]string{env}, tc.env...), append([]string{"fence", "set"}, tc.args...)...)
			if r.code != exitUsage {
				t.Errorf("got %s\nwant exit %d", r, exitUsage)
			}
			if got := send(t, srvs[0], "DBSIZE"); got != "0" {
				t.Errorf("DBSIZE: got %s, want 0: nothing written", got)
			}
		})
	}

	t.Run("Redis unavailable exits 69", func(t *testing.T) {
		env := "LOCKSMITH_URL=single://" + redistest.ClosedAddr(t)
		if r := locksmith(t, []string{env}, "fence", "set", "k", "v", "--token", "1"); r.code != exitUnavailable {
			t.Errorf("got %s\nwant exit %d", r, exitUnavailable)
		}
	})

	t.Run("redlock's nodes are a usage error", func(t *testing.T) {
		env, _ := servers(t, "redlock", 3)
		if r := locksmith(t, []string{env}, "fence", "set", "k", "v", "--token", "1"); r.code != exitUsage {
			t.Errorf("got %s\nwant exit %d", r, exitUsage)
		}
	})
}

// TestFenceSetUnderRun: the command of a locksmith run writes with the
// run's fencing token, from LOCKSMITH_FENCE; a token below it is refused
// afterwards.
func TestFenceSetUnderRun(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv, env := runServer(t)
	r := locksmith(t, []string{env}, "run", "orders", "--", bin, "fence", "set", "orders:42", "paid")
	if r.code != 0 {
		t.Fatalf("got %s\nwant exit 0", r)
	}
	token := send(t, srv, "GET", "{orders}:fence") // the lock's counter: the run's token
	if got := send(t, srv, "GET", "{orders:42}:fenced"); got != token {
		t.Errorf("the fence of orders:42: got %q, want the run's token %q", got, token)
	}
	if got := send(t, srv, "GET", "orders:42"); got != "paid" {
		t.Errorf("orders:42: got %q, want %q", got, "paid")
	}
	r = locksmith(t, []string{env}, "fence", "set", "orders:42", "stale", "--token", "1")
	if r.code != exitStale {
		t.Errorf("a token below the run's: got %s\nwant exit %d", r, exitStale)
	}
}
