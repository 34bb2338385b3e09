package cas_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/locktest"
)

// faulty is a driver.Conn over a real one, which it pins, whose Do can
// refuse a command, run something before sending it, or lose its reply.
type faulty struct {
	driver.Conn
	refuse func(args []any) error // an error to answer instead of sending, or nil
	before func(args []any)       // run before sending, if not nil
	lose   func(args []any) bool  // send, then answer io.EOF, as if the reply was lost
}

func (f *faulty) Do(ctx context.Context, args ...any) (any, error) {
	if f.refuse != nil {
		if err := f.refuse(args); err != nil {
			return nil, err
		}
	}
	if f.before != nil {
		f.before(args)
	}
	reply, err := driver.Do(ctx, f.Conn, args...)
	if f.lose != nil && f.lose(args) {
		return nil, io.EOF
	}
	return reply, err
}

func (f *faulty) Pinnable() error { return driver.Pinnable(f.Conn) }

func (f *faulty) Pin(ctx context.Context, key string, fn func(driver.Conn) error) error {
	return driver.Pin(ctx, f.Conn, key, func(one driver.Conn) error {
		return fn(&faulty{Conn: one, refuse: f.refuse, before: f.before, lose: f.lose})
	})
}

// once returns a hook that does f the first time a command named name
// goes through it.
func once(name string, f func()) func(args []any) bool {
	done := false
	return func(args []any) bool {
		if done || args[0] != name {
			return false
		}
		done = true
		f()
		return true
	}
}

// unknown refuses the commands named as a server that lacks them does,
// with the arguments in the error.
func unknown(names ...string) func(args []any) error {
	return func(args []any) error {
		for _, n := range names {
			if args[0] == n {
				return errors.New("ERR unknown command '" + n + "', with args beginning with: 'secret-token'")
			}
		}
		return nil
	}
}

// noSetIfEq refuses SET … IFEQ as a server without it does, so that a
// refresh, or a Set, takes the transaction on every server.
func noSetIfEq(args []any) error {
	if args[0] == "SET" && slices.Contains(args, any("IFEQ")) {
		return errors.New("ERR syntax error")
	}
	return nil
}

func plain(t *testing.T, c driver.Conn) plainOps {
	t.Helper()
	s, err := cas.NewServer("conn", c, true)
	if err != nil {
		t.Fatal(err)
	}
	return plainOps{s}
}

// plainOps runs the operations of one key on a Server without scripts.
type plainOps struct{ s cas.Server }

func (p plainOps) run(ctx context.Context, c cas.Call) (cas.Result, error) { return p.s.Run(ctx, c) }

func (p plainOps) Acquire(ctx context.Context, key, value string, ttl time.Duration, start cas.Start) error {
	_, err := p.run(ctx, cas.Acquire(cas.Lock{Key: key, Value: value, TTL: ttl, Start: start}))
	return err
}

func (p plainOps) AcquireFenced(ctx context.Context, key, fence, value string, ttl time.Duration) (int64, error) {
	r, err := p.run(ctx, cas.Acquire(cas.Lock{Key: key, Value: value, TTL: ttl, Fences: []string{fence}}))
	if err != nil {
		return 0, err
	}
	return r.Fences[0], nil
}

func (p plainOps) Delete(ctx context.Context, key, value string) error {
	_, err := p.run(ctx, cas.Delete(cas.Lock{Key: key, Value: value}))
	return err
}

func (p plainOps) PExpire(ctx context.Context, key, value string, ttl time.Duration) error {
	_, err := p.run(ctx, cas.PExpire(cas.Lock{Key: key, Value: value, TTL: ttl}))
	return err
}

func (p plainOps) PTTL(ctx context.Context, key, value string) (time.Duration, error) {
	r, err := p.run(ctx, cas.PTTL(cas.Lock{Key: key, Value: value}))
	return r.TTL, err
}

func (p plainOps) Set(ctx context.Context, key, value, next string, ttl time.Duration) error {
	_, err := p.run(ctx, cas.Set(cas.Lock{Key: key, Value: value, TTL: ttl}, next))
	return err
}

func (p plainOps) Support() map[string]bool { return p.s.Support() }

