// Package matrix builds the conformance harness of every strategy over every
// driver: the one place that knows each combination's settings, for the
// strategies' own tests and for the tests of wrappers (otel, config).
package matrix

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/redlock"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
	"github.com/locksmith-go/lock/strategy/single"
)

// Combo is one strategy over one driver (or a mix), ready for the suite.
type Combo struct {
	Name    string // such as "goredis-resp3", under the strategy's name
	Harness conformance.Harness

	open, unreachable func(t testing.TB) []driver.Conn          // the connections of NewLocker and NewUnreachable
	build             func([]driver.Conn) (*lock.Locker, error) // the Locker over them
}

// Marked returns a copy of conns with those at the indexes of nodes
// (Redlock's) marked driver.WithoutScripts, or every one when none is
// given.
func Marked(conns []driver.Conn, nodes ...int) []driver.Conn {
	conns = slices.Clone(conns)
	for i := range conns {
		if len(nodes) == 0 || slices.Contains(nodes, i) {
			conns[i] = driver.WithoutScripts(conns[i])
		}
	}
	return conns
}

// WithoutScripts returns the combinations with their Lockers built over
// connections marked driver.WithoutScripts, as [Marked] marks them.
func WithoutScripts(combos []Combo, nodes ...int) []Combo {
	out := make([]Combo, len(combos))
	for i, c := range combos {
		h := combo(c.Name, c.open, c.unreachable, func(conns []driver.Conn) (*lock.Locker, error) { return c.build(Marked(conns, nodes...)) }).Harness
		c.Harness.NewLocker, c.Harness.NewUnreachable, c.Harness.NewWithNilConn = h.NewLocker, h.NewUnreachable, h.NewWithNilConn
		out[i] = c
	}
	return out
}

// Wrap returns the combination with every Locker it builds passed through
// wrap, as the otel and config tests do.
func (c Combo) Wrap(wrap func(t *testing.T, l *lock.Locker) *lock.Locker) Combo {
	newLocker, unreachable := c.Harness.NewLocker, c.Harness.NewUnreachable
	c.Harness.NewLocker = func(t *testing.T) *lock.Locker { return wrap(t, newLocker(t)) }
	if unreachable != nil {
		c.Harness.NewUnreachable = func(t *testing.T) *lock.Locker { return wrap(t, unreachable(t)) }
	}
	return c
}

// quickAcquisitions is MutualExclusion's size without LOCKSMITH_FULL=1: a
// tenth of the default, and the size of conformance's mutant runs.
const quickAcquisitions = 200

// Run runs the suite on each combination, as a subtest named after it, n
// at a time (all at once when n is 0), whatever go test's -parallel: the
// suite mostly waits on timers and on Redis, and the combinations' keys
// never meet. Unless LOCKSMITH_FULL=1, MutualExclusion, the suite's most
// costly run, makes at most quickAcquisitions.
func Run(t *testing.T, combos []Combo, n int) {
	if n <= 0 {
		n = len(combos)
	}
	var wg sync.WaitGroup
	turns := make(chan struct{}, n)
	for _, c := range combos {
		if !redistest.Full() && (c.Harness.Acquisitions == 0 || c.Harness.Acquisitions > quickAcquisitions) {
			c.Harness.Acquisitions = quickAcquisitions
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			turns <- struct{}{}
			defer func() { <-turns }()
			t.Run(c.Name, func(t *testing.T) { conformance.Run(t, c.Harness) })
		}()
	}
	wg.Wait()
}

// AtOnce is Run's n on the server that [redistest.Addr] returned: all at
// once on a real server; one by one on the embedded one, which runs in the
// test's process, under the race detector, past the suite's bounds.
func AtOnce(real bool) int {
	if real {
		return 0
	}
	return 1
}

func must(t testing.TB, l *lock.Locker, err error) *lock.Locker {
	t.Helper()
	if err != nil {
		t.Fatalf("building the locker: %v", err)
	}
	return l
}

// combo builds the combination named name over connections that open
// returns.
func combo(name string, open func(t testing.TB) []driver.Conn, unreachable func(t testing.TB) []driver.Conn, build func([]driver.Conn) (*lock.Locker, error)) Combo {
	return Combo{name, conformance.Harness{
		NewLocker:      func(t *testing.T) *lock.Locker { l, err := build(open(t)); return must(t, l, err) },
		Conns:          func(t *testing.T) []driver.Conn { return open(t) },
		NewUnreachable: func(t *testing.T) *lock.Locker { l, err := build(unreachable(t)); return must(t, l, err) },
		NewWithNilConn: func() (*lock.Locker, error) { return build([]driver.Conn{nil}) },
	}, open, unreachable, build}
}

