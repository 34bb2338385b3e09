// Package rueidis adapts a rueidis client to [driver.Conn]. Its name is
// that of github.com/redis/rueidis, so import it under another, such as
// rueidisdriver. Open the client with [NewClient] (a standalone server, or
// the master that Sentinels name) or [NewClusterClient], which set the
// options a lock call depends on, and pass it to [New]:
//
//	client, err := rueidisdriver.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
//	...
//	defer client.Close()
//	locker, err := single.New(rueidisdriver.New(client))
//
// [New] accepts any [rueidis.Client], RESP3 or RESP2, but cannot check its
// options: [NewClient] lists them. rueidis honours the context on every
// command, with one exception ([New]); a client of NewClient dials a
// standalone server within a command's context and ends a handshake when
// it is cancelled, but rueidis dials a Sentinel or a Cluster as the client
// opens, bounded by ClientOption.Dialer.Timeout.
//
// A Conn is a [driver.Pinner], with rueidis's Dedicate, and a
// [driver.Subscriber] ([Conn.Listen]).
package rueidis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock/driver"
)

// Conn is a [driver.Conn] over a rueidis client.
type Conn struct {
	c    rueidis.Client
	cmd  rueidis.CoreClient // sends the commands: c, or one of its connections (see Pin)
	slot *string            // the key whose slot every command carries: a Cluster client's pinned Conn (see Pin)
	tx   *transaction       // a pinned Conn's transaction, held back from MULTI to EXEC (see Pin)
	addr string
	err  error // from New: the client cannot be used
}

var (
	_ driver.Conn      = (*Conn)(nil)
	_ driver.Addresser = (*Conn)(nil)
	_ driver.Commander = (*Conn)(nil)
	_ driver.Validator = (*Conn)(nil)
	_ driver.Pinner    = (*Conn)(nil)
	_ driver.Pipeliner = (*Conn)(nil)
)

// Option configures a Conn.
type Option func(*Conn)

// WithAddr tells the Conn the address to report for its server, in place
// of the one it finds (see [Conn.Addr]). Redlock uses it to reject a node
// listed twice, and telemetry reports it.
func WithAddr(addr string) Option { return func(c *Conn) { c.addr = addr } }

// New returns a Conn that sends commands through c, which [NewClient] or
// [NewClusterClient] opened, or which sets the options they set. If c is
// nil, the Conn reports it from Validate and from every command, and
// strategy constructors refuse it.
//
// rueidis honours the context on every command but one way: a command
// waits, whatever its context, for a free slot in its connection's ring of
// commands in flight (2^RingScaleEachConn, 1024 by default). A command
// whose context ended keeps its slot until its reply comes, so a silent
// server fills the ring; rueidis frees it when its keep-alive closes the
// connection, about Dialer.KeepAlive + ConnWriteTimeout later.
func New(c rueidis.Client, opts ...Option) *Conn {
	conn := &Conn{c: c, cmd: c}
	if err := driver.NotNil(c); err != nil {
		conn.err = fmt.Errorf("rueidis: client %v", err)
		return conn
	}
	if c.Mode() == rueidis.ClientModeStandalone {
		for addr := range c.Nodes() { // a standalone client has one node
			conn.addr = addr
		}
	}
	for _, opt := range opts {
		opt(conn)
	}
	return conn
}

// NewClient opens a rueidis client of the standalone server at
// o.InitAddress[0], or of the master that o.Sentinel names, for [New]:
// rueidis.NewClient(o) with the four options below set in o, without which
// a lock call can lose its deadline or a release. A standalone server is
// dialled on each command, within its context, until one connects, as
// go-redis and redigo do: NewClient neither waits for a silent server nor
// fails when it is down. The caller closes the client.
//
//   - DisableRetry: rueidis would resend a read-only command (GET, PTTL)
//     after a network error; a lock call bounds and reports it itself.
//   - AlwaysPipelining (and DisableAutoPipelining off): without it rueidis
//     sends a lone caller's command with a socket deadline, and when that
//     passes closes the connection, failing what other callers sent on it
//     meanwhile (a release that would have landed once a stalled server
//     resumed). With it, a context that ends only abandons its own reply.
//   - PipelineMultiplex -1: one pipeline per server. With more, a server's
//     restart fails each pipeline's next command with EOF, and the
//     strategies resend a call whose connection died only once.
//   - ForceSingleClient: rueidis neither asks the server whether it is a
//     Cluster, nor refuses to start when it is down (ignored for Sentinel).
//
// The rest of o is the caller's: address, credentials, TLS, timeouts, and
// the client-side cache, which a Conn does not use (set DisableCache for a
// server without CLIENT TRACKING, such as locktest's in-process one).
func NewClient(o rueidis.ClientOption) (rueidis.Client, error) {
	return open(clientOption(o, true))
}

