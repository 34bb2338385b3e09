package config

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
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

// otelKeys are the names of lockotel's key policies, which
// config/otelconfig maps to them.
var otelKeys = map[string]bool{"omitted": true, "hashed": true, "raw": true}

func init() {
	RegisterStrategy("single", Strategy{
		New: func(c Config, conns []driver.Conn) (*lock.Locker, error) {
			opts := []single.Option{single.WithReplicas(c.Replicas, cmp.Or(c.ReplicaTimeout, defaultReplicaTimeout))}
			switch c.FenceTTL {
			case 0: // the default
			case FenceForever:
				opts = append(opts, single.WithFenceTTL(0))
			default:
				opts = append(opts, single.WithFenceTTL(c.FenceTTL))
			}
			return single.New(conns[0], opts...)
		},
	})
	RegisterStrategy("setnx-getset", Strategy{
		Check: func(c Config) error {
			if c.SafetyTTL != 0 && c.SafetyTTL < c.ClockSkew {
				return invalid("safety_ttl", fmt.Errorf("must cover clock_skew: %v is less than %v", c.SafetyTTL, c.ClockSkew))
			}
			return nil
		},
		New: func(c Config, conns []driver.Conn) (*lock.Locker, error) {
			opts := []setnxgetset.Option{setnxgetset.WithSafetyTTL(c.SafetyTTL), setnxgetset.WithClockSkew(c.ClockSkew)}
			if c.TimestampFormat != "" {
				opts = append(opts, setnxgetset.WithFormat(formats[c.TimestampFormat]))
			}
			return setnxgetset.New(conns[0], opts...)
		},
	})
	RegisterStrategy("redlock", Strategy{
		Nodes: true,
		Check: checkRedlock,
		New: func(c Config, nodes []driver.Conn) (*lock.Locker, error) {
			opts := []redlock.Option{redlock.WithNodeTimeout(c.NodeTimeout), redlock.WithRestartGuard(c.RestartGuard)}
			if c.Quorum != 0 {
				opts = append(opts, redlock.WithQuorum(c.Quorum))
			}
			if c.DriftFactor != 0 {
				opts = append(opts, redlock.WithDriftFactor(c.DriftFactor))
			}
			l, err := redlock.New(nodes, opts...)
			if err == nil && c.MaxExtensions != 0 {
				l = l.With(lock.WithMaxRefreshes(c.MaxExtensions))
			}
			return l, err
		},
	})
	RegisterDriver("goredis", Driver{Open: openGoRedis, Topologies: []string{sentinel, cluster}})
}

// checkRedlock checks redlock's settings. Of node counts, it refuses two,
// without an explicit quorum: both must grant every lock, so that the loss
// of either stops them all, which is worse than one node (as safe, and
// with one server to fail) and than three (which survive the loss of one).
// One node is allowed, for tests and as the first step of a move to
// redlock; two, with quorum=2, for a deployment that is adding its third.
func checkRedlock(c Config) error {
	if err := checkQuorum(c); err != nil {
		return err
	}
	switch ttl := c.ttl(); {
	case c.NodeTimeout >= ttl:
		return invalid("node_timeout", fmt.Errorf("must be less than ttl: %v is not less than %v", c.NodeTimeout, ttl))
	case c.RestartGuard != 0 && c.RestartGuard < ttl:
		return invalid("restart_guard", fmt.Errorf("must be at least ttl, the largest TTL in use: %v is less than %v", c.RestartGuard, ttl))
	case c.RestartGuard != 0 && c.WithoutScripts:
		return invalid("restart_guard", fmt.Errorf("cannot be used with without_scripts: the guarded acquisition is a script"))
	}
	for i, e := range c.endpoints() {
		if c.RestartGuard != 0 && e.Topology == cluster {
			return invalid("restart_guard", fmt.Errorf("needs nodes that are servers or Sentinel deployments: node %d is a Redis Cluster, where its script's two keys lie in different slots", i+1))
		}
	}
	if len(c.endpoints()) == 2 && c.Quorum == 0 {
		where := "addrs"
		if len(c.Nodes) > 0 {
			where = "nodes"
		}
		return invalid(where, errors.New("lists 2 redlock nodes, whose quorum of 2 needs both for every lock: the loss of either stops them all; "+
			"list 3 or more (3 survive the loss of one), or set quorum=2 to run on 2 all the same"))
	}
	return nil
}

// checkQuorum asks redlock, which has the rule, whether c.Quorum suits the
// nodes, before any is opened: redlock.New checks its options and
// contacts no node (the first Obtain does), so unopened nodes stand in for
// them. Its error names the setting, "quorum".
func checkQuorum(c Config) error {
	n := len(c.endpoints())
	if c.Quorum == 0 || n == 0 {
		return nil
	}
	nodes := make([]driver.Conn, n)
	for i := range nodes {
		nodes[i] = unopened{i: i}
	}
	_, err := redlock.New(nodes, redlock.WithQuorum(c.Quorum))
	return err
}

// unopened stands for node i, not opened: a Conn that redlock.New
// counts and never calls.
type unopened struct {
	driver.Conn
	i int
}

// openGoRedis opens a go-redis client that neither retries commands nor
// re-dials, so that the lock's own retry policy and clean-up own every
// retry, and that honours each context's deadline: a Client, a failover
// Client that asks the Sentinels for the master, or a ClusterClient. Over
// TLS it dials with Endpoint.Dial.
func openGoRedis(e Endpoint) (driver.Conn, io.Closer, error) {
	c := e.Config
	var dial func(ctx context.Context, network, addr string) (net.Conn, error) // go-redis's own without TLS
	if e.TLS != nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return e.Dial(ctx, &net.Dialer{Timeout: c.DialTimeout}, network, addr)
		}
	}
	switch e.Topology {
	case sentinel:
		client := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: e.MasterName, SentinelAddrs: e.Addrs, SentinelUsername: e.SentinelUsername, SentinelPassword: e.SentinelPassword,
			DB: e.DB, Username: e.Username, Password: e.Password, TLSConfig: e.TLS, Dialer: dial,
			DialTimeout: c.DialTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
			PoolSize: c.PoolSize, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		})
		return goredis.New(client), client, nil
	case cluster:
		client := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: e.Addrs, Username: e.Username, Password: e.Password, TLSConfig: e.TLS, Dialer: dial,
			DialTimeout: c.DialTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
			PoolSize: c.PoolSize, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		})
		return goredis.New(client), client, nil
	}
	client := redis.NewClient(&redis.Options{
		Network: e.Network, Addr: e.Addrs[0], DB: e.DB, Username: e.Username, Password: e.Password, TLSConfig: e.TLS, Dialer: dial,
		DialTimeout: c.DialTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
		PoolSize: c.PoolSize, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
	})
	return goredis.New(client), client, nil
}
