package harness

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// TestRedlockKleppmann: Kleppmann's schedules for Redlock over five nodes.
// A obtains the lock while n4 and n5 are cut off, so that only n1, n2 and
// n3 hold it; then n1 and n2 are cut off and n4 and n5 healed, and B asks,
// until a quorum answers. If n3 kept A's key, B cannot win one. If n3 was
// restarted empty at once, or its wall clock jumped forward by the TTL,
// which expires A's key there, B wins n3, n4 and n5 while A's validity
// runs: two holders within their leases, which Check finds: the harness's
// checks find what they are there to find. With WithRestartGuard, the
// delayed-restart rule of docs/strategies.md kept from the clients, n3
// grants nothing once restarted, and B is not obtained.
func TestRedlockKleppmann(t *testing.T) {
	requireNet(t)
	requireGCC(t)
	cases := []struct {
		name                  string
		restart, guard, clock bool
	}{
		{"n3 keeps A's key: B is not obtained", false, false, false},
		{"n3 restarted empty: B obtains it within A's validity", true, false, false},
		{"n3 restarted empty, WithRestartGuard: B is not obtained", true, true, false},
		{"n3's clock jumps by the TTL: B obtains it within A's validity", false, false, true},
	}
	for _, drv := range drivers {
		for _, c := range cases {
			t.Run(drv+"/"+c.name, func(t *testing.T) { kleppmann(t, drv, c.restart, c.guard, c.clock) })
		}
	}
}

// kleppmann runs TestRedlockKleppmann's schedule over drv: n3 restarted
// empty, with or without the restart guard, or its clock jumped.
func kleppmann(t *testing.T, drv string, restart, guard, clock bool) {
	const key, ttl = "jepsen:redlock", 10 * time.Second
	names := []string{"n1", "n2", "n3", "n4", "n5", "clients"}
	n := newNet(t, names...)
	clients := n.Node("clients")
	dir := shortDir(t)
	var servers []*Server
	var clocks []*Clock
	var conns []driver.Conn
	for _, name := range names[:5] {
		clk := newClock(t, dir)
		s := NewServer(n.Node(name), dir)
		s.Env = clk.Env()
		started(t, s)
		servers, clocks = append(servers, s), append(clocks, clk)
		if guard { // a deployment seeded as new, as docs/strategies.md says
			admin := s.Admin()
			err := admin.Set(context.Background(), "locksmith:redlock:up-since", 0, 0).Err()
			admin.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		conns = append(conns, conn(t, drv, clients, s.Addr))
	}
	opts := []redlock.Option{redlock.WithNodeTimeout(100 * time.Millisecond)}
	if guard {
		opts = append(opts, redlock.WithRestartGuard(ttl))
	}
	l, err := redlock.New(conns, opts...)
	if err != nil {
		t.Fatal(err)
	}
	cut := func(names ...string) {
		for _, name := range names {
			if err := n.Node(name).Cut(); err != nil {
				t.Fatal(err)
			}
		}
	}
	heal := func(names ...string) {
		for _, name := range names {
			if err := n.Node(name).Heal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := time.Now()
	since := func(tm time.Time) int64 { return int64(tm.Sub(start)) }
	ctx := context.Background()

	cut("n4", "n5")
	a := Hold{Key: key, Holder: "A", Invoked: since(time.Now())}
	lkA, err := l.Obtain(ctx, key, ttl)
	if err != nil {
		t.Fatalf("A: Obtain with n4 and n5 cut off = %v, want a lock (3 of 5)", err)
	}
	a.Obtained, a.ValidUntil = since(time.Now()), since(lkA.ValidUntil())
	if clock { // A's key on n3 expires at once
		if err := clocks[2].Check(servers[2]); err != nil {
			t.Skip(err)
		}
		if err := clocks[2].Set(ttl); err != nil {
			t.Fatal(err)
		}
	}
	if restart {
		if err := servers[2].Kill(); err != nil {
			t.Fatal(err)
		}
		if err := servers[2].Start(); err != nil {
			t.Fatal(err)
		}
	}
	cut("n1", "n2")
	heal("n4", "n5")
	// B asks until a quorum answers: n4's and n5's connections broke
	// in the cut, and come back.
	b := Hold{Key: key, Holder: "B", Invoked: since(time.Now())}
	lkB, err := l.Obtain(ctx, key, ttl)
	for deadline := time.Now().Add(5 * time.Second); errors.Is(err, lock.ErrNoAnswer) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		lkB, err = l.Obtain(ctx, key, ttl)
	}
	wantB := (restart && !guard) || clock
	switch {
	case !wantB && err == nil:
		t.Errorf("B: Obtain = a lock, want none")
	case wantB && err != nil:
		t.Errorf("B: Obtain = %v, want a lock", err)
	}
	t.Logf("B: %v", err)
	var holds []Hold
	if err == nil {
		b.Obtained, b.ValidUntil = since(time.Now()), since(lkB.ValidUntil())
		holds = append(holds, b)
	}
	heal("n1", "n2")
	a.Released = since(time.Now())
	holds = append(holds, a)
	r := Check(holds)
	t.Log(r)
	if want := map[bool]int{false: 0, true: 1}[wantB]; r.ValidityOverlaps != want {
		t.Errorf("validity overlaps: got %d, want %d", r.ValidityOverlaps, want)
	}
	for _, lk := range []*lock.Lock{lkA, lkB} {
		if lk != nil {
			_ = lk.Release(ctx)
		}
	}
}
