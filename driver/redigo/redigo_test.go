package redigo_test

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/redigo"
	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

func TestRunDriver(t *testing.T) {
	addr, _ := redistest.Addr(t)
	pool := redistest.Redigo(t, addr)
	t.Run("Pool", func(t *testing.T) {
		conformance.RunDriver(t, func(t *testing.T) driver.Conn { return redigo.New(pool) })
	})
	t.Run("any GetContext", func(t *testing.T) {
		conformance.RunDriver(t, func(t *testing.T) driver.Conn { return redigo.New(getContext{pool}) })
	})
}

// getContext is a minimal connection source that is not a *redis.Pool.
type getContext struct{ p *redigoredis.Pool }

func (g getContext) GetContext(ctx context.Context) (redigoredis.Conn, error) {
	return g.p.GetContext(ctx)
}

// TestRefusedPools: New refuses a nil pool, and a *redis.Pool that would
// run a function that takes no context, with an error that names the
// field. The strategy constructors report it in an *lock.ArgumentError,
// and the Conn's commands return it without talking to Redis
// (or panicking).
func TestRefusedPools(t *testing.T) {
	dial := func() (redigoredis.Conn, error) { return nil, errors.New("never dialled") }
	dialContext := func(context.Context) (redigoredis.Conn, error) { return nil, errors.New("never dialled") }
	for _, tc := range []struct {
		name   string
		pool   redigo.Pool
		reason string
	}{
		{"nil", nil, "pool must not be nil"},
		{"nil *redis.Pool", (*redigoredis.Pool)(nil), "pool must not be a nil *redis.Pool"},
		{"nil Pool of another type", (*recordingPool)(nil), "pool must not be a nil *redigo_test.recordingPool"},
		{"Dial without DialContext", &redigoredis.Pool{Dial: dial}, "redis.Pool.DialContext must be set"},
		{"no dial function", &redigoredis.Pool{}, "redis.Pool.DialContext must be set"},
		{"TestOnBorrow", &redigoredis.Pool{DialContext: dialContext, TestOnBorrow: func(redigoredis.Conn, time.Time) error { return nil }},
			"redis.Pool.TestOnBorrow must be nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := redigo.New(tc.pool)
			want := "redigo: " + tc.reason
			if err := conn.Validate(); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Validate = %v, want %s...", err, want)
			}
			l, err := single.New(conn)
			var ae *lock.ArgumentError
			if l != nil || !errors.As(err, &ae) || !strings.Contains(err.Error(), conn.Validate().Error()) {
				t.Fatalf("single.New = %v, %v; want nil and an *lock.ArgumentError that says %v", l, err, conn.Validate())
			}
			t.Log(err)
			if _, _, err := conn.Get(context.Background(), "k"); err != conn.Validate() {
				t.Errorf("Get = %v, want Validate's error %v", err, conn.Validate())
			}
		})
	}
}

// TestAcceptedPools: a *redis.Pool whose functions all take the context,
// and any other Pool, which cannot be checked.
func TestAcceptedPools(t *testing.T) {
	dialContext := func(context.Context) (redigoredis.Conn, error) { return nil, errors.New("never dialled") }
	for _, tc := range []struct {
		name string
		pool redigo.Pool
	}{
		{"DialContext", &redigoredis.Pool{DialContext: dialContext}},
		{"DialContext, and Dial that is not used", &redigoredis.Pool{DialContext: dialContext,
			Dial: func() (redigoredis.Conn, error) { return nil, errors.New("never dialled") }}},
		{"TestOnBorrowContext", &redigoredis.Pool{DialContext: dialContext,
			TestOnBorrowContext: func(context.Context, redigoredis.Conn, time.Time) error { return nil }}},
		{"another Pool", getContext{&redigoredis.Pool{Dial: func() (redigoredis.Conn, error) { return nil, errors.New("never dialled") }}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := driver.Check(redigo.New(tc.pool)); err != nil {
				t.Errorf("driver.Check = %v, want nil", err)
			}
		})
	}
}