// FromAddrs returns the combination whose lockers build makes, closing them
// when t ends, from addrs (as many closed ports for NewUnreachable), as the
// config tests do; Conns opens d's clients of addrs. The caller sets
// Harness.NewWithNilConn, which only it knows how to build.
func FromAddrs(name string, addrs []string, d redistest.Driver, build func(t *testing.T, addrs []string) *lock.Locker) Combo {
	return Combo{Name: name, Harness: conformance.Harness{
		NewLocker: func(t *testing.T) *lock.Locker { return build(t, addrs) },
		Conns: func(t *testing.T) []driver.Conn {
			conns := make([]driver.Conn, len(addrs))
			for i, a := range addrs {
				conns[i] = d.Conn(t, a)
			}
			return conns
		},
		NewUnreachable: func(t *testing.T) *lock.Locker {
			return build(t, redistest.ClosedAddrs(t, len(addrs)))
		},
	}}
}

// one opens one connection of addr with d.
func one(d redistest.Driver, addr func(t testing.TB) string) func(t testing.TB) []driver.Conn {
	return func(t testing.TB) []driver.Conn { return []driver.Conn{d.Conn(t, addr(t))} }
}

func fixed(addr string) func(testing.TB) string { return func(testing.TB) string { return addr } }

func closed(t testing.TB) string { return redistest.ClosedAddr(t) }

// Single returns single × every driver, on the server at addr.
func Single(addr string) []Combo { return singleOver(redistest.Drivers(), addr, closed) }

// SingleUnix returns single × go-redis and × redigo, on the server that
// listens on the Unix socket at path.
func SingleUnix(path string) []Combo {
	return singleOver(redistest.UnixDrivers(), path, redistest.ClosedSocket)
}

// singleOver returns single × drivers, on the server at addr; unreachable
// ones get an address from closedAddr.
func singleOver(drivers []redistest.Driver, addr string, closedAddr func(testing.TB) string) []Combo {
	var combos []Combo
	for _, d := range drivers {
		combos = append(combos, combo(d.Name, one(d, fixed(addr)), one(d, closedAddr), newSingle))
	}
	return combos
}

func newSingle(c []driver.Conn) (*lock.Locker, error) { return single.New(c[0]) }

// SingleCluster returns single × go-redis and × rueidis on the cluster of
// addrs.
func SingleCluster(addrs []string) []Combo {
	return []Combo{
		onCluster("goredis-cluster", goRedisCluster, goRedisCluster, addrs, newSingle),
		onCluster("rueidis-cluster", rueidisCluster, rueidisClosed, addrs, newSingle),
	}
}

func goRedisCluster(t testing.TB, addrs []string) driver.Conn {
	return goredis.New(redistest.GoRedisCluster(t, addrs))
}

func rueidisCluster(t testing.TB, addrs []string) driver.Conn {
	return rueidisdriver.New(redistest.RueidisCluster(t, addrs))
}

// rueidisClosed stands for a rueidis client of an unreachable cluster,
// which rueidis.NewClient refuses to open: a standalone client of the
// closed address.
func rueidisClosed(t testing.TB, addrs []string) driver.Conn {
	return rueidisdriver.New(redistest.Rueidis(t, addrs[0]))
}

// SetnxGetsetCluster returns setnx-getset in the milliseconds format with a
// safety TTL × go-redis on the cluster of addrs, with the skips and extra
// TTL of that format on one server.
func SetnxGetsetCluster(addrs []string) Combo {
	c := onCluster("goredis-cluster", goRedisCluster, goRedisCluster, addrs, func(c []driver.Conn) (*lock.Locker, error) { return setnxgetset.New(c[0], setnxgetsetMs...) })
	c.Harness.ExtraTTL, c.Harness.Skip = setnxgetsetMsExtra, SetnxGetsetSkips
	return c
}

// onCluster returns the combination, named name, whose lockers build makes
// from one cluster client of addrs that open opens, and whose unreachable
// ones from what unreachable opens of a closed address. (Redlock has none:
// its nodes must be independent masters.)
func onCluster(name string, open, unreachable func(testing.TB, []string) driver.Conn, addrs []string, build func([]driver.Conn) (*lock.Locker, error)) Combo {
	return combo(name,
		func(t testing.TB) []driver.Conn { return []driver.Conn{open(t, addrs)} },
		func(t testing.TB) []driver.Conn { return []driver.Conn{unreachable(t, []string{closed(t)})} },
		build)
}

// SetnxGetsetSkips are the contract points the legacy algorithm cannot meet.
var SetnxGetsetSkips = map[string]string{
	"TokensAreUnique":    "the value is the expiry timestamp, not a random token: locks taken in the same second or millisecond share it",
	"MetadataRoundTrips": "the value is a bare timestamp that legacy readers parse; metadata is refused with an ArgumentError",
	"CallerChosenToken":  "the value is the expiry timestamp; a chosen token is refused with an ArgumentError",
}

// setnxgetsetMs are the options of setnx-getset in the milliseconds format
// with a safety TTL, and setnxgetsetMsExtra its ExtraTTL.
var (
	setnxgetsetMs      = []setnxgetset.Option{setnxgetset.WithFormat(setnxgetset.Milliseconds), setnxgetset.WithSafetyTTL(time.Second)}
	setnxgetsetMsExtra = 2 * time.Millisecond
)

