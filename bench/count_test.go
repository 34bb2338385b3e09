package bench

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// Counting the commands that clients send (INFO commandstats would also
// count the commands that scripts run inside the server). Connection
// handshakes are left out: they depend on how many connections a pool
// opens, not on the lock.

// handshake reports whether cmd sets a connection up rather than working
// on a lock.
func handshake(cmd string) bool {
	switch strings.ToUpper(cmd) {
	case "", "HELLO", "CLIENT", "AUTH", "SELECT", "PING":
		return true
	}
	return false
}

func count(sent *atomic.Int64, cmd string) {
	if !handshake(cmd) {
		sent.Add(1)
	}
}

// hook counts the commands a go-redis client sends.
type hook struct{ sent *atomic.Int64 }

func (hook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		count(h.sent, cmd.Name())
		return next(ctx, cmd)
	}
}

func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			count(h.sent, cmd.Name())
		}
		return next(ctx, cmds)
	}
}

// countingConn counts the commands sent on a redigo connection. It keeps
// the connection's context and timeout support, which redigo's pool needs.
type countingConn struct {
	redigoredis.Conn
	sent *atomic.Int64
}

func (c countingConn) Do(cmd string, args ...any) (any, error) {
	count(c.sent, cmd)
	return c.Conn.Do(cmd, args...)
}

func (c countingConn) Send(cmd string, args ...any) error {
	count(c.sent, cmd)
	return c.Conn.Send(cmd, args...)
}

func (c countingConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	count(c.sent, cmd)
	return redigoredis.DoContext(c.Conn, ctx, cmd, args...)
}

func (c countingConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	count(c.sent, cmd)
	return redigoredis.DoWithTimeout(c.Conn, d, cmd, args...)
}

func (c countingConn) ReceiveContext(ctx context.Context) (any, error) {
	return redigoredis.ReceiveContext(c.Conn, ctx)
}

func (c countingConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redigoredis.ReceiveWithTimeout(c.Conn, d)
}
