// Package goredis adapts a go-redis v9 client to [driver.Conn].
//
// It accepts any [redis.UniversalClient]: *redis.Client, *redis.ClusterClient,
// a failover (Sentinel) client and *redis.Ring, with RESP2 or RESP3.
//
// Set ContextTimeoutEnabled in the client's options. Without it go-redis
// bounds a command by its ReadTimeout (3s by default) rather than by the
// context's deadline, so a stalled server holds a lock call for that long.
package goredis

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver"
)

// Conn is a [driver.Conn] over a go-redis client.
type Conn struct {
	c redis.UniversalClient
}

var (
	_ driver.Conn      = (*Conn)(nil)
	_ driver.Addresser = (*Conn)(nil)
)

// New returns a Conn that sends commands through c. It returns nil if c is
// nil, which strategy constructors reject with a clear error.
func New(c redis.UniversalClient) *Conn {
	if c == nil {
		return nil
	}
	return &Conn{c: c}
}

// Client returns the underlying go-redis client.
func (c *Conn) Client() redis.UniversalClient { return c.c }

// SetNX implements [driver.Conn].
func (c *Conn) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return c.c.SetNX(ctx, key, value, ttl).Result()
}

// Get implements [driver.Conn].
func (c *Conn) Get(ctx context.Context, key string) (string, bool, error) {
	return stringOK(c.c.Get(ctx, key).Result())
}

// GetSet implements [driver.Conn].
func (c *Conn) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	return stringOK(c.c.GetSet(ctx, key, value).Result())
}

// Del implements [driver.Conn].
func (c *Conn) Del(ctx context.Context, key string) (bool, error) {
	n, err := c.c.Del(ctx, key).Result()
	return n > 0, err
}

// PTTL implements [driver.Conn].
func (c *Conn) PTTL(ctx context.Context, key string) (time.Duration, bool, error) {
	d, err := c.c.PTTL(ctx, key).Result()
	if err != nil {
		return 0, false, err
	}
	if d > 0 { // go-redis scales a TTL to a Duration, but passes -1 and -2 through
		d /= time.Millisecond
	}
	ttl, ok := driver.FromPTTL(int64(d))
	return ttl, ok, nil
}

// EvalSha implements [driver.Conn].
func (c *Conn) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	return nilReply(c.c.EvalSha(ctx, sha1, keys, args...).Result())
}

// Eval implements [driver.Conn].
func (c *Conn) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	return nilReply(c.c.Eval(ctx, src, keys, args...).Result())
}

// Addr implements [driver.Addresser]. It is empty for a failover client,
// whose master moves.
func (c *Conn) Addr() string {
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

func stringOK(s string, err error) (string, bool, error) {
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return s, err == nil, err
}

func nilReply(v any, err error) (any, error) {
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}