// TestContextDeadline: every command to a paused server ends at the
// context's deadline, with context.DeadlineExceeded. The deadline is near,
// so each is sent with DoWithTimeout, unwatched by a goroutine.
func TestContextDeadline(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	c := redigo.New(redistest.Redigo(t, srv.Addr))
	srv.Pause()
	defer srv.Resume()
	calls := map[string]func(context.Context) error{
		"SetNX":   func(ctx context.Context) error { _, err := c.SetNX(ctx, "k", "v", time.Minute); return err },
		"Get":     func(ctx context.Context) error { _, _, err := c.Get(ctx, "k"); return err },
		"GetSet":  func(ctx context.Context) error { _, _, err := c.GetSet(ctx, "k", "v"); return err },
		"Del":     func(ctx context.Context) error { _, err := c.Del(ctx, "k"); return err },
		"PTTL":    func(ctx context.Context) error { _, _, err := c.PTTL(ctx, "k"); return err },
		"EvalSha": func(ctx context.Context) error { _, err := c.EvalSha(ctx, "0000", nil); return err },
		"Eval":    func(ctx context.Context) error { _, err := c.Eval(ctx, "return 1", nil); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if err := call(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s on a paused server = %v, want context.DeadlineExceeded", name, err)
			}
		})
	}
}

// TestWatchesOnlyContextsThatCanEnd: a context that can end is watched with
// redigo's DoContext; one that cannot (context.Background()) is sent with a
// plain Do, which starts no goroutine; a small command whose deadline is
// near (at most Unwatched away), with DoWithTimeout, which starts none
// either.
func TestWatchesOnlyContextsThatCanEnd(t *testing.T) {
	addr, _ := redistest.Addr(t)
	p := &recordingPool{p: redistest.Redigo(t, addr)}
	c := redigo.New(p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	near, cancelNear := context.WithTimeout(ctx, redigo.Unwatched)
	defer cancelNear()
	far, cancelFar := context.WithTimeout(ctx, redigo.Unwatched+time.Minute)
	defer cancelFar()
	big := strings.Repeat("k", redigo.SmallCommand)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		key  string
		want string
	}{
		{"Background", context.Background(), "k", "Do"},
		{"WithoutCancel", context.WithoutCancel(ctx), "k", "Do"},
		{"WithCancel", ctx, "k", "DoContext"},
		{"a near deadline", near, "k", "DoWithTimeout"},
		{"a near deadline, a large command", near, big, "DoContext"},
		{"a further deadline", far, "k", "DoContext"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.calls = nil
			if _, _, err := c.Get(tc.ctx, tc.key); err != nil {
				t.Fatalf("Get = %v, want nil", err)
			}
			if len(p.calls) != 1 || p.calls[0] != tc.want {
				t.Errorf("calls = %v, want [%s]", p.calls, tc.want)
			}
		})
	}
}

// TestCancelledBeforeTheDeadline: a command sent with DoWithTimeout (a
// small one, whose deadline is near) to a paused server, whose context is
// cancelled before its deadline, returns (by the deadline: the
// cancellation is not watched) with an error that matches
// context.Canceled, and leaves no broken connection in the pool: the next
// command, once the server resumed, gets its reply.
func TestCancelledBeforeTheDeadline(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	p := &recordingPool{p: redistest.Redigo(t, srv.Addr)}
	c := redigo.New(p)
	srv.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), redigo.Unwatched/4)
	defer cancel()
	time.AfterFunc(redigo.Unwatched/20, cancel)
	_, _, err := c.Get(ctx, "k")
	srv.Resume()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Get cancelled on a paused server = %v, want context.Canceled", err)
	}
	if len(p.calls) != 1 || p.calls[0] != "DoWithTimeout" {
		t.Errorf("calls = %v, want [DoWithTimeout]", p.calls)
	}
	if _, _, err := c.Get(context.Background(), "k"); err != nil {
		t.Errorf("Get once the server resumed = %v, want nil", err)
	}
}

// recordingPool hands out connections that record whether a command went
// through Do or DoContext.
type recordingPool struct {
	p     *redigoredis.Pool
	calls []string
}

func (r *recordingPool) GetContext(ctx context.Context) (redigoredis.Conn, error) {
	c, err := r.p.GetContext(ctx)
	return recordingConn{c, r}, err
}

type recordingConn struct {
	redigoredis.Conn
	r *recordingPool
}

func (c recordingConn) Do(cmd string, args ...any) (any, error) {
	c.r.calls = append(c.r.calls, "Do")
	return c.Conn.Do(cmd, args...)
}

func (c recordingConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	c.r.calls = append(c.r.calls, "DoContext")
	return redigoredis.DoContext(c.Conn, ctx, cmd, args...)
}

func (c recordingConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	c.r.calls = append(c.r.calls, "DoWithTimeout")
	return redigoredis.DoWithTimeout(c.Conn, d, cmd, args...)
}

func (c recordingConn) ReceiveContext(ctx context.Context) (any, error) {
	return redigoredis.ReceiveContext(c.Conn, ctx)
}

