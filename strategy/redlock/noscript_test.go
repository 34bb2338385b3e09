package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// TestWithoutScriptsConformance: the whole suite passes with every node
// without scripts, on Redis 7.0 through transactions and on Valkey 8.1
// with SET IFEQ (LOCKSMITH_REDIS_SERVER), and with some nodes without
// scripts and the others with, over the mixed drivers, whose nodes use
// every driver (each driver's own transactions run in single's and
// setnx-getset's suites without scripts). README's command runs every node
// without scripts; LOCKSMITH_FULL=1 also runs nodes 1 and 3 without
// scripts, one after the other.
func TestWithoutScriptsConformance(t *testing.T) {
	servers := redistest.Start(t, nodes)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	combos := onlyMixed(matrix.Prefix("all", matrix.WithoutScripts(matrix.Redlock(addrs))))
	if redistest.Full() {
		combos = append(combos, onlyMixed(matrix.Prefix("some", matrix.WithoutScripts(matrix.Redlock(addrs), 1, 3)))...)
	}
	matrix.Run(t, combos, 1)
}

// TestWithoutScriptsOnSomeNodes: with nodes 0 and 2 marked
// driver.WithoutScripts, every
// operation sends no script to nodes 0 and 2 (INFO commandstats), and
// scripts to node 1 as ever.
func TestWithoutScriptsOnSomeNodes(t *testing.T) {
	servers := redistest.Start(t, 3)
	ctx := context.Background()
	l := newLocker(t, matrix.Marked(connect(t, servers, redistest.Drivers()...), 0, 2))
	key := conformance.Key(t)
	lk, err := l.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	if err := lk.Refresh(ctx, time.Minute); err != nil {
		t.Errorf("Refresh = %v, want nil", err)
	}
	if _, err := lk.TTL(ctx); err != nil {
		t.Errorf("TTL = %v, want nil", err)
	}
	if st, err := l.Inspect(ctx, key); err != nil || !st.Held {
		t.Errorf("Inspect = %+v, %v; want held", st, err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Errorf("Release = %v, want nil", err)
	}
	for i, s := range servers {
		ran, err := s.Scripts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(ran) > 0, i == 1; got != want {
			t.Errorf("node %d: INFO commandstats counts scripts %v; want scripts sent = %v", i, ran, want)
		}
	}
}

// TestWithoutScriptsRefusals: New refuses, with an *ArgumentError,
// WithRestartGuard (its acquisition is a script) with a node without
// scripts, and a node without scripts
// whose driver cannot pin a connection (driver.Pinner), which transactions
// need; a node with scripts needs no such driver.
func TestWithoutScriptsRefusals(t *testing.T) {
	conns := connect(t, redistest.Start(t, 3), driverNamed("goredis-resp3"))
	unpinned := []driver.Conn{conns[0], struct{ driver.Conn }{conns[1]}, conns[2]}
	for _, c := range []struct {
		name  string
		nodes []driver.Conn
		opts  []redlock.Option
		arg   string
	}{
		{"WithRestartGuard", matrix.Marked(conns, 2), []redlock.Option{redlock.WithRestartGuard(time.Minute)}, "restart guard"},
		{"a node whose driver cannot pin", matrix.Marked(unpinned), nil, "nodes[1]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := redlock.New(c.nodes, c.opts...)
			var ae *strategy.ArgumentError
			if l != nil || !errors.As(err, &ae) || ae.Name != c.arg {
				t.Errorf("New = %v, %v; want nil and an ArgumentError naming %q", l, err, c.arg)
			}
		})
	}
	t.Run("a node with scripts whose driver cannot pin", func(t *testing.T) {
		if _, err := redlock.New(matrix.Marked(unpinned, 0, 2)); err != nil {
			t.Errorf("New = %v, want nil", err)
		}
	})
}

// TestWithoutScriptsContendsWithScripts: a Locker whose nodes 0 and 1 run
// without scripts and a Locker that runs scripts on every node, over the
// same three servers and different drivers, take turns on the same key:
// no two holders are ever inside at once.
func TestWithoutScriptsContendsWithScripts(t *testing.T) {
	servers := redistest.Start(t, 3)
	drivers := redistest.Drivers()
	scripted := newLocker(t, connect(t, servers, drivers[1], drivers[3]))
	plain := newLocker(t, matrix.Marked(connect(t, servers, drivers[2], drivers[0]), 0, 1))
	workers, each := 4, 25
	if redistest.Full() {
		each = 250
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang detector
	defer cancel()
	key := conformance.Key(t)
	var d conformance.Detector
	var wg sync.WaitGroup
	for i := range workers {
		l := []*lock.Locker{scripted, plain}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				lk, err := l.Obtain(ctx, key, 10*time.Second, lock.WithRetry(lock.Exponential(time.Millisecond, 10*time.Millisecond)))
				if err != nil {
					t.Errorf("worker %d: Obtain = %v, want a lock", i, err)
					return
				}
				d.Hold(100 * time.Microsecond)
				if err := lk.Release(ctx); err != nil {
					t.Errorf("worker %d: Release = %v, want nil", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d goroutines, %d acquisitions, %d overlaps", workers, d.Entries(), d.Overlaps())
	if got, want := d.Entries(), int64(workers*each); got != want {
		t.Errorf("entries = %d, want %d", got, want)
	}
	if got := d.Overlaps(); got != 0 {
		t.Errorf("overlaps = %d, want 0", got)
	}
}