func (p plainOps) Over(one driver.Conn) plainOps { return plainOps{p.s.Over(one)} }

// TestPlainDetection: on the embedded server, which has DELEX, a Delete
// sends it; a server that refuses it as unknown, such as an older replica
// after a failover, gets the transaction instead, and the refusal, which
// quotes the arguments, never reaches the caller.
func TestPlainDetection(t *testing.T) {
	srv := locktest.NewServer(t)
	ctx := context.Background()
	conn := &faulty{Conn: goredis.New(srv.GoRedisClient())}
	p := plain(t, conn)
	del := func(t *testing.T) {
		t.Helper()
		if _, err := conn.SetNX(ctx, "k", "v", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := p.Delete(ctx, "k", "v"); err != nil {
			t.Fatalf("Delete = %v, want nil", err)
		}
		if _, ok, err := conn.Get(ctx, "k"); ok || err != nil {
			t.Fatalf("after Delete: the key exists = %v (%v), want false", ok, err)
		}
	}
	t.Run("DELEX where the server has it", func(t *testing.T) {
		del(t)
		if got := p.Support(); !got["DELEX"] {
			t.Errorf("Support = %v, want DELEX true", got)
		}
	})
	t.Run("the transaction once the server refuses it", func(t *testing.T) {
		conn.refuse = unknown("DELEX", "DELIFEQ")
		del(t)
		if got := p.Support(); got["DELEX"] || got["DELIFEQ"] {
			t.Errorf("Support = %v, want DELEX and DELIFEQ false", got)
		}
	})
}

// TestPlainLacksATransactionCommand: a server that refuses WATCH as unknown
// (a proxy, say) gives an error that matches errors.ErrUnsupported, names
// WATCH, and neither matches ErrNotHeld nor quotes the arguments.
func TestPlainLacksATransactionCommand(t *testing.T) {
	srv := locktest.NewServer(t)
	ctx := context.Background()
	conn := &faulty{Conn: goredis.New(srv.GoRedisClient()), refuse: unknown("DELEX", "DELIFEQ", "WATCH")}
	if _, err := conn.SetNX(ctx, "k", "secret-token", time.Minute); err != nil {
		t.Fatal(err)
	}
	err := plain(t, conn).Delete(ctx, "k", "secret-token")
	if !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, lock.ErrNotHeld) || !strings.Contains(err.Error(), "WATCH") || strings.Contains(err.Error(), "secret-token") {
		t.Errorf("Delete = %v, want an error that matches ErrUnsupported, not ErrNotHeld, names WATCH and no token", err)
	}
}

// TestPlainTransactions: on a real server, a refresh by transaction (SET …
// IFEQ is refused) answers as the script does when another client changes
// the key between its read and its EXEC (a nil EXEC), and when its EXEC's
// reply is lost.
func TestPlainTransactions(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	other := goredis.New(redistest.GoRedis(t, srv.Addr, 3))
	for _, c := range []struct {
		name   string
		change func(key string) // before the first MULTI
		want   error
	}{
		{"another client changed the TTL: tried once more", func(key string) { _, _ = driver.Do(ctx, other, "PEXPIRE", key, 90_000) }, nil},
		{"another client deleted the key", func(key string) { _, _ = other.Del(ctx, key) }, lock.ErrExpired},
		{"another client took the key", func(key string) { _, _, _ = other.GetSet(ctx, key, "another") }, lock.ErrTaken},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "plain:" + t.Name()
			conn := &faulty{Conn: goredis.New(redistest.GoRedis(t, srv.Addr, 3)), refuse: noSetIfEq}
			change := once("MULTI", func() { c.change(key) })
			conn.before = func(args []any) { change(args) }
			if _, err := conn.SetNX(ctx, key, "v", time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := plain(t, conn).PExpire(ctx, key, "v", 2*time.Minute); !errors.Is(err, c.want) {
				t.Errorf("PExpire = %v, want %v", err, c.want)
			}
		})
	}
	t.Run("a lost EXEC reply: run again, it finds the key as it left it", func(t *testing.T) {
		key := "plain:lost-exec"
		conn := &faulty{Conn: goredis.New(redistest.GoRedis(t, srv.Addr, 3)), refuse: noSetIfEq}
		conn.lose = once("EXEC", func() {})
		if _, err := conn.SetNX(ctx, key, "v", time.Minute); err != nil {
			t.Fatal(err)
		}
		p := plain(t, conn)
		if err := p.PExpire(ctx, key, "v", 2*time.Minute); err != nil {
			t.Errorf("PExpire = %v, want nil", err)
		}
		if ttl, err := p.PTTL(ctx, key, "v"); err != nil || ttl <= time.Minute {
			t.Errorf("PTTL = %v, %v; want more than a minute", ttl, err)
		}
	})
}