func (c recordingConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redigoredis.ReceiveWithTimeout(c.Conn, d)
}

// TestPinnedConnectionAfterATimeout: on a pinned connection, a command
// that timed out (redigo closes the connection, and the command's
// goroutine may still use it) fails the commands after it with that
// timeout, at once, rather than sending them over the connection that
// goroutine uses (a data race in redigo's buffers, which a transaction's
// UNWATCH after a node timeout ran into).
func TestPinnedConnectionAfterATimeout(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	c := redigo.New(redistest.Redigo(t, srv.Addr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang detector
	defer cancel()
	err := driver.Pin(ctx, c, "k", func(pinned driver.Conn) error {
		srv.Pause()
		defer srv.Resume()
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, _, err := pinned.Get(short, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get on a paused server = %v, want context.DeadlineExceeded", err)
		}
		_, err := driver.Do(ctx, pinned, "UNWATCH")
		return err
	})
	if !neterr.Timeout(err) {
		t.Errorf("a command after the timeout = %v, want the timeout that broke the connection", err)
	}
}

// TestPinnedTransactionAfterATimeout: a pin whose transaction a timed-out
// command broke gives its connection back without writing anything on it.
// redigo's pool would send UNWATCH there, as it ends a transaction it sees
// open, racing (a data race, under -race, on a loaded machine) with the
// timed-out command's goroutine in redigo's buffers.
func TestPinnedTransactionAfterATimeout(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	var writes atomic.Int64
	pool := &redigoredis.Pool{DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
		return redigoredis.DialContext(ctx, "tcp", srv.Addr, redigoredis.DialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			return counting{c, &writes}, err
		}))
	}}
	t.Cleanup(func() { pool.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang detector
	defer cancel()
	var before int64
	err := driver.Pin(ctx, redigo.New(pool), "k", func(pinned driver.Conn) error {
		if _, err := driver.Do(ctx, pinned, "WATCH", "k"); err != nil {
			return err
		}
		srv.Pause()
		defer srv.Resume()
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, _, err := pinned.Get(short, "k")
		before = writes.Load()
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Pin = %v, want the Get's context.DeadlineExceeded", err)
	}
	if n := writes.Load() - before; n != 0 {
		t.Errorf("writes on the broken connection after its command timed out = %d, want 0", n)
	}
}

// counting is a connection that counts its writes in n.
type counting struct {
	net.Conn
	n *atomic.Int64
}

func (c counting) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}

// TestDialledConnectionWithoutTimeouts: a pool whose dialled connections
// implement redis.ConnWithContext but not redis.ConnWithTimeout (its
// DoWithTimeout refuses, sending nothing) still runs a small command with
// a near deadline, through DoContext.
func TestDialledConnectionWithoutTimeouts(t *testing.T) {
	addr, _ := redistest.Addr(t)
	pool := &redigoredis.Pool{DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
		c, err := redigoredis.DialContext(ctx, "tcp", addr)
		return contextOnly{c}, err
	}}
	t.Cleanup(func() { _ = pool.Close() })
	c := redigo.New(pool)
	ctx, cancel := context.WithTimeout(context.Background(), redigo.Unwatched)
	defer cancel()
	if _, err := c.SetNX(ctx, "k", "v", time.Minute); err != nil {
		t.Fatalf("SetNX = %v, want nil", err)
	}
	if v, ok, err := c.Get(ctx, "k"); err != nil || !ok || v != "v" {
		t.Errorf("Get = %q, %v, %v; want v, true, nil", v, ok, err)
	}
}

// contextOnly is a connection that implements redis.ConnWithContext, and
// not redis.ConnWithTimeout.
type contextOnly struct{ redigoredis.Conn }

func (c contextOnly) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	return redigoredis.DoContext(c.Conn, ctx, cmd, args...)
}

func (c contextOnly) ReceiveContext(ctx context.Context) (any, error) {
	return redigoredis.ReceiveContext(c.Conn, ctx)
}

