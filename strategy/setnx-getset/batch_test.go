package setnxgetset_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
)

// TestRefreshBatch: one script, or without scripts one transaction,
// refreshes every lock of a batch as Refresh would: each key holding the
// lock's value, or the value that an earlier refresh whose reply was lost
// may have written (one of Unsure), gets a new timestamp, reported in
// Grant.Value; a key that another value holds, or that is gone, is
// reported so, and left as it is.
func TestRefreshBatch(t *testing.T) {
	addr, _ := redistest.Addr(t)
	conn := goredis.New(redistest.GoRedis(t, addr, 3))
	for name, conn := range map[string]driver.Conn{"scripts": conn, "without scripts": driver.WithoutScripts(conn)} {
		t.Run(name, func(t *testing.T) {
			s, err := setnxgetset.NewStrategy(conn, setnxgetset.WithFormat(setnxgetset.Milliseconds))
			if err != nil {
				t.Fatal(err)
			}
			if !s.Batches() {
				t.Fatal("Batches() = false, want true")
			}
			refreshBatch(t, conn, s)
		})
	}
}

// refreshBatch is TestRefreshBatch over s.
func refreshBatch(t *testing.T, conn driver.Conn, s *setnxgetset.Strategy) {
	ctx := context.Background()
	prefix := conformance.Key(t)
	key := func(name string) string { return prefix + ":" + name }
	grants := map[string]string{}
	for _, name := range []string{"held", "unsure", "taken"} {
		g, err := s.Acquire(ctx, strategy.Request{Key: key(name), TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		grants[name] = g.Value
		t.Cleanup(func() { _, _ = conn.Del(context.Background(), key(name)) })
	}
	if _, _, err := conn.GetSet(ctx, key("taken"), "another owner"); err != nil {
		t.Fatal(err)
	}
	batch := []strategy.Refresh{
		{Key: key("held"), Value: grants["held"], TTL: time.Minute},
		{Key: key("unsure"), Value: "a value it no longer holds", Unsure: []string{"another", grants["unsure"], "a third"}, TTL: time.Minute},
		{Key: key("taken"), Value: grants["taken"], TTL: time.Minute},
		{Key: key("gone"), Value: grants["held"], TTL: time.Minute},
	}
	time.Sleep(2 * time.Millisecond) // a new timestamp
	s.RefreshBatch(ctx, batch)
	for _, r := range batch[:2] {
		if r.Err != nil || r.Grant.Value == "" || r.Grant.Value == r.Value || slices.Contains(r.Unsure, r.Grant.Value) {
			t.Errorf("%s: got Grant.Value %q, Err %v; want a new timestamp, nil", r.Key, r.Grant.Value, r.Err)
			continue
		}
		if v, _, _ := conn.Get(ctx, r.Key); v != r.Grant.Value {
			t.Errorf("%s holds %q after the batch, want its new timestamp %q", r.Key, v, r.Grant.Value)
		}
	}
	if err := batch[2].Err; !errors.Is(err, lock.ErrTaken) {
		t.Errorf("taken lock: got Err %v, want ErrTaken", err)
	}
	if v, _, _ := conn.Get(ctx, key("taken")); v != "another owner" {
		t.Errorf("taken lock's key holds %q after the batch, want the other owner's value", v)
	}
	if err := batch[3].Err; !errors.Is(err, lock.ErrExpired) {
		t.Errorf("gone lock: got Err %v, want ErrExpired", err)
	}
}