// NewClusterClient opens a rueidis client of the Cluster that
// o.InitAddress seeds, for [New]: rueidis.NewClient(o) with the options
// that [NewClient] sets in o, but ForceSingleClient, which it clears.
func NewClusterClient(o rueidis.ClientOption) (rueidis.Client, error) {
	return open(clientOption(o, false))
}

// clientOption returns o with the options of [NewClient] set, and
// ForceSingleClient set to single.
func clientOption(o rueidis.ClientOption, single bool) rueidis.ClientOption {
	o.DisableRetry, o.AlwaysPipelining, o.DisableAutoPipelining, o.PipelineMultiplex = true, true, false, -1
	o.ForceSingleClient = single
	return o
}

// open opens a client with o, whose connections are dialled by [dialer].
//
// rueidis dials a standalone server, and waits for its handshake, before
// NewClient returns, bounded by o.Dialer.Timeout and o.ConnWriteTimeout
// but by no caller's context: a paused server would hold a program that
// much longer than the lock call it opened the client for. So the first
// dial of a standalone client fails at once. rueidis returns such a client
// with the error, and it dials again on its first command, within that
// command's context, as go-redis's and redigo's clients do.
func open(o rueidis.ClientOption) (rueidis.Client, error) {
	o.DialCtxFn = dialer(o, o.ForceSingleClient && o.Sentinel.MasterSet == "")
	c, err := rueidis.NewClient(o)
	if driver.NotNil(c) != nil { // rueidis can return a typed nil
		return nil, err
	}
	return c, nil
}

// errDialLater fails the first dial of a standalone client (see open).
var errDialLater = errors.New("rueidis: the first dial waits for the first command")

// dialer returns a DialCtxFn that dials as o says, and whose connections
// end their handshake when its context is cancelled (see handshake). If
// later, its first call fails with errDialLater instead.
func dialer(o rueidis.ClientOption, later bool) func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
	var dialed atomic.Bool
	dialed.Store(!later)
	return func(ctx context.Context, addr string, d *net.Dialer, t *tls.Config) (conn net.Conn, err error) {
		switch {
		case !dialed.Swap(true):
			return nil, errDialLater
		case o.DialCtxFn != nil:
			conn, err = o.DialCtxFn(ctx, addr, d, t)
		case o.DialFn != nil: // deprecated, but rueidis still honours it
			conn, err = o.DialFn(addr, d, t)
		case t != nil:
			conn, err = (&tls.Dialer{NetDialer: d, Config: t}).DialContext(ctx, "tcp", addr)
		default:
			conn, err = d.DialContext(ctx, "tcp", addr)
		}
		if err != nil || ctx.Done() == nil {
			return conn, err
		}
		return handshake(ctx, conn), nil
	}
}

// handshake returns c, whose reads and writes fail once ctx is cancelled,
// until rueidis clears its deadline.
//
// rueidis sends a new connection's handshake (HELLO, or AUTH and SELECT)
// under a deadline from the dialling command's context, but does not watch
// the context's cancellation, as it does for the commands that follow: a
// cancelled command waiting for a server that does not answer would wait
// out Dialer.Timeout. When the handshake is over, rueidis clears the
// connection's deadline (SetDeadline of the zero time), and the
// connection then serves every caller, whatever becomes of that context.
func handshake(ctx context.Context, c net.Conn) net.Conn {
	h := &shaking{Conn: c, ctx: ctx}
	h.stop = context.AfterFunc(ctx, func() { _ = h.SetDeadline(time.Time{}.Add(1)) })
	return h
}

