package bench

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
)

// Counting the commands that clients send (INFO commandstats would also
// count the commands that scripts run inside the server). Connection
// handshakes are left out: they depend on how many connections a pool
// opens, not on the lock.

// counters is what the contention benchmark counts across the clients of
// its contenders: the commands they send, and why locksmith's waiters woke
// (lock.Hooks Wait).
type counters struct {
	sent   atomic.Int64
	wakes  [len(wakeReasons)]atomic.Int64 // by wakeReasons
	missed atomic.Int64                   // lost notifications
}

// wakeReasons are the reasons of a "woken" event of lock.Hooks Wait.
var wakeReasons = [...]string{"message", "subscribed", "resubscribed", "timer"}

// hooks returns the hooks that count cs's wake-ups.
func (cs *counters) hooks() *lock.Hooks {
	return &lock.Hooks{Wait: func(_ context.Context, e lock.Event) {
		switch e.Op {
		case "woken":
			if i := slices.Index(wakeReasons[:], e.Reason); i >= 0 {
				cs.wakes[i].Add(1)
			}
		case "missed":
			cs.missed.Add(1)
		}
	}}
}

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

// tripHook counts a go-redis client's round trips: a command, or a
// pipeline of several, but for handshakes.
type tripHook struct{ trips *atomic.Int64 }

func (tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd.Name()) {
			h.trips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake(cmds[0].Name()) {
			h.trips.Add(1)
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

// subscriberCounter counts the SUBSCRIBE and UNSUBSCRIBE commands of a
// go-redis driver's subscriber sessions, which go-redis sends past its
// hooks. (A redigo driver's sessions, if it has them, send theirs through
// a pool connection, which countingConn counts.)
type subscriberCounter struct {
	driver.Conn
	sub  driver.Subscriber
	sent *atomic.Int64
}

// countSubscriptions returns c, counting its subscriptions into sent if it
// can subscribe.
func countSubscriptions(c driver.Conn, sent *atomic.Int64) driver.Conn {
	sub, ok := c.(driver.Subscriber)
	if !ok {
		return c
	}
	return &subscriberCounter{Conn: c, sub: sub, sent: sent}
}

// Addr keeps the address of the wrapped driver, by which Redlock tells its
// nodes apart.
func (c *subscriberCounter) Addr() string { return driver.Addr(c.Conn) }

func (c *subscriberCounter) Sharded() bool { return c.sub.Sharded() }

func (c *subscriberCounter) Listen(ctx context.Context, on func(driver.Event)) (driver.Session, error) {
	s, err := c.sub.Listen(ctx, on)
	if err != nil {
		return nil, err
	}
	return countingSession{s, c.sent}, nil
}

type countingSession struct {
	driver.Session
	sent *atomic.Int64
}

func (s countingSession) Subscribe(ctx context.Context, channels ...string) error {
	s.sent.Add(1)
	return s.Session.Subscribe(ctx, channels...)
}

func (s countingSession) Unsubscribe(ctx context.Context, channels ...string) error {
	s.sent.Add(1)
	return s.Session.Unsubscribe(ctx, channels...)
}