// TestPipelineRoundTrips: a pipeline of small commands is sent in one
// round trip, its replies and errors each in its command's place; one of
// more than SmallCommand bytes goes one command at a time, which no
// server that stopped reading can hold past the deadline.
func TestPipelineRoundTrips(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name  string
		value string
		trips int
	}{
		{"small: one round trip", "v", 1},
		{"large: one round trip a command", strings.Repeat("v", redigo.SmallCommand), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &recordingPool{p: redistest.Redigo(t, addr)}
			c := redigo.New(p)
			key := "pipeline:" + t.Name()
			t.Cleanup(func() { _, _ = c.Del(context.Background(), key) })
			replies, err := driver.Pipeline(ctx, c, [][]any{{"SET", key, tc.value}, {"GET", key}, {"INCR", key}, {"DEL", key}})
			if err != nil || len(replies) != 4 {
				t.Fatalf("Pipeline = %#v, %v; want 4 replies", replies, err)
			}
			if replies[0] != "OK" || replies[1] != tc.value || replies[3] != int64(1) {
				t.Errorf("Pipeline = %.40v, want OK, the value, an error, 1", replies)
			}
			if _, ok := replies[2].(error); !ok {
				t.Errorf("INCR of a string = %#v, want its error in its place", replies[2])
			}
			if got := len(p.calls); got != tc.trips {
				t.Errorf("round trips = %d (%v), want %d", got, p.calls, tc.trips)
			}
		})
	}
}

// TestPinnedPipelines: a pinned Conn pipelines a transaction, each reply
// in its place, errors and nil replies included; a pipeline larger than a
// small command goes one command at a time, with the same replies; and a
// pipeline on a paused server returns by its context's deadline, with the
// deadline's error, breaking the connection rather than leaving its
// commands behind.
func TestPinnedPipelines(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	c := redigo.New(redistest.Redigo(t, srv.Addr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang detector
	defer cancel()
	key := conformance.Key(t)
	t.Cleanup(func() { _, _ = c.Del(context.Background(), key) })
	pin := func(t *testing.T, f func(one driver.Conn) error) {
		t.Helper()
		if err := driver.Pin(ctx, c, key, func(one driver.Conn) error {
			if _, ok := one.(driver.Pipeliner); !ok {
				t.Fatalf("the pinned Conn %T does not pipeline, want it to", one)
			}
			return f(one)
		}); err != nil {
			t.Error(err)
		}
	}
	t.Run("a transaction", func(t *testing.T) {
		pin(t, func(one driver.Conn) error {
			read, err := driver.Pipeline(ctx, one, [][]any{{"WATCH", key}, {"GET", key}, {"HGET", key + ":missing", "f"}})
			if want := []any{"OK", nil, nil}; err != nil || !reflect.DeepEqual(read, want) {
				t.Errorf("WATCH, GET, HGET = %#v, %v; want %#v", read, err, want)
			}
			exec, err := driver.Pipeline(ctx, one, [][]any{{"MULTI"}, {"SET", key, "x"}, {"EXEC"}})
			if want := []any{"OK", "QUEUED", []any{"OK"}}; err != nil || !reflect.DeepEqual(exec, want) {
				t.Errorf("MULTI, SET, EXEC = %#v, %v; want %#v", exec, err, want)
			}
			return nil
		})
	})
	t.Run("an error in its place", func(t *testing.T) {
		pin(t, func(one driver.Conn) error {
			replies, err := driver.Pipeline(ctx, one, [][]any{{"SET", key, "x"}, {"INCR", key}, {"GET", key}})
			if err != nil || len(replies) != 3 || replies[0] != "OK" || replies[2] != "x" {
				t.Fatalf("SET, INCR, GET = %#v, %v; want OK, an error, x", replies, err)
			}
			if err, ok := replies[1].(error); !ok || !strings.Contains(err.Error(), "not an integer") {
				t.Errorf("INCR's reply = %#v, want the server's error", replies[1])
			}
			return nil
		})
	})
	t.Run("a large pipeline, one command at a time", func(t *testing.T) {
		large := strings.Repeat("v", 600)
		pin(t, func(one driver.Conn) error {
			replies, err := driver.Pipeline(ctx, one, [][]any{{"SET", key, large}, {"GET", key}})
			if want := []any{"OK", large}; err != nil || !reflect.DeepEqual(replies, want) {
				t.Errorf("SET, GET of 600 bytes = %d replies, %v; want OK and the value", len(replies), err)
			}
			return nil
		})
	})
	t.Run("a paused server", func(t *testing.T) {
		err := driver.Pin(ctx, c, key, func(one driver.Conn) error {
			srv.Pause()
			defer srv.Resume()
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if _, err := driver.Pipeline(short, one, [][]any{{"WATCH", key}, {"GET", key}}); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Pipeline on a paused server = %v, want context.DeadlineExceeded", err)
			}
			_, err := driver.Do(ctx, one, "UNWATCH")
			return err
		})
		if !neterr.Timeout(err) {
			t.Errorf("a command after the timeout = %v, want the timeout that broke the connection", err)
		}
	})
}
