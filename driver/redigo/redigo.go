// Package redigo adapts a redigo connection pool to [driver.Conn]:
//
//	pool := &redis.Pool{MaxIdle: 10, DialContext: func(ctx context.Context) (redis.Conn, error) {
//		return redis.DialContext(ctx, "tcp", addr)
//	}}
//	locker, err := single.New(redigo.New(pool, redigo.WithAddr(addr)))
//
// [New] accepts a *redis.Pool, or anything with GetContext ([Pool]). Every
// command ends by its context's deadline, whatever the read timeout, so a
// *redis.Pool must set DialContext and leave TestOnBorrow nil: [New] says
// why, and a Conn over a pool that fails them refuses to work.
//
// A Conn is a [driver.Subscriber] ([Conn.Listen]): one subscriber session
// per Conn, on one pooled connection, wakes all of a process's waiters.
// redigo has no Cluster client: channels are classic channels.
//
// A Conn pipelines ([driver.Pipeliner]) only a few small commands, such as
// a transaction's without scripts, and sends a larger pipeline's commands
// one by one: redigo writes what does not fit its buffer outside
// DoContext's watch, bounded only by a write timeout the Conn cannot see,
// so a large pipeline to a server that stopped reading would outlast the
// deadline.
package redigo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locksmith-go/lock/driver"
)

// Pool hands out connections; *redis.Pool implements it, and so can a
// pool of your own, or a wrapper of *redis.Pool that counts or traces.
type Pool interface {
	// GetContext returns a connection, waiting for one within ctx if the
	// pool is exhausted. The Conn closes it after each command.
	GetContext(ctx context.Context) (redis.Conn, error)
}

// Conn is a [driver.Conn] over a redigo pool.
type Conn struct {
	p    Pool
	addr string
	err  error // from New: the pool cannot be used
}

var (
	_ driver.Conn      = (*Conn)(nil)
	_ driver.Addresser = (*Conn)(nil)
	_ driver.Validator = (*Conn)(nil)
	_ driver.Pinner    = (*Conn)(nil)
)

// Option configures a Conn.
type Option func(*Conn)

// WithAddr tells the Conn the address of the server its pool dials, which a
// pool does not reveal. Redlock uses it to reject a node listed twice, and
// telemetry reports it.
func WithAddr(addr string) Option { return func(c *Conn) { c.addr = addr } }

// New returns a Conn that takes a connection from p for every command. A
// nil p, or a *redis.Pool that would run something no context bounds, is
// reported by Validate and every command, and strategy constructors refuse
// it with an error that names the field:
//
//   - DialContext must be set (Dial is not used). Dial takes no context: a
//     dial to an unreachable server, or the AUTH or SELECT that redis.Dial
//     sends to a stalled one, would outlast the deadline (for ever, with
//     no read timeout).
//   - TestOnBorrow must be nil, for the same reason. TestOnBorrowContext is
//     fine; send its PING with redis.DoContext.
//
// Another Pool implementation cannot be checked; its GetContext must
// honour the context itself.
func New(p Pool, opts ...Option) *Conn {
	c := &Conn{p: p, err: check(p)}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// check returns an error if p is nil, or is a *redis.Pool with a function
// that takes no context.
func check(p Pool) error {
	if err := driver.NotNil(p); err != nil {
		return fmt.Errorf("redigo: pool %v", err)
	}
	rp, ok := p.(*redis.Pool)
	switch {
	case !ok:
		return nil // not ours to check: it must honour the context itself
	case rp.DialContext == nil:
		return errors.New("redigo: redis.Pool.DialContext must be set: Pool.Dial takes no context, " +
			"so a dial, and the AUTH or SELECT it sends, would not end by the caller's deadline")
	case rp.TestOnBorrow != nil:
		return errors.New("redigo: redis.Pool.TestOnBorrow must be nil: it takes no context, " +
			"so a command it sends would not end by the caller's deadline; use TestOnBorrowContext, with redis.DoContext")
	}
	return nil
}

// Validate implements [driver.Validator]: it returns the error that New
// found, naming the field to change, or nil.
func (c *Conn) Validate() error { return c.err }

// Addr implements [driver.Addresser]: the address given with WithAddr, or "".
func (c *Conn) Addr() string { return c.addr }

// do runs one command on a pooled connection, with ctx. When ctx ended the
// command, the error is ctx's, whichever of redigo's read timeout (set from
// the deadline) or its context check fired first.
func (c *Conn) do(ctx context.Context, cmd string, args ...any) (any, error) {
	return c.run(ctx, func(conn redis.Conn) (any, error) { return doContext(conn, ctx, cmd, args...) })
}

// run runs f on a pooled connection within ctx, and returns its reply, or
// the error that [Conn.failed] makes of f's.
func (c *Conn) run(ctx context.Context, f func(redis.Conn) (any, error)) (any, error) {
	if c.err != nil {
		return nil, c.err
	}
	// redigo's DoContext sends the command even on a context that is
	// already done, and returns only the context's error.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := c.p.GetContext(ctx)
	if err == nil {
		defer conn.Close()
		var reply any
		if reply, err = f(conn); err == nil {
			return reply, nil
		}
	}
	return nil, c.failed(ctx, err)
}

// failed returns the error of a command that failed with err: ctx's, if
// it ended, or if its deadline passed (a read timeout beat ctx's timer),
// and err otherwise.
func (c *Conn) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return err
}

