package redistest

import (
	"cmp"
	"context"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
)

// Driver is one way of talking to a server: a client library, and for
// go-redis a protocol version.
type Driver struct {
	Name string
	// Conn opens a client of addr, closed when t ends.
	Conn func(t testing.TB, addr string) driver.Conn
}

// Drivers returns every driver the strategies must run over: go-redis with
// RESP2 and with RESP3 (its default, where Lua's false comes back as nil),
// redigo, and rueidis (RESP3, one pipeline).
func Drivers() []Driver {
	return []Driver{
		{"goredis-resp2", goRedisDriver("tcp", 2)},
		{"goredis-resp3", goRedisDriver("tcp", 3)},
		{"redigo", redigoDriver("tcp")},
		{"rueidis", func(t testing.TB, addr string) driver.Conn { return rueidisdriver.New(Rueidis(t, addr)) }},
	}
}

// UnixDrivers returns go-redis (RESP3) and redigo over a Unix socket: their
// Conn takes the socket's path, such as a [Server]'s Socket, for addr.
func UnixDrivers() []Driver {
	return []Driver{
		{"goredis-resp3", goRedisDriver("unix", 3)},
		{"redigo", redigoDriver("unix")},
	}
}

// InteropDrivers returns go-redis (RESP3) and redigo, named "goredis" and
// "redigo", for the tests of interoperability with other libraries.
func InteropDrivers() []Driver {
	return []Driver{
		{"goredis", func(t testing.TB, addr string) driver.Conn { return goredis.New(GoRedis(t, addr, 3)) }},
		{"redigo", func(t testing.TB, addr string) driver.Conn { return redigo.New(Redigo(t, addr)) }},
	}
}

func goRedisDriver(network string, protocol int) func(testing.TB, string) driver.Conn {
	return func(t testing.TB, addr string) driver.Conn { return goredis.New(goRedis(t, network, addr, protocol)) }
}

func redigoDriver(network string) func(testing.TB, string) driver.Conn {
	return func(t testing.TB, addr string) driver.Conn {
		return redigo.New(redigoPool(t, network, addr), redigo.WithAddr(addr))
	}
}

// dialTimeout bounds the test clients' dials, at go-redis's default: a dead
// loopback server refuses at once, and a slow dial is a busy machine's
// (ExactlyOneWinner dials 32 clients at once).
const dialTimeout = 5 * time.Second

// GoRedis returns a go-redis client of addr speaking RESP protocol, closed
// when t ends. It neither retries commands nor dials, so a dead server is
// refused at once.
func GoRedis(t testing.TB, addr string, protocol int) *redis.Client {
	return goRedis(t, "tcp", addr, protocol)
}

// goRedis is GoRedis over network: "tcp", or "unix" with addr a path.
func goRedis(t testing.TB, network, addr string, protocol int) *redis.Client {
	c := redis.NewClient(&redis.Options{Network: network, Addr: addr, Protocol: protocol, DialTimeout: dialTimeout, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// GoRedisCluster returns a go-redis cluster client of addrs, closed when t
// ends.
func GoRedisCluster(t testing.TB, addrs []string) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: dialTimeout, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// GoRedisRing returns a go-redis Ring of two shards, "a" and "b", the
// servers at a and b, closed when t ends.
func GoRedisRing(t testing.TB, a, b string) *redis.Ring {
	c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a, "b": b}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Redigo returns a redigo pool of addr, closed when t ends.
func Redigo(t testing.TB, addr string) *redigoredis.Pool { return redigoPool(t, "tcp", addr) }

// redigoPool is Redigo over network: "tcp", or "unix" with addr a path.
func redigoPool(t testing.TB, network, addr string) *redigoredis.Pool {
	p := &redigoredis.Pool{
		MaxIdle: 16,
		DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
			return redigoredis.DialContext(ctx, network, addr, redigoredis.DialConnectTimeout(dialTimeout))
		},
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Rueidis returns a rueidis client of the standalone server at addr,
// closed when t ends. It neither retries commands nor refuses a server
// that is down (it dials again on each command).
func Rueidis(t testing.TB, addr string) rueidis.Client {
	return RueidisClient(t, rueidis.ClientOption{InitAddress: []string{addr}})
}

// RueidisCluster returns a rueidis client of the Cluster of addrs, as
// RueidisClient's, with driver/rueidis.NewClusterClient.
func RueidisCluster(t testing.TB, addrs []string) rueidis.Client {
	return rueidisClient(t, rueidisdriver.NewClusterClient, rueidis.ClientOption{InitAddress: addrs})
}

// RueidisClient returns a rueidis client with o (a standalone server, or
// o.Sentinel's master), opened with driver/rueidis.NewClient, with no
// client-side cache and, unless o sets one, dialTimeout; closed when t
// ends, and returned even when its server is down.
func RueidisClient(t testing.TB, o rueidis.ClientOption) rueidis.Client {
	return rueidisClient(t, rueidisdriver.NewClient, o)
}

// rueidisClient opens a client with o and the tests' settings with open.
func rueidisClient(t testing.TB, open func(rueidis.ClientOption) (rueidis.Client, error), o rueidis.ClientOption) rueidis.Client {
	o.DisableCache = true
	o.Dialer.Timeout = cmp.Or(o.Dialer.Timeout, dialTimeout)
	c, err := open(o)
	if err != nil {
		t.Fatalf("opening a rueidis client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// ClosedAddr returns a loopback address where nothing listens.
func ClosedAddr(t testing.TB) string {
	port, err := freePort()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// ClosedAddrs returns n distinct addresses where no server listens: a
// multi-node strategy refuses a node listed twice, and the free ports the
// system hands out one after another can repeat.
func ClosedAddrs(t testing.TB, n int) []string {
	addrs := make([]string, 0, n)
	for len(addrs) < n {
		if a := ClosedAddr(t); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// ClosedSocket returns the path of a Unix socket where no server listens.
func ClosedSocket(t testing.TB) string { return filepath.Join(t.TempDir(), "closed.sock") }

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() {
	// The unreachable-server tests make go-redis log every failed dial.
	redis.SetLogger(quiet{})
}
