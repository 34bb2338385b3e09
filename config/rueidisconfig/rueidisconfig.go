// Package rueidisconfig registers the rueidis driver with package config,
// so that a configuration may say driver=rueidis. Import it for its side
// effect, as database/sql's drivers are:
//
//	import _ "github.com/locksmith-go/lock/config/rueidisconfig"
//
// A program that does not compiles none of rueidis. The driver opens
// standalone servers (over TCP, TLS or a Unix socket), Sentinel-managed
// masters and Clusters, with driver/rueidis's NewClient and
// NewClusterClient: the client retries no command, so that the lock's
// retry policy owns every retry, and always pipelines each server's
// commands over one connection. It keeps no client-side cache, and its
// connections are sized for lock commands: 32 KiB buffers and 256 commands
// in flight per server. read_timeout is rueidis's ConnWriteTimeout, which
// bounds each write, the wait for each answer and the keep-alive PING;
// pool_size is its BlockingPoolSize, the connections of Pin and of
// subscriber sessions; write_timeout is not used. A context's deadline
// bounds every command too.
//
// rueidis connects when the client is opened: a Sentinel or Cluster
// deployment that cannot be reached fails Open, while a standalone server
// that is down fails the first lock call, as with the other drivers.
package rueidisconfig

import (
	"context"
	"crypto/tls"
	"io"
	"net"

	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/driver"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
)

func init() {
	config.RegisterDriver("rueidis", config.Driver{Open: open, Topologies: []string{"sentinel", "cluster"}})
}

// open opens a rueidis client of e, as the package doc says. Its
// connections are sized for lock commands, which are a few hundred
// bytes: 32 KiB read and write buffers (rueidis's default is 512 KiB each)
// and a ring of 256 commands in flight per server (RingScaleEachConn 8;
// the default is 1024). A Redlock Locker opens a client per node, and
// rueidis allocates both at once, for every connection: with the defaults,
// a test of 32 Redlock Lockers over 5 nodes held about 200 MiB for them,
// and under the race detector on two busy cores the process stalled for
// up to 640ms at a time, past the lock calls' node timeouts. A command
// past the 256th in flight to one server waits for a free slot (see
// driver/rueidis's New for how long).
func open(e config.Endpoint) (driver.Conn, io.Closer, error) {
	c := e.Config
	o := rueidis.ClientOption{
		InitAddress: e.Addrs, SelectDB: e.DB, Username: e.Username, Password: e.Password, TLSConfig: e.TLS,
		ConnWriteTimeout: c.ReadTimeout, BlockingPoolSize: c.PoolSize, DisableCache: true,
		ReadBufferEachConn: 32 << 10, WriteBufferEachConn: 32 << 10, RingScaleEachConn: 8,
	}
	o.Dialer.Timeout = c.DialTimeout
	newClient := rueidisdriver.NewClient
	var opts []rueidisdriver.Option
	switch e.Topology {
	case "sentinel":
		o.Sentinel = rueidis.SentinelOption{
			MasterSet: e.MasterName, Username: e.SentinelUsername, Password: e.SentinelPassword, TLSConfig: e.TLS, Dialer: o.Dialer,
		}
	case "cluster":
		newClient = rueidisdriver.NewClusterClient
	default:
		opts = append(opts, rueidisdriver.WithAddr(e.Addrs[0]))
		if e.Network == "unix" {
			path := e.Addrs[0]
			o.DialCtxFn = func(ctx context.Context, _ string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
				return d.DialContext(ctx, "unix", path)
			}
		}
	}
	if e.TLS != nil {
		o.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return e.Dial(ctx, d, "tcp", addr)
		}
	}
	client, err := newClient(o)
	if err != nil {
		return nil, nil, err
	}
	return rueidisdriver.New(client, opts...), closer{client}, nil
}

// closer closes a rueidis client, whose Close returns nothing.
type closer struct{ c rueidis.Client }

// Close implements io.Closer.
func (c closer) Close() error {
	c.c.Close()
	return nil
}