// doContext sends a command within ctx. A context that can never end (Done
// is nil) needs no watching: a plain Do sends it, under the connection's
// read timeout. Otherwise redis.DoContext watches it, with a goroutine,
// closure and channel per command, except for a small command whose
// deadline is at most [unwatched] away (a Redlock node's, by default):
// DoWithTimeout sends it on the caller's goroutine, which keeps the
// contract of driver.Conn:
//
//   - The read ends by the deadline: DoWithTimeout sets the socket's read
//     deadline from the time left, and a read timeout closes the
//     connection (do returns ctx's error). A shorter read timeout of the
//     connection does not shorten it.
//   - The write cannot block: the connection carries one command at a
//     time and every earlier reply on it was read (or it was closed), so
//     its send buffer is empty, and a command of at most [smallCommand]
//     bytes, less than one TCP segment, fits whatever the server does
//     (Linux allocates an empty socket's first buffer even under memory
//     pressure). A larger command, or one of unknown size, goes through
//     DoContext.
//   - A cancellation before the deadline is not watched: the command
//     returns by the deadline with the cancellation's error, as
//     driver/goredis's commands with a deadline do. Redlock's fan-out
//     returns on the caller's cancellation and leaves the node's command
//     to its node timeout.
//
// A deadline already passed sends nothing. A connection without
// redis.ConnWithTimeout goes through DoContext.
func doContext(conn redis.Conn, ctx context.Context, cmd string, args ...any) (any, error) {
	if ctx.Done() == nil {
		return conn.Do(cmd, args...)
	}
	if dl, ok := ctx.Deadline(); ok {
		cwt, ok := conn.(redis.ConnWithTimeout)
		switch left := time.Until(dl); {
		case left <= 0:
			return nil, context.DeadlineExceeded
		case ok && left <= unwatched && small(cmd, args):
			reply, err := cwt.DoWithTimeout(left, cmd, args...)
			if err != errTimeoutNotSupported {
				return reply, err
			}
		}
	}
	return redis.DoContext(conn, ctx, cmd, args...)
}

// errTimeoutNotSupported is redigo's error for a connection that does not
// implement redis.ConnWithTimeout: a pooled connection whose dialled one
// does not returns it, having sent nothing, and doContext uses DoContext
// instead.
var errTimeoutNotSupported = func() error {
	_, err := redis.DoWithTimeout(nil, 0, "")
	return err
}()

// unwatched is the furthest deadline under which doContext sends a small
// command without watching its context's cancellation: the longest that a
// cancellation can wait for a paused or dead server.
const unwatched = time.Second

// smallCommand is the size, in bytes as written, of the largest command
// that doContext sends from the caller's goroutine: below the smallest
// TCP segment (536 bytes), and far below any socket's send buffer.
const smallCommand = 512

