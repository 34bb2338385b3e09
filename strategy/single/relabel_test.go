package single_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestFences: single issues fencing tokens, with scripts or without, and
// says so (strategy.Fencer).
func TestFences(t *testing.T) {
	addr, _ := redistest.Addr(t)
	conn := redistest.Drivers()[1].Conn(t, addr)
	for _, c := range []struct {
		name string
		conn driver.Conn
	}{
		{"scripts", conn},
		{"without scripts", driver.WithoutScripts(conn)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := single.NewStrategy(c.conn)
			if err != nil {
				t.Fatal(err)
			}
			var f strategy.Fencer = s
			if !f.Fences() {
				t.Error("Fences(): got false, want true")
			}
		})
	}
}

// TestSharedIsNoRelabeler: the Strategy of semaphores and read-write locks
// does not offer Relabel, which would replace a holder's place.
func TestSharedIsNoRelabeler(t *testing.T) {
	addr, _ := redistest.Addr(t)
	s, err := single.NewStrategy(redistest.Drivers()[1].Conn(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range []strategy.Sharing{{Permits: 2}, {Read: true}, {Write: true}} {
		shared, err := s.Shared(sh)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := shared.(strategy.Relabeler); ok {
			t.Errorf("the shared Strategy of %+v: got a strategy.Relabeler, want none", sh)
		}
	}
}

// TestRelabel: over every driver, with scripts and without, Relabel
// replaces the value that a key holds with another, resetting its expiry,
// with Refresh's drift allowance; a key that holds the new value already
// (a relabel whose reply was lost) is taken as the lock's; a key that is
// gone, or held by another value, is left as it is.
func TestRelabel(t *testing.T) {
	ctx := context.Background()
	addr, _ := redistest.Addr(t)
	for _, d := range redistest.Drivers() {
		for _, mode := range []struct {
			name string
			mark func(driver.Conn) driver.Conn
		}{
			{"scripts", func(c driver.Conn) driver.Conn { return c }},
			{"without scripts", driver.WithoutScripts},
		} {
			t.Run(d.Name+"/"+mode.name, func(t *testing.T) {
				conn := d.Conn(t, addr)
				s, err := single.NewStrategy(mode.mark(conn))
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []struct {
					name   string
					holds  string // the key's value before; "" for none
					want   error
					stored string // the key's value after; "" for none
				}{
					{"a key that holds the value", "old", nil, "new"},
					{"a key that holds the new value already", "new", nil, "new"},
					{"a key held by another value", "other", strategy.ErrTaken, "other"},
					{"a gone key", "", strategy.ErrExpired, ""},
				} {
					t.Run(c.name, func(t *testing.T) {
						key := conformance.Key(t)
						if c.holds != "" {
							if _, err := conn.SetNX(ctx, key, c.holds, 10*time.Second); err != nil {
								t.Fatal(err)
							}
						}
						g, err := s.Relabel(ctx, key, "old", "new", time.Minute)
						if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
							t.Errorf("Relabel: got %v, want %v", err, c.want)
						}
						if want, _ := s.Refresh(ctx, conformance.Key(t), "x", time.Minute); g.Drift != want.Drift {
							t.Errorf("Grant.Drift: got %v, want Refresh's, %v", g.Drift, want.Drift)
						}
						v, ok, err := conn.Get(ctx, key)
						if err != nil || v != c.stored || ok != (c.stored != "") {
							t.Errorf("the key's value: got %q (found %v), %v; want %q", v, ok, err, c.stored)
						}
						ttl, _, err := conn.PTTL(ctx, key)
						switch {
						case err != nil:
							t.Fatal(err)
						case c.want == nil && ttl < 50*time.Second:
							t.Errorf("PTTL: got %v, want about a minute", ttl)
						case c.holds == "other" && ttl > 10*time.Second:
							t.Errorf("PTTL of the other value: got %v, want its 10s", ttl)
						}
					})
				}
				t.Run("a TTL that the drift allowance uses up", func(t *testing.T) {
					key := conformance.Key(t)
					if _, err := conn.SetNX(ctx, key, "old", 10*time.Second); err != nil {
						t.Fatal(err)
					}
					_, err := s.Relabel(ctx, key, "old", "new", 2*time.Millisecond)
					var ae *strategy.ArgumentError
					if !errors.As(err, &ae) || ae.Name != "ttl" {
						t.Errorf("Relabel(2ms): got %v, want an *ArgumentError named ttl", err)
					}
					if v, _, _ := conn.Get(ctx, key); v != "old" {
						t.Errorf("the key's value: got %q, want %q, unchanged", v, "old")
					}
				})
			})
		}
	}
}

// TestRefreshBatchUnsure: a lock of a batch with Unsure values (a
// relabel's whose reply was lost) is refreshed under whichever of its
// values the key holds, and Grant.Value names an Unsure one; the batch's
// other locks are refreshed as ever.
func TestRefreshBatchUnsure(t *testing.T) {
	ctx := context.Background()
	addr, _ := redistest.Addr(t)
	conn := redistest.Drivers()[1].Conn(t, addr)
	s, err := single.NewStrategy(conn)
	if err != nil {
		t.Fatal(err)
	}
	unsure := []string{"first", "second"}
	cases := []struct {
		name      string
		holds     string
		unsure    []string
		want      error
		wantValue string
	}{
		{"the key holds the value", "old", unsure, nil, ""},
		{"the key holds the older Unsure value", "first", unsure, nil, "first"},
		{"the key holds the newer Unsure value", "second", unsure, nil, "second"},
		{"another value holds the key", "other", unsure, strategy.ErrTaken, ""},
		{"the key is gone", "", unsure, strategy.ErrExpired, ""},
		{"a lock without Unsure values", "old", nil, nil, ""},
	}
	batch := make([]strategy.Refresh, len(cases))
	for i, c := range cases {
		key := conformance.Key(t)
		if c.holds != "" {
			if _, err := conn.SetNX(ctx, key, c.holds, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		batch[i] = strategy.Refresh{Key: key, Value: "old", TTL: time.Minute, Unsure: c.unsure}
	}
	s.RefreshBatch(ctx, batch)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := batch[i]
			if !errors.Is(r.Err, c.want) || (c.want == nil) != (r.Err == nil) {
				t.Errorf("Err: got %v, want %v", r.Err, c.want)
			}
			if r.Grant.Value != c.wantValue || r.Grant.Drift <= 0 {
				t.Errorf("Grant: got value %q, drift %v; want %q, positive", r.Grant.Value, r.Grant.Drift, c.wantValue)
			}
			ttl, _, err := conn.PTTL(ctx, r.Key)
			if err != nil {
				t.Fatal(err)
			}
			if refreshed := ttl > 50*time.Second; refreshed != (c.want == nil) {
				t.Errorf("PTTL: got %v, want it refreshed to a minute: %v", ttl, c.want == nil)
			}
		})
	}
}