// shaking is a connection in its handshake (see handshake).
type shaking struct {
	net.Conn
	ctx  context.Context
	stop func() bool

	mu   sync.Mutex
	over bool // the handshake is over: ctx no longer counts
}

// SetDeadline sets c's deadline to t, or to a time past if ctx is cancelled
// and the handshake is not over. The zero time ends the handshake.
func (h *shaking) SetDeadline(t time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case t.IsZero() && !h.over:
		h.over = true
		h.stop()
	case !h.over && h.ctx.Err() != nil:
		t = time.Time{}.Add(1)
	}
	return h.Conn.SetDeadline(t)
}

// Validate implements [driver.Validator]: it returns the error of a nil
// client, or nil.
func (c *Conn) Validate() error { return c.err }

// Addr implements [driver.Addresser]: the address given with WithAddr, or
// that of a standalone client's server; "" for a Sentinel or Cluster
// client, whose servers move.
func (c *Conn) Addr() string {
	if c.err != nil {
		return ""
	}
	return c.addr
}

// do sends the command that build builds (see slotted).
func (c *Conn) do(ctx context.Context, build func(rueidis.Builder) rueidis.Completed) rueidis.RedisResult {
	return c.cmd.Do(ctx, c.slotted(build(c.cmd.B())))
}

// slotted returns cmd in the slot of c.slot's key, if it is set.
func (c *Conn) slotted(cmd rueidis.Completed) rueidis.Completed {
	if c.slot != nil {
		return cmd.SetSlot(*c.slot)
	}
	return cmd
}

// SetNX implements [driver.Conn].
func (c *Conn) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if c.err != nil {
		return false, c.err
	}
	err := c.do(ctx, func(b rueidis.Builder) rueidis.Completed {
		nx := b.Set().Key(key).Value(value).Nx()
		if ttl > 0 {
			return nx.PxMilliseconds(ttl.Milliseconds()).Build()
		}
		return nx.Build()
	}).Error()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	return err == nil, err
}

// Get implements [driver.Conn].
func (c *Conn) Get(ctx context.Context, key string) (string, bool, error) {
	if c.err != nil {
		return "", false, c.err
	}
	return stringOK(c.do(ctx, func(b rueidis.Builder) rueidis.Completed { return b.Get().Key(key).Build() }).ToString())
}

// GetSet implements [driver.Conn].
func (c *Conn) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	if c.err != nil {
		return "", false, c.err
	}
	return stringOK(c.do(ctx, func(b rueidis.Builder) rueidis.Completed { return b.Getset().Key(key).Value(value).Build() }).ToString())
}

// Del implements [driver.Conn].
func (c *Conn) Del(ctx context.Context, key string) (bool, error) {
	if c.err != nil {
		return false, c.err
	}
	n, err := c.do(ctx, func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() }).AsInt64()
	return n > 0, err
}

// PTTL implements [driver.Conn].
func (c *Conn) PTTL(ctx context.Context, key string) (time.Duration, bool, error) {
	if c.err != nil {
		return 0, false, c.err
	}
	ms, err := c.do(ctx, func(b rueidis.Builder) rueidis.Completed { return b.Pttl().Key(key).Build() }).AsInt64()
	if err != nil {
		return 0, false, err
	}
	ttl, ok := driver.FromPTTL(ms)
	return ttl, ok, nil
}

// EvalSha implements [driver.Conn].
func (c *Conn) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	if c.err != nil {
		return nil, c.err
	}
	return reply(c.do(ctx, func(b rueidis.Builder) rueidis.Completed {
		var buf [4]string
		return b.Evalsha().Sha1(sha1).Numkeys(int64(len(keys))).Key(keys...).Arg(strs(buf[:], args)...).Build()
	}))
}

// Eval implements [driver.Conn].
func (c *Conn) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	if c.err != nil {
		return nil, c.err
	}
	return reply(c.do(ctx, func(b rueidis.Builder) rueidis.Completed {
		var buf [4]string
		return b.Eval().Script(src).Numkeys(int64(len(keys))).Key(keys...).Arg(strs(buf[:], args)...).Build()
	}))
}

