// Package goredis adapts a go-redis v9 client to [driver.Conn]:
//
//	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//	locker, err := single.New(goredis.New(client))
//
// [New] accepts any [redis.UniversalClient]: *redis.Client,
// *redis.ClusterClient, a failover (Sentinel) client and *redis.Ring, with
// RESP2 or RESP3. Every command ends by its context's deadline, so the
// client must set ContextTimeoutEnabled and must not set ReadTimeout or
// WriteTimeout to -2: [New] says why, and a Conn over a client that fails
// them refuses to work. A command whose context has no deadline returns at
// once when it is cancelled, at the cost of a goroutine.
//
// A Conn is a [driver.Subscriber] ([Conn.Listen]): one subscriber session
// per Conn, on go-redis PubSub connections outside the client's pool,
// wakes all of a process's waiters.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver"
)

// commands sends a Conn's commands: a client, or one connection of its
// pool (*redis.Conn).
type commands interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Conn is a [driver.Conn] over a go-redis client.
type Conn struct {
	c   redis.UniversalClient
	cmd commands // sends the commands: c, or one connection of c's pool (see Pin)
	err error    // from New: the client cannot be used

	// sending counts the commands that await stopped waiting for and that
	// are still under way: a pinned Conn's connection goes back to its
	// pool only once they end (see Pin).
	sending sync.WaitGroup
}

var (
	_ driver.Conn      = (*Conn)(nil)
	_ driver.Addresser = (*Conn)(nil)
	_ driver.Validator = (*Conn)(nil)
	_ driver.Pinner    = (*Conn)(nil)
	_ driver.Pipeliner = (*Conn)(nil)
)

// New returns a Conn that sends commands through c. If c is nil, or its
// options would let a command outlive its context, the Conn reports it
// from Validate and from every command, and strategy constructors refuse
// it with its error, which names the option:
//
//   - ContextTimeoutEnabled must be true. Without it go-redis bounds a
//     command by its ReadTimeout (5s by default, or never) rather than by
//     the context's deadline, so a stalled server would hold a lock call
//     that long.
//   - ReadTimeout and WriteTimeout must not be -2, which turns off socket
//     deadlines, the context's too. -1 (no timeout of the client's own) is
//     fine.
//
// New checks the options of *redis.Client, *redis.ClusterClient, a
// failover client and *redis.Ring. Another UniversalClient, such as a
// wrapper, cannot be checked; it must honour the context itself.
//
// go-redis dials a TLS connection with tls.DialWithDialer, which its
// DialTimeout bounds but the context does not; keep DialTimeout short.
func New(c redis.UniversalClient) *Conn {
	return &Conn{c: c, cmd: c, err: check(c)}
}

// check returns an error if c is nil, or if its options let a command
// outlive its context's deadline.
func check(c redis.UniversalClient) error {
	if err := driver.NotNil(c); err != nil {
		return fmt.Errorf("goredis: client %v", err)
	}
	o, ok := optionsOf(c)
	if !ok {
		return nil // not ours to check: it must honour the context itself
	}
	invalid := func(option, reason string) error {
		return errors.New("goredis: " + o.name + "." + option + " " + reason)
	}
	const noDeadlines = "must not be -2, which turns off socket deadlines, the context's too (-1 means no timeout of the client's own)"
	switch {
	case !o.contextTimeout:
		return invalid("ContextTimeoutEnabled", "must be true: without it go-redis bounds each command by its ReadTimeout "+
			"(5s by default), not by the context's deadline")
	case o.readTimeout == -2:
		return invalid("ReadTimeout", noDeadlines)
	case o.writeTimeout == -2:
		return invalid("WriteTimeout", noDeadlines)
	}
	return nil
}

// options are the settings of a go-redis client that decide whether a
// command ends by its context's deadline, with timeouts as the user gave
// them.
type options struct {
	name                      string // the options type, such as "redis.Options"
	contextTimeout            bool
	readTimeout, writeTimeout time.Duration
}

