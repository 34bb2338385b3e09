// Package redigoconfig registers the redigo driver with package config, so
// that a configuration may say driver=redigo. Import it for its side
// effect, as database/sql's drivers are:
//
//	import _ "github.com/locksmith-go/lock/config/redigoconfig"
//
// A program that does not compiles none of redigo. The driver opens
// standalone servers, over TCP, TLS or a Unix socket; a Sentinel or Cluster
// deployment needs the goredis (or the rueidis) driver, and config says so.
package redigoconfig

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/redigo"
)

func init() { config.RegisterDriver("redigo", config.Driver{Open: open}) }

// open opens a redigo pool of at most PoolSize connections, whose callers
// wait (within their context) for a free one.
func open(e config.Endpoint) (driver.Conn, io.Closer, error) {
	c := e.Config
	opts := []redis.DialOption{
		redis.DialConnectTimeout(c.DialTimeout), redis.DialReadTimeout(c.ReadTimeout),
		redis.DialWriteTimeout(c.WriteTimeout), redis.DialDatabase(e.DB),
		redis.DialUsername(e.Username), redis.DialPassword(e.Password),
	}
	if e.TLS != nil { // the handshake within ctx, where redigo's own ignores it
		opts = append(opts, redis.DialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			return e.Dial(ctx, &net.Dialer{Timeout: c.DialTimeout}, network, addr)
		}))
	}
	addr := e.Addrs[0]
	pool := &redis.Pool{
		MaxIdle: c.PoolSize, MaxActive: c.PoolSize, Wait: true,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, e.Network, addr, opts...)
		},
		// A connection idle for a while may have been dropped (a server
		// restart, an idle timeout): check it before use, within ctx.
		TestOnBorrowContext: func(ctx context.Context, conn redis.Conn, since time.Time) error {
			if time.Since(since) < time.Minute {
				return nil
			}
			_, err := redis.DoContext(conn, ctx, "PING")
			return err
		},
	}
	return redigo.New(pool, redigo.WithAddr(addr)), pool, nil
}
