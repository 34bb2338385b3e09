package config

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
)

// Strategy is a lock strategy that [Open] builds by name. Register one with
// [RegisterStrategy].
type Strategy struct {
	// New builds the Locker that c describes over conns: a connection to
	// each of its servers, a client of the configured driver that the
	// Close of the Locker Open returns closes. Open adds the configured
	// TTL, retry policy and way to wait to its defaults (lock.Locker.With).
	// Required.
	New func(c Config, conns []driver.Conn) (*lock.Locker, error)
	// Nodes says that the strategy locks on several independent servers,
	// as redlock does: one per address of Addrs, or per URL of Nodes.
	// Otherwise it locks on one server (which a Sentinel or Cluster
	// deployment is), and Open refuses a Config that names more.
	Nodes bool
	// Check checks c for this strategy without connecting, and returns an
	// *lock.ArgumentError naming the setting at fault. Optional.
	Check func(c Config) error
	// Params names the strategy's own settings, which Config.Params
	// carries: lower-case letters, digits and underscores, each known to
	// one strategy or driver only, and none of the built-in settings (nor
	// url, which the environment's <prefix>URL takes).
	Params []string
}

// Driver is a Redis client library that [Open] opens clients of by name.
// Register one with [RegisterDriver].
type Driver struct {
	// Open opens a client of one server, and returns the connection and
	// what closes the client. Required.
	Open func(e Endpoint) (driver.Conn, io.Closer, error)
	// Topologies lists the deployments it opens besides a standalone
	// server: "sentinel", "cluster". Open is never called with another:
	// Validate refuses the Config, naming the driver and the deployment.
	Topologies []string
	// Check checks c for this driver without connecting. Optional.
	Check func(c Config) error
	// Params names the driver's own settings, as Strategy.Params does.
	Params []string
}

// Endpoint is what a [Driver] opens a client of: a server (over TCP or a
// Unix socket), a master that Redis Sentinels monitor, or a Redis Cluster.
type Endpoint struct {
	// Topology is "standalone", "sentinel" or "cluster".
	Topology string
	// Network is "tcp", or "unix" for a standalone server's Unix socket.
	Network string
	// Addrs are where to connect: a standalone server's host:port, or its
	// socket's path; the Sentinels' host:port; a Cluster's seed nodes.
	Addrs []string
	// MasterName is the name under which the Sentinels monitor the master.
	MasterName string
	// DB is the database number (always 0 on a Cluster).
	DB int
	// Username and Password authenticate to the servers that hold the
	// data.
	Username, Password string
	// SentinelUsername and SentinelPassword authenticate to the Sentinels.
	SentinelUsername, SentinelPassword string
	// TLS is the client's TLS configuration, with ServerName set, or nil
	// for plain TCP.
	TLS *tls.Config
	// Config is the Config being opened, with its defaults filled in:
	// DialTimeout, ReadTimeout, WriteTimeout and PoolSize are set. A
	// driver reads its own settings from Config.Params.
	Config Config

	handshakes *handshakes // over TLS: see Dial
}

var registry = struct {
	sync.RWMutex
	strategies map[string]Strategy
	drivers    map[string]Driver
	params     map[string]string // parameter → "strategy x" or "driver y"
}{strategies: map[string]Strategy{}, drivers: map[string]Driver{}, params: map[string]string{}}