// optionsOf returns the options of the client types go-redis provides.
func optionsOf(c redis.UniversalClient) (options, bool) {
	switch cl := c.(type) {
	case *redis.Client:
		o := cl.Options()
		name := "redis.Options"
		if o.Addr == "FailoverClient" {
			name = "redis.FailoverOptions"
		}
		// NewClient has applied go-redis's defaults, which turn a timeout
		// of -1 (none) into 0 and -2 (no socket deadlines) into -1.
		return options{name, o.ContextTimeoutEnabled, given(o.ReadTimeout), given(o.WriteTimeout)}, true
	case *redis.ClusterClient:
		o := cl.Options()
		return options{"redis.ClusterOptions", o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout}, true
	case *redis.Ring:
		o := cl.Options()
		return options{"redis.RingOptions", o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout}, true
	}
	return options{}, false
}

// given returns the timeout a user gave that go-redis's defaults turned
// into d, as far as deadlines go: -2 for -1.
func given(d time.Duration) time.Duration {
	if d == -1 {
		return -2
	}
	return d
}

// Validate implements [driver.Validator]: it returns the error that New
// found, naming the option to change, or nil.
func (c *Conn) Validate() error { return c.err }

// SetNX implements [driver.Conn]. As go-redis's SetNX, it sets a TTL of
// whole seconds with EX, and any other with PX.
func (c *Conn) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	var unit any = "px" // a constant, boxed without allocating, as n when small
	n := max(ttl.Milliseconds(), 1)
	if ttl%time.Second == 0 {
		unit, n = "ex", int64(ttl/time.Second)
	}
	args := []any{"set", key, value, "nx", unit, n}
	if ttl == 0 {
		args = args[:4]
	}
	return send(ctx, c, redis.NewBoolCmd(ctx, args...))
}

// Get implements [driver.Conn].
func (c *Conn) Get(ctx context.Context, key string) (string, bool, error) {
	return stringOK(send(ctx, c, redis.NewStringCmd(ctx, "get", key)))
}

// GetSet implements [driver.Conn].
func (c *Conn) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	return stringOK(send(ctx, c, redis.NewStringCmd(ctx, "getset", key, value)))
}

// Del implements [driver.Conn].
func (c *Conn) Del(ctx context.Context, key string) (bool, error) {
	n, err := send(ctx, c, redis.NewIntCmd(ctx, "del", key))
	return n > 0, err
}

// PTTL implements [driver.Conn].
func (c *Conn) PTTL(ctx context.Context, key string) (time.Duration, bool, error) {
	ms, err := send(ctx, c, redis.NewIntCmd(ctx, "pttl", key))
	if err != nil {
		return 0, false, err
	}
	ttl, ok := driver.FromPTTL(ms)
	return ttl, ok, nil
}

// EvalSha implements [driver.Conn].
func (c *Conn) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	return c.eval(ctx, "evalsha", sha1, keys, args)
}

// Eval implements [driver.Conn].
func (c *Conn) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	return c.eval(ctx, "eval", src, keys, args)
}

// eval sends the script command name (EVAL or EVALSHA, a constant that
// is boxed without allocating) with its script or SHA-1, keys and args, as
// go-redis's Eval and EvalSha do.
func (c *Conn) eval(ctx context.Context, name any, script string, keys []string, args []any) (any, error) {
	if err := c.scriptKeys(keys); err != nil {
		return nil, err
	}
	cmd := append(make([]any, 0, 3+len(keys)+len(args)), name, script, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return nilReply(send(ctx, c, redis.NewCmd(ctx, append(cmd, args...)...)))
}

// ringScript returns scriptKeys' error for a command of a pipeline that
// is a script (EVAL or EVALSHA), and nil for any other.
func (c *Conn) ringScript(args []any) error {
	if _, ring := c.c.(*redis.Ring); !ring {
		return nil
	}
	name, _ := args[0].(string)
	if len(args) < 3 || !strings.EqualFold(name, "EVALSHA") && !strings.EqualFold(name, "EVAL") {
		return nil
	}
	n, _ := args[2].(int)
	if n < 0 || 3+n > len(args) {
		return nil // the server refuses it
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i], _ = args[3+i].(string)
	}
	return c.scriptKeys(keys)
}

