package config

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	redigolib "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy/redlock"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
	"github.com/locksmith-go/lock/strategy/single"
)

// formats are the names of setnx-getset's formats.
var formats = map[string]setnxgetset.Format{
	"seconds": setnxgetset.Seconds, "s": setnxgetset.Seconds,
	"milliseconds": setnxgetset.Milliseconds, "ms": setnxgetset.Milliseconds,
	"float-seconds": setnxgetset.FloatSeconds, "float": setnxgetset.FloatSeconds,
}

// waits are the names of the ways to wait: the options each adds to a
// Locker's defaults.
var waits = map[string][]lock.Option{"notify": nil, "poll": {lock.WithPolling()}}

// otelKeys are the names of lockotel's key policies.
var otelKeys = map[string]lockotel.KeyPolicy{
	"omitted": lockotel.KeysOmitted, "hashed": lockotel.KeysHashed, "raw": lockotel.KeysRaw,
}

func init() {
	RegisterStrategy("single", Strategy{
		Check: oneServer("single"),
		New: func(c Config, open func(string) (driver.Conn, error)) (lock.Locker, error) {
			conn, err := open(c.Addrs[0])
			if err != nil {
				return nil, err
			}
			return single.New(conn, single.WithReplicas(c.Replicas, cmp.Or(c.ReplicaTimeout, defaultReplicaTimeout)))
		},
	})
	RegisterStrategy("setnx-getset", Strategy{
		Check: func(c Config) error {
			if c.SafetyTTL != 0 && c.SafetyTTL < c.ClockSkew {
				return invalid("safety_ttl", fmt.Errorf("must cover clock_skew: %v is less than %v", c.SafetyTTL, c.ClockSkew))
			}
			return oneServer("setnx-getset")(c)
		},
		New: func(c Config, open func(string) (driver.Conn, error)) (lock.Locker, error) {
			conn, err := open(c.Addrs[0])
			if err != nil {
				return nil, err
			}
			opts := []setnxgetset.Option{setnxgetset.WithSafetyTTL(c.SafetyTTL), setnxgetset.WithClockSkew(c.ClockSkew)}
			if c.TimestampFormat != "" {
				opts = append(opts, setnxgetset.WithFormat(formats[c.TimestampFormat]))
			}
			return setnxgetset.New(conn, opts...)
		},
	})
	RegisterStrategy("redlock", Strategy{
		Check: checkRedlock,
		New: func(c Config, open func(string) (driver.Conn, error)) (lock.Locker, error) {
			nodes := make([]driver.Conn, len(c.Addrs))
			for i, addr := range c.Addrs {
				var err error
				if nodes[i], err = open(addr); err != nil {
					return nil, err
				}
			}
			opts := []redlock.Option{redlock.WithNodeTimeout(c.NodeTimeout), redlock.WithRestartGuard(c.RestartGuard)}
			if c.Quorum != 0 {
				opts = append(opts, redlock.WithQuorum(c.Quorum))
			}
			if c.DriftFactor != 0 {
				opts = append(opts, redlock.WithDriftFactor(c.DriftFactor))
			}
			if c.MaxExtensions != 0 {
				opts = append(opts, redlock.WithMaxExtensions(c.MaxExtensions))
			}
			return redlock.New(nodes, opts...)
		},
	})
	RegisterDriver("goredis", Driver{Open: openGoRedis})
	RegisterDriver("redigo", Driver{Open: openRedigo})
}

func oneServer(name string) func(Config) error {
	return func(c Config) error {
		if n := len(c.Addrs); n != 1 {
			return invalid("addrs", fmt.Errorf("%s locks on one server, got %d: list several only for redlock", name, n))
		}
		return nil
	}
}

func checkRedlock(c Config) error {
	if err := checkQuorum(c); err != nil {
		return err
	}
	switch ttl := c.ttl(); {
	case c.NodeTimeout >= ttl:
		return invalid("node_timeout", fmt.Errorf("must be less than ttl: %v is not less than %v", c.NodeTimeout, ttl))
	case c.RestartGuard != 0 && c.RestartGuard < ttl:
		return invalid("restart_guard", fmt.Errorf("must be at least ttl, the largest TTL in use: %v is less than %v", c.RestartGuard, ttl))
	}
	return nil
}

// checkQuorum asks redlock, which has the rule, whether c.Quorum suits the
// nodes, before any is opened: redlock.NewStrategy checks its options and
// contacts no node (the first Obtain does), so unopened nodes stand in for
// them. Its error names the setting, "quorum".
func checkQuorum(c Config) error {
	if c.Quorum == 0 || len(c.Addrs) == 0 {
		return nil
	}
	nodes := make([]driver.Conn, len(c.Addrs))
	for i := range nodes {
		nodes[i] = unopened{i: i}
	}
	_, err := redlock.NewStrategy(nodes, redlock.WithQuorum(c.Quorum))
	return err
}

// unopened stands for node i, not opened: a Conn that redlock.NewStrategy
// counts and never calls.
type unopened struct {
	driver.Conn
	i int
}

// openGoRedis opens a go-redis client that neither retries commands nor
// re-dials, so that the lock's own retry policy and clean-up own every
// retry, and that honours each context's deadline.
func openGoRedis(e Endpoint) (driver.Conn, io.Closer, error) {
	c := e.Config
	client := redis.NewClient(&redis.Options{
		Addr: e.Addr, DB: c.DB, Username: c.Username, Password: c.Password, TLSConfig: e.TLS,
		DialTimeout: c.DialTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
		PoolSize: c.PoolSize, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
	})
	return goredis.New(client), client, nil
}

// openRedigo opens a redigo pool of at most PoolSize connections, whose
// callers wait (within their context) for a free one.
func openRedigo(e Endpoint) (driver.Conn, io.Closer, error) {
	c := e.Config
	opts := []redigolib.DialOption{
		redigolib.DialConnectTimeout(c.DialTimeout), redigolib.DialReadTimeout(c.ReadTimeout),
		redigolib.DialWriteTimeout(c.WriteTimeout), redigolib.DialDatabase(c.DB),
		redigolib.DialUsername(c.Username), redigolib.DialPassword(c.Password),
	}
	if e.TLS != nil {
		opts = append(opts, redigolib.DialUseTLS(true), redigolib.DialTLSConfig(e.TLS))
	}
	pool := &redigolib.Pool{
		MaxIdle: c.PoolSize, MaxActive: c.PoolSize, Wait: true,
		DialContext: func(ctx context.Context) (redigolib.Conn, error) {
			return redigolib.DialContext(ctx, "tcp", e.Addr, opts...)
		},
		// A connection idle for a while may have been dropped (a server
		// restart, an idle timeout): check it before use, within ctx.
		TestOnBorrowContext: func(ctx context.Context, conn redigolib.Conn, since time.Time) error {
			if time.Since(since) < time.Minute {
				return nil
			}
			_, err := redigolib.DoContext(conn, ctx, "PING")
			return err
		},
	}
	return redigo.New(pool, redigo.WithAddr(e.Addr)), pool, nil
}