// small reports whether cmd with args takes at most smallCommand bytes as
// redigo writes it, as far as commandSize knows.
func small(cmd string, args []any) bool {
	n := commandSize(cmd, args)
	return n >= 0 && n <= smallCommand
}

// pipelineSize returns the most bytes that cmds take as redigo writes them,
// or -1 when commandSize does not know one's.
func pipelineSize(cmds [][]any) int {
	size := 0
	for _, cmd := range cmds {
		name, _ := cmd[0].(string)
		n := commandSize(name, cmd[1:])
		if n < 0 {
			return -1
		}
		size += n
	}
	return size
}

// commandSize returns the most bytes that cmd with args takes as redigo
// writes it (each argument is a RESP bulk string: $, its length, CRLF,
// itself, CRLF), or -1 when an argument's type has no size known here.
func commandSize(cmd string, args []any) int {
	const frame = 16 // the array or bulk header and its CRLFs, at most
	n := frame + frame + len(cmd)
	for _, a := range args {
		switch a := a.(type) {
		case string:
			n += frame + len(a)
		case []byte:
			n += frame + len(a)
		case int, int64:
			n += frame + 20 // the longest int64 in decimal
		default:
			return -1
		}
	}
	return n
}

// SetNX implements [driver.Conn].
func (c *Conn) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	var reply any
	var err error
	if ttl > 0 {
		reply, err = c.do(ctx, "SET", key, value, "NX", "PX", ttl.Milliseconds())
	} else {
		reply, err = c.do(ctx, "SET", key, value, "NX")
	}
	return reply != nil && err == nil, err
}

// Get implements [driver.Conn].
func (c *Conn) Get(ctx context.Context, key string) (string, bool, error) {
	return stringOK(redis.String(c.do(ctx, "GET", key)))
}

// GetSet implements [driver.Conn].
func (c *Conn) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	return stringOK(redis.String(c.do(ctx, "GETSET", key, value)))
}

// Del implements [driver.Conn].
func (c *Conn) Del(ctx context.Context, key string) (bool, error) {
	n, err := redis.Int64(c.do(ctx, "DEL", key))
	return n > 0, err
}

// PTTL implements [driver.Conn].
func (c *Conn) PTTL(ctx context.Context, key string) (time.Duration, bool, error) {
	ms, err := redis.Int64(c.do(ctx, "PTTL", key))
	if err != nil {
		return 0, false, err
	}
	ttl, ok := driver.FromPTTL(ms)
	return ttl, ok, nil
}

// EvalSha implements [driver.Conn].
func (c *Conn) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	return c.do(ctx, "EVALSHA", scriptArgs(sha1, keys, args)...)
}

// Eval implements [driver.Conn].
func (c *Conn) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	return c.do(ctx, "EVAL", scriptArgs(src, keys, args)...)
}

// Do implements [driver.Commander]. args[0] is the command's name.
func (c *Conn) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redigo: Do: no command")
	}
	name, _ := args[0].(string)
	return c.do(ctx, name, args[1:]...)
}

// Pipeline implements [driver.Pipeliner]: commands that take at most
// [smallCommand] bytes in all go in one round trip, written into redigo's
// buffer (Send, which writes nothing to the socket at that size) and sent
// by sendAll within ctx's watch; larger ones go one after another, as
// driver.Pipeline sends them over a Conn that does not pipeline. A
// server's error is in its command's place.
func (c *Conn) Pipeline(ctx context.Context, cmds [][]any) ([]any, error) {
	if n := pipelineSize(cmds); n < 0 || n > smallCommand {
		return driver.Pipeline(ctx, unpipelined{c, c}, cmds)
	}
	reply, err := c.run(ctx, func(conn redis.Conn) (any, error) { return sendAll(conn, ctx, cmds) })
	if err != nil {
		return nil, err
	}
	replies, ok := reply.([]any)
	if !ok || len(replies) != len(cmds) {
		return nil, fmt.Errorf("redigo: a pipeline of %d commands: got reply %T", len(cmds), reply)
	}
	return replies, nil
}