// scriptKeys returns c.err, or an error naming the keys when c is a
// *redis.Ring and keys hash to more than one of its shards: a Ring sends a
// script to the shard of its first key alone, where the others would be
// keys of the wrong shard, so a lock of several keys over a Ring needs one
// hash tag for all of them. (A Cluster refuses such a script with
// CROSSSLOT; the strategies send one script per slot there.)
func (c *Conn) scriptKeys(keys []string) error {
	if c.err != nil {
		return c.err
	}
	if _, ring := c.c.(*redis.Ring); !ring || len(keys) < 2 {
		return nil
	}
	first := ringHashed(keys[0])
	for _, k := range keys[1:] {
		if ringHashed(k) != first {
			return errors.New("goredis: keys of one lock need one hash tag over a *redis.Ring, which runs a script on the shard of its first key: " +
				"such as {order:42}:stock and {order:42}:payment")
		}
	}
	return nil
}

// ringHashed returns the part of key that a Ring hashes: its hash tag (the
// text between the first '{' and the next '}', when not empty), or all of
// it.
func ringHashed(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key[open+1 : open+1+n]
		}
	}
	return key
}

// Do implements [driver.Commander].
func (c *Conn) Do(ctx context.Context, args ...any) (any, error) {
	return nilReply(send(ctx, c, redis.NewCmd(ctx, args...)))
}

// Pipeline implements [driver.Pipeliner] with go-redis's Pipelined: a
// Cluster client or a Ring sends the commands of each server over a
// connection to it, side by side.
func (c *Conn) Pipeline(ctx context.Context, cmds [][]any) ([]any, error) {
	if c.err != nil {
		return nil, c.err
	}
	return await(ctx, &c.sending, func() ([]any, error) {
		replies := make([]any, len(cmds))
		var sent []*redis.Cmd
		_, _ = c.cmd.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, args := range cmds {
				if err := c.ringScript(args); err != nil {
					replies[i] = err
					continue
				}
				sent = append(sent, p.Do(ctx, args...))
			}
			return nil
		})
		for i := range replies {
			if replies[i] != nil {
				continue
			}
			v, err := nilReply(sent[0].Result())
			if replies[i], sent = v, sent[1:]; err != nil {
				replies[i] = err
			}
		}
		return replies, nil
	})
}

// Pinnable implements [driver.Pinner]: a *redis.Client (standalone or
// failover), a *redis.ClusterClient and a *redis.Ring can pin; another
// implementation of UniversalClient cannot, since a Conn cannot tell which
// of its servers holds a key.
func (c *Conn) Pinnable() error {
	if c.err != nil {
		return c.err
	}
	switch c.c.(type) {
	case *redis.Client, *redis.ClusterClient, *redis.Ring:
		return nil
	}
	return fmt.Errorf("goredis: a %T does not say which of its servers holds a key, so it cannot send commands over one connection to that server: "+
		"only a *redis.Client (standalone or failover), a *redis.ClusterClient or a *redis.Ring can", c.c)
}