// TestPlainLeavesTheConnectionClean: a transaction that fails half-way,
// after its WATCH or after its MULTI, leaves its connection as it found
// it: over a go-redis pool of one connection, a later change of the key it
// watched aborts nothing, and the next snapshot runs.
func TestPlainLeavesTheConnectionClean(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	// redigo's pool undoes a connection's WATCH and MULTI itself; go-redis's
	// does not.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	conn := &faulty{Conn: goredis.New(client), refuse: func(args []any) error {
		if args[0] == "PEXPIRE" {
			return errors.New("NOPERM this user has no permissions to run the 'pexpire' command")
		}
		return noSetIfEq(args)
	}}
	p := plain(t, conn)
	if _, err := conn.SetNX(ctx, "plain:lock", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := driver.Do(ctx, conn, "RPUSH", "plain:list", "x"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, key string // key: the refresh's, which fails
	}{
		{"after its WATCH: GET fails with WRONGTYPE", "plain:list"},
		{"after its MULTI: PEXPIRE is refused", "plain:lock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := p.PExpire(ctx, c.key, "v", time.Minute); err == nil {
				t.Fatal("PExpire = nil, want an error")
			}
			if _, err := driver.Do(ctx, conn, "RPUSH", "plain:list", "y"); err != nil { // the key the first case watched
				t.Fatal(err)
			}
			if ttl, err := p.PTTL(ctx, "plain:lock", "v"); err != nil || ttl <= 0 {
				t.Errorf("PTTL over the same connection = %v, %v; want a TTL", ttl, err)
			}
		})
	}
}

// commander sends commands of its choice over a Conn, and cannot pin one.
type commander struct{ driver.Conn }

func (c commander) Do(ctx context.Context, args ...any) (any, error) {
	return driver.Do(ctx, c.Conn, args...)
}

// TestPlainOver: the operations of Over run on the connection that the
// caller pinned, their transactions included, which pin none of their own
// (the Conn given cannot); and what they find the server to have is the
// parent's.
func TestPlainOver(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	conn := goredis.New(redistest.GoRedis(t, srv.Addr, 3))
	p := plain(t, conn)
	const key, fence = "plain:over", "{plain:over}:fence"
	for _, c := range []struct {
		name string
		op   func(q plainOps) error
	}{
		{"Acquire", func(q plainOps) error { return q.Acquire(ctx, key, "v", time.Minute, cas.ByScript) }},
		{"AcquireFenced, a transaction", func(q plainOps) error {
			_, err := q.AcquireFenced(ctx, key, fence, "v", time.Minute)
			return err
		}},
		{"PExpire", func(q plainOps) error { return q.PExpire(ctx, key, "v", time.Minute) }},
		{"PTTL, a snapshot", func(q plainOps) error { _, err := q.PTTL(ctx, key, "v"); return err }},
		{"Delete", func(q plainOps) error { return q.Delete(ctx, key, "v") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := driver.Pin(ctx, conn, key, func(one driver.Conn) error { return c.op(p.Over(commander{one})) })
			if err != nil {
				t.Errorf("%s over a pinned connection = %v, want nil", c.name, err)
			}
		})
	}
	t.Run("the parent knows what they found", func(t *testing.T) {
		if got, want := len(p.Support()), 3; got != want { // SET IFEQ, DELEX, DELIFEQ: each tried
			t.Errorf("Support = %v: got %d commands known, want %d", p.Support(), got, want)
		}
	})
}
