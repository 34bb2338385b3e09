package config

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/reach"
)

// clients are the clients that Open or OpenConns opened, and what holds
// off their closing: the calls in flight on them. It is safe for
// concurrent use.
type clients struct {
	mu       sync.Mutex
	closers  []io.Closer
	sessions map[driver.Session]struct{} // the subscriber sessions open, for Close

	// inFlight is held for reading by every call on a client, and for
	// writing by Close, which so waits for the calls in flight.
	inFlight sync.RWMutex
	closed   bool // the clients are closed
}

// Open builds the Locker that c describes: it checks c (see
// [Config.Validate]), reads the TLS files, and opens a client of each server
// with the configured driver, as [OpenConns] does. The goredis and redigo
// clients connect lazily, on the first lock operation, as database/sql's
// Open does: Open does not talk to Redis. A rueidis client connects when it
// is opened, so a Sentinel or Cluster deployment that cannot be reached
// fails Open (see config/rueidisconfig).
//
// The Locker owns the clients: its Close waits for the calls in flight and
// for the work they left in the background, then closes them. Once they
// are closed, the operations of its locks fail with an error matching
// lock.ErrClosed: release the locks first. The Locker uses the Config's
// TTL when an Obtain's ttl is 0, its retry policy unless a call chooses
// one, and lock.WithPolling when its Wait is poll.
func Open(c Config) (*lock.Locker, error) {
	conns, cl, err := open(c)
	if err != nil {
		return nil, err
	}
	c = c.Defaults()
	l, err := strategyOf(c).New(c, conns)
	if err != nil {
		_ = cl.Close()
		return nil, err
	}
	if c.OTel {
		l = otelOf()(l, c.OTelKeys)
	}
	defaults := []lock.Option{lock.WithTTL(c.TTL)}
	if p, _ := parseRetry(c.Retry); p != nil {
		if c.MaxAttempts != 0 {
			p = lock.LimitAttempts(p, c.MaxAttempts)
		}
		defaults = append(defaults, lock.WithRetry(p))
	}
	l = l.With(append(defaults, waits[c.Wait]...)...)
	reach.SetClose(l, cl.Close)
	return l, nil
}

// OpenConns checks c and opens a client of each of its servers, as Open
// does, for tools that send commands of their own with driver.Do, such as
// the locksmith CLI's check-legacy, which reads INFO on every server. It
// returns a connection to each: redlock's nodes in the order of c.Addrs or
// c.Nodes, the one server of the other strategies, marked
// driver.WithoutScripts under c.WithoutScripts, as Open's are. Close closes the
// clients, once the calls in flight on them have returned; the calls after
// it fail with an error matching lock.ErrClosed.
func OpenConns(c Config) ([]driver.Conn, io.Closer, error) {
	conns, cl, err := open(c)
	if err != nil {
		return nil, nil, err
	}
	return conns, cl, nil
}

// open opens the clients of c's servers.
func open(c Config) ([]driver.Conn, *clients, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	c = c.Defaults()
	eps := c.endpoints()
	for i := range eps {
		var err error
		if eps[i], err = eps[i].withTLS(c.TLS); err != nil {
			return nil, nil, err
		}
		eps[i].Config = c.withDefaults()
		if eps[i].TLS != nil {
			eps[i].handshakes = &handshakes{addr: eps[i].name()}
		}
	}
	cl := new(clients)
	conns := make([]driver.Conn, len(eps))
	for i, e := range eps {
		conn, closer, err := driverOf(c).Open(e)
		if closer != nil {
			cl.closers = append(cl.closers, closer)
		}
		if err != nil {
			_ = cl.Close()
			return nil, nil, err
		}
		if driver.Check(conn) == nil { // else for the strategy to refuse
			g := guarded{conn, cl, e.handshakes}
			conn = g
			if sub, ok := g.c.(driver.Subscriber); ok {
				conn = guardedSubscriber{g, sub}
			}
		}
		if c.WithoutScripts {
			conn = driver.WithoutScripts(conn)
		}
		conns[i] = conn
	}
	return conns, cl, nil
}