// Pin implements [driver.Pinner] with go-redis's Client.Conn: f's Conn
// sends its commands over one connection of the pool of the client that
// serves key: a *redis.Client's own, the master of key's slot on a Cluster
// (ClusterClient.MasterForKey, which loads the Cluster's slots within ctx
// when it has not yet), or key's shard on a Ring
// (Ring.GetShardClientForKey). The connection is taken from the pool, within
// the ctx of f's first command. When f returns, a goroutine gives it back
// to the pool once the commands that f's Conn stopped waiting for (see
// await) have ended: go-redis must not close a connection that a command
// is still using.
func (c *Conn) Pin(ctx context.Context, key string, f func(driver.Conn) error) error {
	if err := c.Pinnable(); err != nil {
		return err
	}
	var node *redis.Client
	var err error
	switch cl := c.c.(type) {
	case *redis.Client:
		node = cl
	case *redis.ClusterClient:
		node, err = await(ctx, &c.sending, func() (*redis.Client, error) { return cl.MasterForKey(ctx, key) })
	case *redis.Ring:
		node, err = cl.GetShardClientForKey(key)
	}
	if err != nil {
		return err
	}
	one := node.Conn()
	pinned := &Conn{c: c.c, cmd: one}
	defer func() {
		go func() {
			pinned.sending.Wait()
			_ = one.Close()
		}()
	}()
	return f(pinned)
}

// Addr implements [driver.Addresser]. It is empty for a failover client,
// whose master moves, for another implementation of UniversalClient, and
// for a client New refused.
func (c *Conn) Addr() string {
	if c.err != nil {
		return ""
	}
	switch cl := c.c.(type) {
	case *redis.Client:
		if addr := cl.Options().Addr; addr != "FailoverClient" {
			return addr
		}
	case *redis.ClusterClient:
		return strings.Join(cl.Options().Addrs, ",")
	case *redis.Ring:
		addrs := slices.Sorted(maps.Values(cl.Options().Addrs))
		return strings.Join(addrs, ",")
	}
	return ""
}

// await returns send's reply, or ctx's error if ctx is cancelled first; it
// sends nothing if ctx has ended already.
//
// go-redis turns a context's deadline into the socket's, but does not
// watch its cancellation: a cancelled command without a deadline would
// wait for the reply, up to ReadTimeout, or for ever with -1. So such a
// command is sent from a goroutine of its own, counted in sending, which
// goes on after await returned, bounded as go-redis bounds it; its reply
// is dropped, and its connection goes back to the pool only once go-redis
// read the reply (or closed it), so no later command reads it. A command
// that landed then is the caller's to clean up, as after a deadline. A
// command with a deadline is sent from the caller's goroutine and returns
// by the deadline, so the strategies, whose calls to each node have
// deadlines, start no goroutine per command (BenchmarkAwait measures one).
func await[T any](ctx context.Context, sending *sync.WaitGroup, send func() (T, error)) (T, error) {
	if direct(ctx) {
		return send()
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type reply struct {
		v   T
		err error
	}
	replies := make(chan reply, 1)
	sending.Add(1)
	go func() {
		defer sending.Done()
		v, err := send()
		replies <- reply{v, err}
	}()
	select {
	case r := <-replies:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-replies: // both at once: the reply is the truth
			return r.v, r.err
		default:
			return zero, ctx.Err()
		}
	}
}

// direct reports whether await sends a command from the caller's
// goroutine.
func direct(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok || ctx.Done() == nil
}

// send sends cmd, built as go-redis's method of its name builds it, as
// await does, or returns c.err. Sent from the caller's goroutine, it
// costs no closure.
func send[T any](ctx context.Context, c *Conn, cmd interface {
	redis.Cmder
	Result() (T, error)
}) (T, error) {
	switch {
	case c.err != nil:
		var zero T
		return zero, c.err
	case direct(ctx):
		_ = c.cmd.Process(ctx, cmd) // its error is cmd's
		return cmd.Result()
	}
	return await(ctx, &c.sending, func() (T, error) {
		_ = c.cmd.Process(ctx, cmd)
		return cmd.Result()
	})
}

// stringOK returns a string reply as Conn returns it: go-redis's nil reply
// (redis.Nil) is a missing key, ok false, and no error.
func stringOK(s string, err error) (string, bool, error) {
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return s, err == nil, err
}

// nilReply returns a script's reply as Conn returns it: go-redis's nil
// reply (redis.Nil) is (nil, nil).
func nilReply(v any, err error) (any, error) {
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}