// Do implements [driver.Commander]. args[0] is the command's name; the
// arguments are formatted as [Conn.EvalSha]'s are. On a Cluster client the
// command goes to any node, since it names no key, and a pinned Conn's to
// the master of its key's slot (see [Conn.Pin]).
func (c *Conn) Do(ctx context.Context, args ...any) (any, error) {
	if c.err != nil {
		return nil, c.err
	}
	if len(args) == 0 {
		return nil, errors.New("rueidis: Do: no command")
	}
	a := strs(nil, args)
	build := func(b rueidis.Builder) rueidis.Completed { return b.Arbitrary(a[0]).Args(a[1:]...).Build() }
	if c.tx != nil {
		return c.tx.do(ctx, c, a[0], build)
	}
	return reply(c.do(ctx, build))
}

// Pipeline implements [driver.Pipeliner] with rueidis's DoMulti, which
// writes the commands together: a Cluster client sends those of each
// master over a connection to it. A script (EVAL or EVALSHA) goes to the
// master of its keys' slot; another command as [Conn.Do]'s, to any node
// of a Cluster, or over a pinned Conn to its key's master. A pinned Conn
// sends the commands as they are, MULTI and EXEC included, in one write.
func (c *Conn) Pipeline(ctx context.Context, cmds [][]any) ([]any, error) {
	if c.err != nil {
		return nil, c.err
	}
	built := make(rueidis.Commands, len(cmds))
	for i, args := range cmds {
		built[i] = c.slotted(build(c.cmd.B(), strs(nil, args)))
	}
	replies := make([]any, len(cmds))
	for i, r := range c.cmd.DoMulti(ctx, built...) {
		v, err := reply(r)
		if replies[i] = v; err != nil {
			replies[i] = err
		}
	}
	return replies, nil
}

// build builds the command a: a script with its keys as keys, so that a
// Cluster client sends it to their master, or any other as [Conn.Do] does.
func build(b rueidis.Builder, a []string) rueidis.Completed {
	if len(a) >= 3 {
		if n, err := strconv.Atoi(a[2]); err == nil && n > 0 && len(a) >= 3+n {
			switch strings.ToUpper(a[0]) {
			case "EVALSHA":
				return b.Evalsha().Sha1(a[1]).Numkeys(int64(n)).Key(a[3 : 3+n]...).Arg(a[3+n:]...).Build()
			case "EVAL":
				return b.Eval().Script(a[1]).Numkeys(int64(n)).Key(a[3 : 3+n]...).Arg(a[3+n:]...).Build()
			}
		}
	}
	return b.Arbitrary(a[0]).Args(a[1:]...).Build()
}

// A transaction holds back a pinned Conn's commands from MULTI until EXEC,
// which sends them all in one write (see [Conn.Pin]).
type transaction struct {
	cmds rueidis.Commands // MULTI and the commands queued after it; nil outside a transaction
}

// do sends the command named name that build builds over c, or holds it
// back: MULTI, and the commands after it, answer "OK" and "QUEUED"; EXEC
// sends them with itself in one write and returns its own reply; DISCARD
// drops them, unsent.
func (tx *transaction) do(ctx context.Context, c *Conn, name string, build func(rueidis.Builder) rueidis.Completed) (any, error) {
	multi := strings.EqualFold(name, "MULTI")
	if tx.cmds == nil && !multi {
		return reply(c.do(ctx, build))
	}
	if tx.cmds != nil && strings.EqualFold(name, "DISCARD") {
		tx.cmds = nil
		return "OK", nil
	}
	if multi && tx.cmds != nil {
		return nil, errors.New("rueidis: MULTI calls can not be nested")
	}
	tx.cmds = append(tx.cmds, c.slotted(build(c.cmd.B())))
	switch {
	case multi:
		return "OK", nil
	case !strings.EqualFold(name, "EXEC"):
		return "QUEUED", nil
	}
	cmds := tx.cmds
	tx.cmds = nil
	results := c.cmd.DoMulti(ctx, cmds...)
	for _, r := range results[:len(results)-1] { // a command refused as it was queued
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return nil, err
		}
	}
	return reply(results[len(results)-1])
}

// Pinnable implements [driver.Pinner]: every client can pin, unless New
// refused it.
func (c *Conn) Pinnable() error { return c.err }