// Defaults returns c with the defaults of what it leaves out: its TTL
// (30s), ReadTimeout (3s) and the other timeouts, and each address's port.
// A program reports with it the settings it runs with; a caller that must
// not wait for a lock bounds its call with ReadTimeout, as the locksmith
// CLI does: a server that stopped answering fails the call then. It
// leaves the Elector's settings (Lease, StopGrace, Interval, Identity)
// unset, for elect to derive from the lease that an Elector ends up with
// ([NewElector]).
func (c Config) Defaults() Config {
	c = c.clone().withDefaults()
	c.Addrs, _ = parseAddrs(c.Addrs) // a Config built in Go may leave the port out
	c.TTL = c.ttl()
	return c
}

// withDefaults fills in what drivers need.
func (c Config) withDefaults() Config {
	c.DialTimeout = cmp.Or(c.DialTimeout, defaultDialTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, defaultReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, defaultWriteTimeout)
	c.PoolSize = cmp.Or(c.PoolSize, 10*runtime.GOMAXPROCS(0))
	return c
}

// Close waits for the calls in flight on the clients to return, then
// closes every client, and returns their errors. Calling it again does
// nothing and returns nil.
func (cl *clients) Close() error {
	cl.inFlight.Lock()
	cl.closed = true
	cl.inFlight.Unlock()
	cl.mu.Lock()
	closers, sessions := cl.closers, cl.sessions
	cl.closers, cl.sessions = nil, nil
	cl.mu.Unlock()
	var errs []error
	for s := range sessions {
		_ = s.Close() // a session that ends with its Locker reports no error
	}
	for _, c := range closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// during runs call unless the clients are closed, and keeps Close from
// closing them until call returns.
func (cl *clients) during(call func() error) error {
	cl.inFlight.RLock()
	defer cl.inFlight.RUnlock()
	if cl.closed {
		return lock.ErrClosed
	}
	return call()
}

// guarded is a client's connection whose calls hold off Close, and fail
// with ErrClosed after it, so that no call ever reaches a closed client
// (a redigo pool panics when one does). Over TLS, an error without an
// answer says when no handshake ever finished (see handshakes).
type guarded struct {
	c  driver.Conn
	l  *clients
	hs *handshakes
}

// during runs call as the Locker's during does, and explains its error
// with the handshakes.
func (g guarded) during(call func() error) error { return g.hs.explain(g.l.during(call)) }

var (
	_ driver.Conn      = guarded{}
	_ driver.Addresser = guarded{}
	_ driver.Commander = guarded{}
	_ driver.Pinner    = guarded{}
	_ driver.Pipeliner = guarded{}
)

func (g guarded) SetNX(ctx context.Context, key, value string, ttl time.Duration) (ok bool, err error) {
	err = g.during(func() error { ok, err = g.c.SetNX(ctx, key, value, ttl); return err })
	return ok, err
}

func (g guarded) Get(ctx context.Context, key string) (value string, ok bool, err error) {
	err = g.during(func() error { value, ok, err = g.c.Get(ctx, key); return err })
	return value, ok, err
}

func (g guarded) GetSet(ctx context.Context, key, value string) (old string, ok bool, err error) {
	err = g.during(func() error { old, ok, err = g.c.GetSet(ctx, key, value); return err })
	return old, ok, err
}

func (g guarded) Del(ctx context.Context, key string) (ok bool, err error) {
	err = g.during(func() error { ok, err = g.c.Del(ctx, key); return err })
	return ok, err
}

func (g guarded) PTTL(ctx context.Context, key string) (ttl time.Duration, ok bool, err error) {
	err = g.during(func() error { ttl, ok, err = g.c.PTTL(ctx, key); return err })
	return ttl, ok, err
}

func (g guarded) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (reply any, err error) {
	err = g.during(func() error { reply, err = g.c.EvalSha(ctx, sha1, keys, args...); return err })
	return reply, err
}

func (g guarded) Eval(ctx context.Context, src string, keys []string, args ...any) (reply any, err error) {
	err = g.during(func() error { reply, err = g.c.Eval(ctx, src, keys, args...); return err })
	return reply, err
}

// Do implements [driver.Commander] if the client does: driver.Do says.
func (g guarded) Do(ctx context.Context, args ...any) (reply any, err error) {
	err = g.during(func() error { reply, err = driver.Do(ctx, g.c, args...); return err })
	return reply, err
}

// Pipeline implements [driver.Pipeliner], in one round trip if the
// client pipelines: driver.Pipeline says.
func (g guarded) Pipeline(ctx context.Context, cmds [][]any) (replies []any, err error) {
	err = g.during(func() error { replies, err = driver.Pipeline(ctx, g.c, cmds); return err })
	return replies, err
}

// Addr implements [driver.Addresser] with the client's address, if known.
func (g guarded) Addr() string { return driver.Addr(g.c) }

// Pinnable implements [driver.Pinner] if the client does: driver.Pinnable
// says.
func (g guarded) Pinnable() error { return driver.Pinnable(g.c) }

// Pin implements [driver.Pinner]: the whole of f holds off Close, so f gets
// the client's pinned Conn itself (guarding each of its calls too would
// take the read lock twice, which a waiting Close turns into a deadlock).
func (g guarded) Pin(ctx context.Context, key string, f func(driver.Conn) error) error {
	return g.during(func() error { return driver.Pin(ctx, g.c, key, f) })
}

// guardedSubscriber is a guarded connection whose client can subscribe, so
// that releases wake the waiters ([driver.Subscriber]). Close closes the
// sessions it opened; after Close, it opens none (see inert).
type guardedSubscriber struct {
	guarded
	sub driver.Subscriber
}

var _ driver.Subscriber = guardedSubscriber{}

// Listen implements [driver.Subscriber]. After Close, it returns a session
// that does nothing: the waiters' Obtain calls fail with ErrClosed anyway,
// and a failing Listen would only be retried until the subscriptions' linger
// ends.
func (g guardedSubscriber) Listen(ctx context.Context, on func(driver.Event)) (driver.Session, error) {
	var s driver.Session
	err := g.during(func() (err error) {
		if s, err = g.sub.Listen(ctx, on); err != nil {
			return err
		}
		g.l.mu.Lock()
		defer g.l.mu.Unlock()
		if g.l.sessions == nil {
			g.l.sessions = map[driver.Session]struct{}{}
		}
		g.l.sessions[s] = struct{}{}
		s = tracked{s, g.l}
		return nil
	})
	if errors.Is(err, lock.ErrClosed) {
		return &inert{on: on}, nil
	}
	return s, err
}

// Sharded implements [driver.Subscriber].
func (g guardedSubscriber) Sharded() bool { return g.sub.Sharded() }

// tracked is a session that its Locker's Close closes, unless it closed
// first.
type tracked struct {
	driver.Session
	l *clients
}

func (t tracked) Close() error {
	t.l.mu.Lock()
	delete(t.l.sessions, t.Session)
	t.l.mu.Unlock()
	return t.Session.Close()
}

// inert is the session of a closed Locker: it subscribes to nothing, and
// reports its end when closed.
type inert struct {
	on   func(driver.Event)
	once sync.Once
}

func (s *inert) Subscribe(context.Context, ...string) error   { return nil }
func (s *inert) Unsubscribe(context.Context, ...string) error { return nil }

func (s *inert) Close() error {
	s.once.Do(func() { s.on(driver.Event{Kind: driver.Closed}) })
	return nil
}

// clientConfig reads the TLS files and returns the configuration of
// clients, or nil when TLS is off.
func (t TLS) clientConfig() (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := readFile("tls_ca_file", t.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, invalid("tls_ca_file", fmt.Errorf("%s holds no PEM certificate", t.CAFile))
		}
	}
	if t.CertFile != "" {
		cert, err := readFile("tls_cert_file", t.CertFile)
		if err != nil {
			return nil, err
		}
		key, err := readFile("tls_key_file", t.KeyFile)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, invalid("tls_cert_file", fmt.Errorf("with tls_key_file: %w", err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// readFile reads the file of a setting; the error names the setting, and
// matches the file system's error.
func readFile(name, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", invalid(name, errors.New("cannot be read")), err)
	}
	return b, nil
}

// forServer returns cfg for the server at addr: with the server's host as
// the name its certificate must carry, unless cfg names one.
func forServer(cfg *tls.Config, addr string) *tls.Config {
	if cfg == nil || cfg.ServerName != "" {
		return cfg
	}
	cfg = cfg.Clone()
	cfg.ServerName, _, _ = net.SplitHostPort(addr)
	return cfg
}