// sendAll writes cmds into conn's buffer and sends them, reading their
// replies (redigo's Do of "", which does both) within ctx. It uses
// DoContext rather than doContext, whose deadline that passed sends
// nothing: that would leave the commands in the buffer, for the pool's
// Close to send after the call returned. DoContext breaks the connection
// instead.
func sendAll(conn redis.Conn, ctx context.Context, cmds [][]any) (any, error) {
	for _, cmd := range cmds {
		name, _ := cmd[0].(string)
		if err := conn.Send(name, cmd[1:]...); err != nil {
			return nil, err // the connection broke: the pool does not hand it out again
		}
	}
	if ctx.Done() == nil {
		return conn.Do("")
	}
	return redis.DoContext(conn, ctx, "")
}

// unpipelined is a Conn that hides Pipeline, so that driver.Pipeline sends
// its commands one after another.
type unpipelined struct {
	driver.Conn
	driver.Commander
}

// Pinnable implements [driver.Pinner]: every pool can pin, unless New
// refused it.
func (c *Conn) Pinnable() error { return c.err }

// Pin implements [driver.Pinner]: f's Conn sends its commands over one
// connection taken from the pool, within ctx, which goes back to it when f
// returns. A pool serves one server, which holds every key.
func (c *Conn) Pin(ctx context.Context, _ string, f func(driver.Conn) error) error {
	if c.err != nil {
		return c.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	conn, err := c.p.GetContext(ctx)
	if err != nil {
		return cmp.Or(ctx.Err(), err)
	}
	defer func() {
		if conn.Err() != nil {
			forgetTransaction(conn)
		}
		conn.Close()
	}()
	return f(&Conn{p: one{conn}, addr: c.addr})
}

// forgetTransaction makes redigo's pool forget that conn is in a
// transaction (WATCH or MULTI), without sending anything. conn broke when
// a command's context ended, and that command's goroutine may still be
// writing in redigo's buffers: Close would send DISCARD or UNWATCH there,
// as redigo's pool ends a transaction it sees open, racing with it. A
// DoContext whose deadline has passed sends nothing, but the pool still
// takes DISCARD as ending the transaction.
func forgetTransaction(conn redis.Conn) {
	past, cancel := context.WithDeadline(context.Background(), time.Time{})
	defer cancel()
	_, _ = redis.DoContext(conn, past, "DISCARD")
}

// one is the Pool of a pinned Conn: it hands out the same connection every
// time, and Pin closes it.
type one struct{ conn redis.Conn }

// GetContext implements [Pool]. A connection that a command broke (its
// context ended: redigo closed it, and the command's goroutine may still
// be using it) is not handed out again: a command sent there would race
// with that goroutine.
func (o one) GetContext(context.Context) (redis.Conn, error) {
	if err := o.conn.Err(); err != nil {
		return nil, fmt.Errorf("redigo: the pinned connection broke: %w", err)
	}
	return kept{o.conn}, nil
}

// kept is a connection whose Close leaves it open, for the next command.
type kept struct{ redis.Conn }

// Close implements redis.Conn: it does nothing.
func (kept) Close() error { return nil }

// DoContext implements redis.ConnWithContext, which redis.DoContext needs,
// with the connection's own.
func (k kept) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	return redis.DoContext(k.Conn, ctx, cmd, args...)
}

// ReceiveContext implements redis.ConnWithContext with the connection's
// own.
func (k kept) ReceiveContext(ctx context.Context) (any, error) {
	return redis.ReceiveContext(k.Conn, ctx)
}

// scriptArgs returns the arguments of EVAL or EVALSHA: the script or its
// SHA-1, the number of keys, the keys, then args. It copies keys and args,
// which Conn must not modify.
func scriptArgs(script string, keys []string, args []any) []any {
	a := make([]any, 0, 2+len(keys)+len(args))
	a = append(a, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, args...)
}

// stringOK returns a string reply as Conn returns it: redigo's nil reply
// (redis.ErrNil) is a missing key, ok false, and no error.
func stringOK(s string, err error) (string, bool, error) {
	if errors.Is(err, redis.ErrNil) {
		return "", false, nil
	}
	return s, err == nil, err
}
