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

// TestScriptInFIPSMode: in FIPS 140 mode, where crypto/sha1 panics, a
// script computes no SHA-1. Its first Run learns the digest from the
// server with SCRIPT LOAD, and later runs send EVALSHA; where the server
// refuses SCRIPT LOAD, every run sends EVAL; RunEach does the same. Over
// every driver.
func TestScriptInFIPSMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	driver.InFIPSMode(t)
	srv := redistest.Start(t, 1)[0]
	noLoad := redistest.Start(t, 1)[0]
	if _, err := noLoad.Command(ctx, "ACL", "SETUSER", "default", "-script"); err != nil {
		t.Fatalf("ACL SETUSER default -script: %v", err)
	}
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			t.Run("SCRIPT LOAD tells the digest", func(t *testing.T) {
				s := driver.NewScript("return 'fips " + d.Name + "'")
				if got := s.SHA1(); got != "" {
					t.Fatalf("SHA1 before a run = %q, want \"\": nothing computed", got)
				}
				c := d.Conn(t, srv.Addr)
				for range 2 {
					if got, err := s.Run(ctx, c, nil); err != nil || got != "fips "+d.Name {
						t.Fatalf("Run = %v, %v; want %q, nil", got, err, "fips "+d.Name)
					}
				}
				want, err := srv.Command(ctx, "SCRIPT", "LOAD", "return 'fips "+d.Name+"'")
				if err != nil {
					t.Fatal(err)
				}
				if got := s.SHA1(); got != want {
					t.Errorf("SHA1 after a run = %q, want %q, SCRIPT LOAD's", got, want)
				}
			})
			t.Run("EVAL where SCRIPT LOAD is refused", func(t *testing.T) {
				s := driver.NewScript("return 'no load " + d.Name + "'")
				c := d.Conn(t, noLoad.Addr)
				for range 2 {
					if got, err := s.Run(ctx, c, nil); err != nil || got != "no load "+d.Name {
						t.Fatalf("Run = %v, %v; want %q, nil", got, err, "no load "+d.Name)
					}
				}
				if got := s.SHA1(); got != "" {
					t.Errorf("SHA1 = %q, want \"\": the server told none", got)
				}
			})
			for name, server := range map[string]*redistest.Server{"SCRIPT LOAD allowed": srv, "SCRIPT LOAD refused": noLoad} {
				t.Run("RunEach, "+name, func(t *testing.T) {
					s := driver.NewScript("return ARGV[1] .. ' each " + d.Name + "'")
					calls := []driver.Call{{Args: []any{"a"}}, {Args: []any{"b"}}}
					s.RunEach(ctx, d.Conn(t, server.Addr), calls)
					for i, want := range []string{"a each " + d.Name, "b each " + d.Name} {
						if calls[i].Reply != want || calls[i].Err != nil {
							t.Errorf("call %d = %v, %v; want %q, nil", i, calls[i].Reply, calls[i].Err, want)
						}
					}
				})
			}
		})
	}
}