// SetnxGetset returns setnx-getset in the milliseconds format with a safety
// TTL × every driver, and in the seconds and float-seconds formats over
// go-redis, on the server at addr.
func SetnxGetset(addr string) []Combo {
	var combos []Combo
	for _, f := range []struct {
		name  string
		opts  []setnxgetset.Option
		extra time.Duration
	}{
		{"ms+safety-ttl", setnxgetsetMs, setnxgetsetMsExtra},
		{"seconds", nil, 2 * time.Second},
		{"float-seconds+safety-ttl", []setnxgetset.Option{setnxgetset.WithFormat(setnxgetset.FloatSeconds), setnxgetset.WithSafetyTTL(time.Second)}, time.Millisecond},
	} {
		build := func(c []driver.Conn) (*lock.Locker, error) { return setnxgetset.New(c[0], f.opts...) }
		for _, d := range redistest.Drivers() {
			if f.name != "ms+safety-ttl" && d.Name != "goredis-resp3" {
				continue // the formats differ only in the strategy: one driver is enough
			}
			c := combo(f.name+"/"+d.Name, one(d, fixed(addr)), one(d, closed), build)
			c.Harness.ExtraTTL, c.Harness.Skip = f.extra, SetnxGetsetSkips
			combos = append(combos, c)
		}
	}
	return combos
}

// RedlockShortTTL is the Harness.ShortTTL of Redlock's combinations: at the
// default 300ms, Redlock's node timeout is half the TTL, 150ms, which five
// local nodes missed on CI's loaded two cores (no quorum, "Redis did not
// answer"); at 1s it is 500ms.
const RedlockShortTTL = time.Second

// RedlockSkips are the properties of notification waiting that cannot be
// checked on Redlock from its Locker. (It keeps no queue, so those about
// order skip on their own.)
var RedlockSkips = map[string]string{
	"ReleaseWakesTheHead":     redlockWakes,
	"LostMessageCostsOnePoll": redlockWakes,
}

const redlockWakes = "a waiter listens on every node, and each node confirms its subscription on its own: " +
	"a confirmation that comes after the release wakes the waiter first, so which wake-up let it in " +
	"cannot be told from the Locker; the strategy's own tests check its release's hints"

// Redlock returns redlock over the servers of addrs × go-redis, × redigo,
// × rueidis, and × a mix of the three (go-redis RESP2, redigo, rueidis,
// go-redis RESP3, in turn).
func Redlock(addrs []string) []Combo {
	named := map[string]redistest.Driver{}
	for _, d := range redistest.Drivers() {
		named[d.Name] = d
	}
	connect := func(drivers []redistest.Driver, addrsOf func(t testing.TB) []string) func(t testing.TB) []driver.Conn {
		return func(t testing.TB) []driver.Conn {
			as := addrsOf(t)
			conns := make([]driver.Conn, len(as))
			for i, a := range as {
				conns[i] = drivers[i%len(drivers)].Conn(t, a)
			}
			return conns
		}
	}
	build := func(c []driver.Conn) (*lock.Locker, error) { return redlock.New(c) }
	var combos []Combo
	for _, c := range []struct {
		name    string
		drivers []redistest.Driver
	}{
		{"goredis", []redistest.Driver{named["goredis-resp3"]}},
		{"redigo", []redistest.Driver{named["redigo"]}},
		{"rueidis", []redistest.Driver{named["rueidis"]}},
		{"mixed", []redistest.Driver{named["goredis-resp2"], named["redigo"], named["rueidis"], named["goredis-resp3"]}},
	} {
		cb := combo(c.name,
			connect(c.drivers, func(testing.TB) []string { return addrs }),
			connect(c.drivers, func(t testing.TB) []string { return redistest.ClosedAddrs(t, len(addrs)) }),
			build)
		cb.Harness.ShortTTL, cb.Harness.Skip = RedlockShortTTL, RedlockSkips
		combos = append(combos, cb)
	}
	return combos
}

// Prefix names each combination after its strategy.
func Prefix(prefix string, combos []Combo) []Combo {
	out := make([]Combo, len(combos))
	for i, c := range combos {
		c.Name = prefix + "/" + c.Name
		out[i] = c
	}
	return out
}

// EachStrategy starts the servers and returns one combination of each
// strategy, named strategy/driver, for wrappers such as otel: single over
// go-redis (RESP3), setnx-getset in milliseconds over redigo, and Redlock
// over a mix of drivers, left out without redis-server.
func EachStrategy(t *testing.T) []Combo {
	addr, real := redistest.Addr(t)
	combos := []Combo{pick(Prefix("single", Single(addr)), "single/goredis-resp3"),
		pick(Prefix("setnx-getset", SetnxGetset(addr)), "setnx-getset/ms+safety-ttl/redigo")}
	if !real {
		t.Log("redis-server not found: the Redlock combination needs real servers and is left out")
		return combos
	}
	servers := redistest.Start(t, 5)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	return append(combos, pick(Prefix("redlock", Redlock(addrs)), "redlock/mixed"))
}

// pick returns the combination named name.
func pick(combos []Combo, name string) Combo {
	for _, c := range combos {
		if c.Name == name {
			return c
		}
	}
	panic("matrix: no combination " + name)
}
