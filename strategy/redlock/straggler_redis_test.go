package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// leftOn polls, up to 10s, until no server holds key, and returns where it
// is still held.
func leftOn(servers []*redistest.Server, key string) []string {
	end := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, s := range servers {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			n, err := s.Command(ctx, "EXISTS", key)
			cancel()
			if err != nil || n != "0" {
				left = append(left, fmt.Sprintf("%s (EXISTS = %q, %v)", s.Addr, n, err))
			}
		}
		if len(left) == 0 || time.Now().After(end) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReleaseAfterStragglers: a Release that returned nil leaves no key
// behind, even on the nodes whose acquire was still on its way when the
// quorum was reached: it deletes there after that acquire returned, in the
// background once its context is done.
func TestReleaseAfterStragglers(t *testing.T) {
	servers := redistest.Start(t, 5)
	for _, d := range []string{"goredis-resp3", "redigo"} {
		var open func(t testing.TB, addr string) driver.Conn
		for _, dr := range redistest.Drivers() {
			if dr.Name == d {
				open = dr.Conn
			}
		}
		conns := func(t *testing.T) []driver.Conn {
			c := make([]driver.Conn, len(servers))
			for i, s := range servers {
				c[i] = open(t, s.Addr)
			}
			return c
		}
		t.Run(d+"/paused nodes", func(t *testing.T) {
			l, err := redlock.New(conns(t))
			if err != nil {
				t.Fatal(err)
			}
			key := conformance.Key(t)
			paused := servers[3:]
			for _, s := range paused {
				s.Pause()
				defer s.Resume()
			}
			lk, err := l.Obtain(context.Background(), key, 30*time.Second)
			if err != nil {
				t.Fatalf("Obtain with 3 of 5 nodes up = %v, want a lock", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			if err := lk.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil (a quorum released)", err)
			}
			t.Logf("Release with a 200ms context returned after %v", time.Since(start).Round(time.Millisecond))
			time.Sleep(300 * time.Millisecond)
			for _, s := range paused {
				s.Resume()
			}
			if left := leftOn(servers, key); len(left) > 0 {
				t.Errorf("10s after the nodes resumed, the released key is still on %s; want it on none", strings.Join(left, ", "))
			}
		})
		t.Run(d+"/cold start", func(t *testing.T) {
			for i := range 5 { // fresh clients: the acquires dial, and some straggle
				l, err := redlock.New(conns(t))
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("%s:%d", conformance.Key(t), i)
				lk, err := l.Obtain(context.Background(), key, 30*time.Second)
				if err != nil {
					t.Fatalf("Obtain = %v, want a lock", err)
				}
				if err := lk.Release(context.Background()); err != nil {
					t.Fatalf("Release = %v, want nil", err)
				}
				if left := leftOn(servers, key); len(left) > 0 {
					t.Errorf("10s after Release returned nil, the key is still on %s; want it on none", strings.Join(left, ", "))
				}
			}
		})
	}
}
