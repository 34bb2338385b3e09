package cas_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// existing returns the keys of keys that exist.
func existing(t *testing.T, rdb *redis.Client, keys ...string) []string {
	t.Helper()
	var got []string
	for _, k := range keys {
		n, err := rdb.Exists(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("EXISTS %q: %v", k, err)
		}
		if n == 1 {
			got = append(got, k)
		}
	}
	return got
}

// TestAcquireKeysGuarded: the guarded acquisition of several keys takes
// every key or none, as AcquireKeys does, on a node up for its quarantine,
// and nothing but the guard's record on a younger one.
func TestAcquireKeysGuarded(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	c := goredis.New(rdb)
	ctx := context.Background()
	keys := []string{"cas-guarded:a", "cas-guarded:b", "cas-guarded:c"}
	const guard = "cas-guarded:up-since"
	clean := func() { rdb.Del(context.Background(), append(slices.Clone(keys), guard)...) }
	clean()
	t.Cleanup(clean)

	t.Run("a node up for less than the quarantine: restarting, nothing taken", func(t *testing.T) {
		defer clean()
		if _, err := acquireKeysGuarded(ctx, c, keys, guard, "v", time.Minute, time.Hour); !errors.Is(err, cas.ErrRestarting) {
			t.Errorf("AcquireKeysGuarded = %v, want ErrRestarting", err)
		}
		if got := existing(t, rdb, append(slices.Clone(keys), guard)...); !slices.Equal(got, []string{guard}) {
			t.Errorf("keys that exist = %q, want only the record, %q", got, guard)
		}
	})
	t.Run("a node up for the quarantine: every key taken", func(t *testing.T) {
		defer clean()
		if err := rdb.Set(ctx, guard, "0", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := acquireKeysGuarded(ctx, c, keys, guard, "v", time.Minute, time.Hour); err != nil {
			t.Fatalf("AcquireKeysGuarded = %v, want nil", err)
		}
		for _, k := range keys {
			if v, err := rdb.Get(ctx, k).Result(); v != "v" || err != nil {
				t.Errorf("GET %q = %q, %v; want v", k, v, err)
			}
		}
	})
	t.Run("one key held: not obtained, naming it, nothing taken", func(t *testing.T) {
		defer clean()
		if err := rdb.Set(ctx, guard, "0", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, keys[1], "other", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		held, err := acquireKeysGuarded(ctx, c, keys, guard, "v", time.Minute, time.Hour)
		var ke *strategy.KeyError
		if !errors.Is(err, lock.ErrNotObtained) || !errors.As(err, &ke) || ke.Key != keys[1] {
			t.Errorf("AcquireKeysGuarded = %v, want ErrNotObtained in a KeyError naming %q", err, keys[1])
		}
		if held <= 0 || held > time.Minute {
			t.Errorf("holder's TTL = %v, want the minute", held)
		}
		if got := existing(t, rdb, keys...); !slices.Equal(got, []string{keys[1]}) {
			t.Errorf("keys that exist = %q, want only the held one, %q", got, keys[1])
		}
	})
}

// TestDeleteKeysHinting: each key that holds the value is deleted, and its
// channel hears the message; the others are reported, per key, and left.
func TestDeleteKeysHinting(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	c := goredis.New(rdb)
	ctx := context.Background()
	keys := []string{"cas-hinting:a", "cas-hinting:b", "cas-hinting:c"}
	chA, _ := cas.WakeChannel(keys[0])
	chC, _ := cas.WakeChannel(keys[2])
	channels := []string{chA, "", chC}
	t.Cleanup(func() { rdb.Del(context.Background(), keys...) })
	sub := rdb.Subscribe(ctx, channels[0], channels[2])
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the first confirmation
		t.Fatal(err)
	}
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{keys[0], keys[2]} {
		if err := rdb.Set(ctx, k, "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Set(ctx, keys[1], "other", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	_, err := run(ctx, c, cas.Delete(cas.Lock{Key: keys[0], Keys: keys, Value: "v", Hint: "*"}))
	var ke *strategy.KeyError
	if !errors.Is(err, lock.ErrTaken) || !errors.As(err, &ke) || ke.Key != keys[1] {
		t.Errorf("DeleteKeysHinting = %v, want ErrTaken in a KeyError naming %q", err, keys[1])
	}
	if got := existing(t, rdb, keys...); !slices.Equal(got, []string{keys[1]}) {
		t.Errorf("keys that exist = %q, want only the taken one, %q", got, keys[1])
	}
	var heard []string
	for range 2 {
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Payload != "*" {
			t.Errorf("message on %s = %q, want *", m.Channel, m.Payload)
		}
		heard = append(heard, m.Channel)
	}
	if slices.Sort(heard); !slices.Equal(heard, []string{channels[0], channels[2]}) {
		t.Errorf("channels that heard the release = %q, want %q", heard, []string{channels[0], channels[2]})
	}
}

// TestSliceOfOne: a lock of Key alone and a lock of Keys of that one key run
// the same scripts, with and without scripts, and answer alike: every
// operation on a key held by another value finds it so, a lock of Keys
// naming it in a *strategy.KeyError, and a lock of Key alone with the bare
// error; a fenced acquisition issues a token either way.
func TestSliceOfOne(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	const key, fence = "{cas-one}", "{cas-one}:fence"
	t.Cleanup(func() { rdb.Del(context.Background(), key, fence) })
	scripts := cas.Server{Conn: goredis.New(rdb)}
	scriptless, err := cas.NewServer("conn", goredis.New(rdb), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range []struct {
		name string
		s    cas.Server
	}{{"scripts", scripts}, {"without scripts", scriptless}} {
		for _, keys := range [][]string{nil, {key}} {
			name := srv.name + ", Key alone"
			if keys != nil {
				name = srv.name + ", Keys of one"
			}
			t.Run(name, func(t *testing.T) {
				if err := rdb.Set(ctx, key, "other", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				held := cas.Lock{Key: key, Keys: keys, Value: "v", TTL: time.Minute, Start: cas.ByScript}
				for _, c := range []struct {
					op   string
					call cas.Call
					want error
				}{
					{"Acquire", cas.Acquire(held), lock.ErrNotObtained},
					{"PExpire", cas.PExpire(held), lock.ErrTaken},
					{"PTTL", cas.PTTL(held), lock.ErrTaken},
					{"Delete", cas.Delete(held), lock.ErrTaken},
				} {
					_, err := srv.s.Run(ctx, c.call)
					var ke *strategy.KeyError
					if !errors.Is(err, c.want) || errors.As(err, &ke) != (keys != nil) {
						t.Errorf("%s = %v, want %v, in a KeyError: %v", c.op, err, c.want, keys != nil)
					}
				}
				rdb.Del(ctx, key)
				fenced := held
				fenced.Fences = []string{fence}
				r, err := srv.s.Run(ctx, cas.Acquire(fenced))
				if err != nil || len(r.Fences) != 1 || r.Fences[0] <= 0 {
					t.Errorf("fenced Acquire = %v, %v; want one token", r, err)
				}
				if r, err := srv.s.Run(ctx, cas.PTTL(held)); err != nil || r.TTL <= 0 {
					t.Errorf("PTTL = %v, %v; want a TTL", r.TTL, err)
				}
				if _, err := srv.s.Run(ctx, cas.Delete(held)); err != nil {
					t.Errorf("Delete = %v, want nil", err)
				}
			})
		}
	}
}
