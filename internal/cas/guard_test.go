package cas_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// TestGuardTransactions: on a real server, a guarded transaction that
// another client's write aborts (a nil EXEC) runs again: it lands when the
// write was to the data, or left the lock ours; it reports ErrTaken when
// the write took the lock; and it gives up, writing nothing and matching
// no lock error, when every run is aborted.
func TestGuardTransactions(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	other := goredis.New(redistest.GoRedis(t, srv.Addr, 3))
	for _, c := range []struct {
		name    string
		change  func(key, data string) // before a MULTI
		always  bool                   // before every MULTI, not only the first
		want    error
		written bool
	}{
		{"another client wrote the data: run again, it lands", func(_, data string) { _, _ = driver.Do(ctx, other, "SET", data, "other's") }, false, nil, true},
		{"the lock's own refresh: run again, it lands", func(key, _ string) { _, _ = driver.Do(ctx, other, "PEXPIRE", key, 90_000) }, false, nil, true},
		{"another client took the lock: ErrTaken", func(key, _ string) { _, _, _ = other.GetSet(ctx, key, "another") }, false, lock.ErrTaken, false},
		{"another client writes the data each time: it gives up", func(_, data string) { _, _ = driver.Do(ctx, other, "SET", data, "other's") }, true, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "{guard:" + t.Name() + "}"
			data := key + ":data"
			conn := &faulty{Conn: goredis.New(redistest.GoRedis(t, srv.Addr, 3))}
			runs := 0
			change := once("MULTI", func() { c.change(key, data) })
			conn.before = func(args []any) {
				if args[0] != "MULTI" {
					return
				}
				runs++
				if c.always {
					c.change(key, data)
				} else {
					change(args)
				}
			}
			if _, err := conn.SetNX(ctx, key, "v", time.Minute); err != nil {
				t.Fatal(err)
			}
			srv, err := cas.NewServer("conn", conn, true)
			if err != nil {
				t.Fatal(err)
			}
			_, err = srv.Guard(ctx, cas.Lock{Key: key, Value: "v"}, false, strategy.Write{Keys: []string{data}, Commands: [][]any{{"SET", data, "ours"}}})
			switch {
			case c.always && (err == nil || errors.Is(err, lock.ErrNotHeld) || errors.Is(err, lock.ErrNotObtained)):
				t.Errorf("Guard = %v, want an error of the aborts, matching no lock error", err)
			case !c.always && !errors.Is(err, c.want):
				t.Errorf("Guard = %v, want %v", err, c.want)
			}
			if v, _, _ := other.Get(ctx, data); (v == "ours") != c.written {
				t.Errorf("the data = %q, want it written by the guard: %v", v, c.written)
			}
			if c.always && runs != 6 {
				t.Errorf("runs = %d, want 6", runs)
			}
		})
	}
}
