package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// TestInspect: Inspect reads every node, and says the lock is held only
// when a quorum of them hold one holder's value; when too few nodes answer
// to tell, it returns what it read with a QuorumError.
func TestInspect(t *testing.T) {
	servers := redistest.Start(t, nodes)
	ctx := context.Background()
	drivers := redistest.Drivers()
	conns := connect(t, servers, drivers...)
	l := newLocker(t, conns)
	// down is a node that refuses connections.
	down := func(t *testing.T, n int) []driver.Conn { // n nodes where no server listens, each once
		var conns []driver.Conn
		for _, a := range redistest.ClosedAddrs(t, n) {
			conns = append(conns, drivers[0].Conn(t, a))
		}
		return conns
	}
	inspect := func(t *testing.T, l *lock.Locker, key string) lock.State {
		t.Helper()
		st, err := l.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect = %v, want nil", err)
		}
		return st
	}

	t.Run("a free key", func(t *testing.T) {
		st := inspect(t, l, conformance.Key(t))
		if st.Held || st.TTL != 0 || st.Fingerprint != "" || st.Verdict != "free" {
			t.Errorf("Inspect = %+v, want free", st)
		}
		if len(st.Nodes) != nodes {
			t.Fatalf("Nodes = %d, want %d", len(st.Nodes), nodes)
		}
		for i, n := range st.Nodes {
			if n.Node != servers[i].Addr || n.Held || n.Err != nil {
				t.Errorf("Nodes[%d] = %+v, want node %s, answered, holding nothing", i, n, servers[i].Addr)
			}
		}
	})

	t.Run("a held lock", func(t *testing.T) {
		key := conformance.Key(t)
		lk, err := l.Obtain(ctx, key, time.Minute, lock.WithMetadata("host=web-3"))
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		st := inspect(t, l, key)
		if st.Fingerprint != strategy.Fingerprint(lk.Token()) || st.Metadata != "host=web-3" {
			t.Errorf("Fingerprint, Metadata = %q, %q; want the holder's, host=web-3", st.Fingerprint, st.Metadata)
		}
		if st.TTL <= 0 || st.TTL > time.Minute {
			t.Errorf("TTL = %v, want in (0, 1m]", st.TTL)
		}
		// Obtain returns once a quorum granted it: the other nodes' grants
		// may still be on their way.
		holding := 0
		for i, n := range st.Nodes {
			switch {
			case n.Held && (n.Fingerprint != st.Fingerprint || n.Metadata != "host=web-3" || n.TTL <= 0):
				t.Errorf("Nodes[%d] = %+v, want it holding the lock, with a TTL, or nothing", i, n)
			case n.Held:
				holding++
			}
		}
		if want := fmt.Sprintf("held on %d of 5 nodes (quorum 3)", holding); !st.Held || holding < 3 || st.Verdict != want {
			t.Errorf("Held, Verdict = %v, %q; want true, %q, with at least 3", st.Held, st.Verdict, want)
		}
	})

	t.Run("the TTL is the time until fewer than a quorum hold it", func(t *testing.T) {
		key := conformance.Key(t)
		for i, ms := range []string{"10000", "20000", "30000", "40000", "50000"} {
			if _, err := servers[i].Command(ctx, "SET", key, "AAAAAAAAAAAAAAAAAAAAAA", "PX", ms); err != nil {
				t.Fatal(err)
			}
		}
		if st := inspect(t, l, key); st.TTL <= 20*time.Second || st.TTL > 30*time.Second {
			t.Errorf("TTL with nodes expiring after 10s to 50s = %v, want in (20s, 30s], the third longest", st.TTL)
		}
	})

	t.Run("values of different holders", func(t *testing.T) {
		key := conformance.Key(t)
		for i, v := range []string{"AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBB"} {
			if _, err := servers[i].Command(ctx, "SET", key, v, "PX", "60000"); err != nil {
				t.Fatal(err)
			}
		}
		st := inspect(t, l, key)
		if st.Held || st.Fingerprint != "" || st.Verdict != "no quorum: held on 2 of 5 nodes" {
			t.Errorf("Inspect = %+v, want not held: no quorum: held on 2 of 5 nodes", st)
		}
	})

	t.Run("an acquisition under way", func(t *testing.T) {
		key := conformance.Key(t)
		if _, err := servers[0].Command(ctx, "SET", key, "AAAAAAAAAAAAAAAAAAAAAA", "PX", "60000"); err != nil {
			t.Fatal(err)
		}
		st := inspect(t, l, key)
		if st.Held || st.Verdict != "no quorum: held on 1 of 5 nodes" || !st.Nodes[0].Held {
			t.Errorf("Inspect = %+v, want not held (no quorum: held on 1 of 5 nodes), node 0 holding it", st)
		}
	})

	t.Run("nodes down, but a quorum holds it", func(t *testing.T) {
		key := conformance.Key(t)
		l := newLocker(t, append(conns[:3:3], down(t, 2)...))
		lk, err := l.Obtain(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		st := inspect(t, l, key)
		if !st.Held || st.Verdict != "held on 3 of 5 nodes (quorum 3)" {
			t.Errorf("Held, Verdict = %v, %q; want true, held on 3 of 5 nodes (quorum 3)", st.Held, st.Verdict)
		}
		for _, n := range st.Nodes[3:] {
			if n.Err == nil {
				t.Errorf("a node that is down: Err = nil, want why it did not answer")
			}
		}
	})

	t.Run("nodes down, and the others free", func(t *testing.T) {
		l := newLocker(t, append(conns[:3:3], down(t, 2)...))
		if st := inspect(t, l, conformance.Key(t)); st.Held || st.Verdict != "free" {
			t.Errorf("Inspect = %+v, want free: 2 nodes down cannot make a quorum", st)
		}
	})

	t.Run("too few nodes answer to tell", func(t *testing.T) {
		key := conformance.Key(t)
		l := newLocker(t, append(conns[:2:2], down(t, 3)...))
		if _, err := servers[0].Command(ctx, "SET", key, "AAAAAAAAAAAAAAAAAAAAAA", "PX", "60000"); err != nil {
			t.Fatal(err)
		}
		st, err := l.Inspect(ctx, key)
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) || qe.Op != "inspect" {
			t.Fatalf("Inspect with 3 of 5 nodes down = %v, want a QuorumError of inspect", err)
		}
		if st.Held || len(st.Nodes) != nodes || !st.Nodes[0].Held || st.Nodes[2].Err == nil {
			t.Errorf("State = %+v, want not held, with what each node answered", st)
		}
		if !strings.HasPrefix(st.Verdict, "unknown") {
			t.Errorf("Verdict = %q, want unknown", st.Verdict)
		}
	})

	t.Run("a key of another type on a node", func(t *testing.T) {
		key := conformance.Key(t)
		if _, err := servers[1].Command(ctx, "HSET", key, "f", "v"); err != nil {
			t.Fatal(err)
		}
		st := inspect(t, l, key)
		if st.Held || st.Nodes[1].Err == nil || !strings.Contains(st.Nodes[1].Err.Error(), "WRONGTYPE") {
			t.Errorf("Inspect = %+v, want free, with node 1 failing with WRONGTYPE", st)
		}
	})
}

