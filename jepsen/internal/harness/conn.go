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
		c, err := rueidisdriver.NewClient(rueidis.ClientOption{
			InitAddress: []string{addr},
			DialCtxFn: func(ctx context.Context, dst string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
				return dial(ctx, "tcp", dst)
			},
			Dialer:           net.Dialer{Timeout: timeout},
			ConnWriteTimeout: timeout,
			DisableCache:     true,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("jepsen: rueidis client of %s: %w", addr, err)
		}
		return rueidisdriver.New(c), closer(c.Close), nil
	}
	return nil, nil, fmt.Errorf("jepsen: no driver %q, want one of %q", drv, Drivers)
}

// closer is a func() that is an io.Closer.
type closer func()

func (c closer) Close() error { c(); return nil }