var (
	namePattern  = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`) // a URL scheme
	paramPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// RegisterStrategy makes a strategy known to Open by name, as the scheme of
// URLs and the value of the strategy setting. Call it from an init
// function, as database/sql's drivers do. It panics if name is not a valid
// URL scheme in lower case, or is redis, rediss or unix (go-redis's URLs,
// which ParseURL reads), if it is registered already, if s.New is nil,
// or if a parameter name is invalid or taken.
func RegisterStrategy(name string, s Strategy) {
	register("strategy", name, s.New != nil, s.Params, func() bool { return addNew(registry.strategies, name, s) })
}

// RegisterDriver makes a driver known to Open by name, as the value of the
// driver setting. It panics as RegisterStrategy does.
func RegisterDriver(name string, d Driver) {
	register("driver", name, d.Open != nil, d.Params, func() bool { return addNew(registry.drivers, name, d) })
}

// addNew adds v to m under name unless name is taken, which it reports.
func addNew[T any](m map[string]T, name string, v T) (taken bool) {
	if _, taken = m[name]; !taken {
		m[name] = v
	}
	return taken
}

// register checks a registration and runs add under the lock; add reports
// a duplicate name.
func register(what, name string, hasFunc bool, params []string, add func() (dup bool)) {
	registry.Lock()
	defer registry.Unlock()
	switch {
	case !namePattern.MatchString(name):
		panic(fmt.Sprintf("config: Register%s: invalid name %q: want lower-case letters, digits, +, - and . after a letter", title(what), name))
	case !hasFunc:
		panic(fmt.Sprintf("config: Register%s %q: nil function", title(what), name))
	case what == "strategy" && redisSchemes[name] != "":
		panic(fmt.Sprintf("config: RegisterStrategy: invalid name %q: ParseURL reads it as go-redis's URL of the single strategy", name))
	}
	for _, p := range params {
		_, builtin := lookup(p)
		switch owner, taken := registry.params[p]; {
		case !paramPattern.MatchString(p):
			panic(fmt.Sprintf("config: Register%s %q: invalid parameter %q: want lower-case letters, digits and _ after a letter", title(what), name, p))
		case builtin || p == "url":
			panic(fmt.Sprintf("config: Register%s %q: parameter %q is a built-in setting", title(what), name, p))
		case taken:
			panic(fmt.Sprintf("config: Register%s %q: parameter %q belongs to %s", title(what), name, p, owner))
		}
	}
	if add() {
		panic(fmt.Sprintf("config: Register%s called twice for %q", title(what), name))
	}
	for _, p := range params {
		registry.params[p] = what + " " + name
	}
}

func title(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// Strategies returns the names of the known strategies, sorted, for a
// program's help text (an unknown name's error lists them too).
func Strategies() []string { return names(registry.strategies) }

// Drivers returns the names of the known drivers, sorted, as Strategies
// does.
func Drivers() []string { return names(registry.drivers) }

func names[T any](m map[string]T) []string {
	registry.RLock()
	defer registry.RUnlock()
	return slices.Sorted(maps.Keys(m))
}

func get[T any](m map[string]T, name string) (T, bool) {
	registry.RLock()
	defer registry.RUnlock()
	v, ok := m[name]
	return v, ok
}

// known checks that name is registered in m, and lists m's names if not.
func known[T any](m map[string]T, name string) error {
	switch _, ok := get(m, name); {
	case name == "":
		return fmt.Errorf("is required; known: %s", strings.Join(names(m), ", "))
	case !ok:
		return fmt.Errorf("unknown %q; known: %s", name, strings.Join(names(m), ", "))
	}
	return nil
}

func knownStrategy(name string) error { return known(registry.strategies, name) }

func knownDriver(name string) error {
	err := known(registry.drivers, name)
	if pkg, ok := linkable[name]; ok && err != nil {
		return fmt.Errorf("%w; %s is not linked into this program: import _ %q", err, name, pkg)
	}
	return err
}

// linkable are the drivers of this module that a program links in by
// importing their package for its side effect, as database/sql's are.
var linkable = map[string]string{"redigo": "github.com/locksmith-go/lock/config/redigoconfig", "rueidis": "github.com/locksmith-go/lock/config/rueidisconfig"}

// The instrumentation that the otel setting turns on, which package
// config/otelconfig registers.
var otelWrap struct {
	sync.RWMutex
	wrap func(l *lock.Locker, keys string) *lock.Locker
}

// RegisterOTel makes [Open] honour the otel and otel_keys settings with
// wrap, which returns l instrumented with keys recorded as otel_keys says
// (omitted, hashed or raw; "" is the default). Package
// github.com/locksmith-go/lock/config/otelconfig calls it: import it for
// its side effect, so that a program that does not only compiles none of
// OpenTelemetry. It panics if called twice.
func RegisterOTel(wrap func(l *lock.Locker, keys string) *lock.Locker) {
	otelWrap.Lock()
	defer otelWrap.Unlock()
	if otelWrap.wrap != nil || wrap == nil {
		panic("config: RegisterOTel called twice, or with nil")
	}
	otelWrap.wrap = wrap
}

// otelOf returns the registered instrumentation, or nil.
func otelOf() func(*lock.Locker, string) *lock.Locker {
	otelWrap.RLock()
	defer otelWrap.RUnlock()
	return otelWrap.wrap
}

// strategyOf and driverOf return the registered strategy and driver of a
// valid Config.
func strategyOf(c Config) Strategy { s, _ := get(registry.strategies, c.Strategy); return s }
func driverOf(c Config) Driver     { d, _ := get(registry.drivers, c.driver()); return d }

// driver returns the driver's name; goredis when c names none.
func (c Config) driver() string { return cmp.Or(c.Driver, "goredis") }

func isParam(name string) bool { _, ok := get(registry.params, name); return ok }

func paramNames() []string { return names(registry.params) }
