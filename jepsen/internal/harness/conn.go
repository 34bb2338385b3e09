package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
)

// Drivers are the drivers that the runs go over: a difference between
// them is a bug.
var Drivers = []string{"goredis", "redigo", "rueidis"}

// A DialFunc dials a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// timeout is the dial, read and write timeout of the runs' connections:
// short, so that a fault shows as no answer soon.
const timeout = 200 * time.Millisecond

// NewConn returns a locksmith driver of the server at addr over drv (one
// of Drivers), whose connections dial, and what closes it.
func NewConn(drv string, dial DialFunc, addr string) (driver.Conn, io.Closer, error) {
	switch drv {
	case "goredis":
		c := redis.NewClient(&redis.Options{
			Addr: addr, Dialer: dial, MaxRetries: -1, ContextTimeoutEnabled: true,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		})
		return goredis.New(c), c, nil
	case "redigo":
		p := &redigoredis.Pool{MaxIdle: 16, DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
			return redigoredis.DialContext(ctx, "tcp", addr, redigoredis.DialContextFunc(dial),
				redigoredis.DialConnectTimeout(timeout), redigoredis.DialReadTimeout(timeout), redigoredis.DialWriteTimeout(timeout))
		}}
		return redigo.New(p), p, nil
	case "rueidis":
		c, cl, err := rueidisConn(rueidis.ClientOption{InitAddress: []string{addr}}, dial)
		if err != nil {
			return nil, nil, fmt.Errorf("jepsen: rueidis client of %s: %w", addr, err)
		}
		return c, cl, nil
	}
	return nil, nil, fmt.Errorf("jepsen: no driver %q, want one of %q", drv, Drivers)
}

// rueidisConn opens a rueidis client of o, with the timeouts of the runs'
// connections and no client-side cache, whose connections dial, each
// within the timeout of the Dialer that rueidis passes (a server's, or the
// Sentinels'); and what closes it.
func rueidisConn(o rueidis.ClientOption, dial DialFunc) (driver.Conn, io.Closer, error) {
	o.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		if d.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d.Timeout)
			defer cancel()
		}
		return dial(ctx, "tcp", dst)
	}
	o.Dialer, o.ConnWriteTimeout, o.DisableCache = net.Dialer{Timeout: timeout}, timeout, true
	c, err := rueidisdriver.NewClient(o)
	if err != nil {
		return nil, nil, err
	}
	return rueidisdriver.New(c), closer(c.Close), nil
}

// closer is a func() that is an io.Closer.
type closer func()

func (c closer) Close() error { c(); return nil }