// TestBreak: Break deletes the holder's value on every node that answers,
// and reports a node that did not with a QuorumError, after breaking the
// lock on the others, so that a new holder can obtain it at once.
func TestBreak(t *testing.T) {
	servers := redistest.Start(t, nodes)
	ctx := context.Background()
	l := newLocker(t, connect(t, servers, redistest.Drivers()...))

	t.Run("every node answers", func(t *testing.T) {
		key := conformance.Key(t)
		lk, err := l.Obtain(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// Obtain returns at a quorum: a write to another node still on its
		// way would land after the Break's reading, and outlive it.
		for held, deadline := 0, time.Now().Add(time.Minute); held < nodes; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the lock is on %d of %d nodes a minute after Obtain, want every node", held, nodes)
			}
			st, err := l.Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			held = 0
			for _, n := range st.Nodes {
				if n.Held {
					held++
				}
			}
		}
		st, err := l.Break(ctx, key, strategy.Fingerprint(lk.Token()))
		if err != nil || !st.Held {
			t.Fatalf("Break = %+v, %v; want the held State, nil", st, err)
		}
		if st, err := l.Inspect(ctx, key); err != nil || st.Verdict != "free" {
			t.Errorf("Inspect after Break = %q, %v; want free", st.Verdict, err)
		}
	})

	t.Run("a node paused", func(t *testing.T) {
		key := conformance.Key(t)
		lk, err := l.Obtain(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		servers[0].Pause()
		defer servers[0].Resume()
		st, err := l.Break(ctx, key, strategy.Fingerprint(lk.Token()))
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) || qe.Op != "break" {
			t.Fatalf("Break with a node paused = %v, want a QuorumError of break", err)
		}
		if st.Nodes[0].Err == nil {
			t.Errorf("Break's State: node 0 = %+v, want its error", st.Nodes[0])
		}
		next, err := l.Obtain(ctx, key, time.Minute)
		if err != nil {
			t.Fatalf("Obtain after the Break = %v, want the lock: the other nodes are free", err)
		}
		defer next.Release(ctx)
	})
}
