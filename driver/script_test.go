package driver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestScriptSHA1: the SHA-1 that NewScript computes once is the one the
// server reports from SCRIPT LOAD, so that EVALSHA finds a script EVAL ran.
func TestScriptSHA1(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	for _, src := range []string{
		"return 1",
		"return redis.call('GET', KEYS[1])\n-- a comment, and bytes: \x00\xff é",
	} {
		got, err := srv.Command(context.Background(), "SCRIPT", "LOAD", src)
		if err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
		if want := driver.NewScript(src).SHA1(); got != want {
			t.Errorf("SCRIPT LOAD of %q = %s, want %s, the SHA-1 of NewScript", src, got, want)
		}
	}
}

// TestScriptEvicted: Run runs a script again once the server evicted it
// from its cache, as Valkey 8 (and Redis from 7.4) does with the scripts
// EVAL loaded, the least recently used first, past 500 of them: its
// EVALSHA gets NOSCRIPT, and its EVAL caches it again.
func TestScriptEvicted(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			c := d.Conn(t, srv.Addr)
			s := driver.NewScript("return 'evicted " + d.Name + "'")
			if _, err := s.Run(ctx, c, nil); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			for i := range 500 {
				if _, err := c.Eval(ctx, fmt.Sprintf("return %d -- %s", i, d.Name), nil); err != nil {
					t.Fatalf("EVAL of another script: %v", err)
				}
			}
			if cached, err := srv.Command(ctx, "SCRIPT", "EXISTS", s.SHA1()); err != nil || cached != "0" {
				t.Skipf("SCRIPT EXISTS after 500 other scripts = %q, %v: this server does not evict EVAL's scripts (Redis before 7.4)", cached, err)
			}
			if got, err := s.Run(ctx, c, nil); err != nil || got != "evicted "+d.Name {
				t.Errorf("Run of an evicted script = %v, %v; want %q, nil", got, err, "evicted "+d.Name)
			}
		})
	}
}