// Pin implements [driver.Pinner] with rueidis's Dedicate: f's Conn sends
// its commands over one connection of the client's dedicated pool
// (ClientOption.BlockingPoolSize). When f returns, a goroutine gives the
// connection back: rueidis first sends it UNSUBSCRIBE and DISCARD without
// a context, which a silent server would make Pin wait for until the
// keep-alive closed the connection.
//
// A standalone or Sentinel client takes (and may dial) that connection as
// Dedicate is called, without a context: Pin waits for it within ctx, and
// when ctx ends first, a goroutine gives it back when it comes.
//
// A Cluster client's dedicated client connects on its first command, to
// the master of that command's slot, and then panics on a command of
// another slot. So every command of f's Conn carries key's slot
// (rueidis.Completed.SetSlot), even one that names no key (MULTI, EXEC,
// WAIT) or a key of another slot (which key's master refuses with MOVED,
// unless it serves that slot too): the first command reaches key's master.
//
// f's Conn holds back [Conn.Do]'s commands from MULTI until EXEC, sends
// them in one write, and returns EXEC's reply: MULTI answers "OK", each
// command after it "QUEUED", and DISCARD drops them unsent; a command the
// server refuses as it queues it is EXEC's error. Sent one by one, a
// transaction would take in the keep-alive's PING, which rueidis sends on
// an idle connection, and EXEC would answer one reply more. Use Do alone
// inside a transaction: the other methods are not held back.
func (c *Conn) Pin(ctx context.Context, key string, f func(driver.Conn) error) error {
	if err := c.Pinnable(); err != nil {
		return err
	}
	pinned := &Conn{c: c.c, addr: c.addr, tx: &transaction{}}
	var release func()
	if c.c.Mode() == rueidis.ClientModeCluster {
		pinned.cmd, release = c.c.Dedicate()
		pinned.slot = &key
	} else {
		var err error
		if pinned.cmd, release, err = dedicate(ctx, c.c); err != nil {
			return err
		}
	}
	defer func() { go release() }()
	return f(pinned)
}

// dedicate returns c.Dedicate's connection, or ctx's error if ctx ends
// first (see Conn.Pin).
func dedicate(ctx context.Context, c rueidis.Client) (rueidis.DedicatedClient, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	type dedicated struct {
		one     rueidis.DedicatedClient
		release func()
	}
	got := make(chan dedicated, 1)
	go func() {
		one, release := c.Dedicate()
		got <- dedicated{one, release}
	}()
	select {
	case d := <-got:
		return d.one, d.release, nil
	case <-ctx.Done():
		go func() { (<-got).release() }()
		return nil, nil, ctx.Err()
	}
}

// strs formats the arguments of a command as strings, as go-redis and
// redigo write them: integers and floats in decimal, a bool as 1 or 0. It
// writes them in buf when they fit, so that a script's few arguments,
// which rueidis copies, need no slice of their own.
func strs(buf []string, args []any) []string {
	s := buf[:min(len(args), len(buf))]
	if len(s) < len(args) {
		s = make([]string, len(args))
	}
	for i, a := range args {
		switch a := a.(type) {
		case string:
			s[i] = a
		case []byte:
			s[i] = string(a)
		case int:
			s[i] = strconv.Itoa(a)
		case int64:
			s[i] = strconv.FormatInt(a, 10)
		case float64:
			s[i] = strconv.FormatFloat(a, 'f', -1, 64)
		case bool:
			if a {
				s[i] = "1"
			} else {
				s[i] = "0"
			}
		default:
			s[i] = fmt.Sprint(a)
		}
	}
	return s
}

// stringOK returns a string reply as Conn returns it: rueidis's nil reply
// is a missing key, ok false, and no error.
func stringOK(s string, err error) (string, bool, error) {
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	return s, err == nil, err
}

// reply returns a script's or a command's reply as Conn returns it: nil,
// int64, string, or []any of those (with RESP3, also bool, float64 and
// map[string]any), and rueidis's nil reply as (nil, nil).
func reply(r rueidis.RedisResult) (any, error) {
	v, err := r.ToAny()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	return v, err
}
