package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/background"
)

// ErrClosed is the error of Obtain on a [Locker] that was closed, and what
// the errors of the operations of its locks match after Close.
var ErrClosed = errors.New("config: locker closed")

// Locker is the [lock.Locker] that [Open] builds from a Config. It owns the
// clients it opened: Close closes them. It is safe for concurrent use. Like
// every lock.Locker, it refuses a nil ctx with an *lock.ArgumentError, even
// after Close.
type Locker struct {
	inner    lock.Locker
	cfg      Config
	ttl      time.Duration
	defaults []lock.Option // the default TTL, retry policy and way to wait, before each call's options

	mu       sync.Mutex
	closers  []io.Closer
	conns    []driver.Conn               // one per server, for Conns
	sessions map[driver.Session]struct{} // the subscriber sessions open, for Close

	// inFlight is held for reading by every call on a client, and for
	// writing by Close, which so waits for the calls in flight. bg counts
	// the work that the Locker's calls and locks left running in the
	// background, such as clean-ups: Close waits for it too.
	inFlight sync.RWMutex
	bg       background.Group
	closing  bool // Close was called: the Locker refuses new calls
	closed   bool // the clients are closed
}

var _ lock.Locker = (*Locker)(nil)

// Open builds the Locker that c describes: it checks c (see
// [Config.Validate]), reads the TLS files, and opens a client of each server
// with the configured driver. The goredis and redigo clients connect
// lazily, on the first lock operation, as database/sql's Open does: Open
// does not talk to Redis. A rueidis client connects when it is opened, so
// a Sentinel or Cluster deployment that cannot be reached fails Open (see
// config/rueidisconfig). Close the Locker to close them.
func Open(c Config) (*Locker, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.clone()
	c.Addrs, _ = parseAddrs(c.Addrs) // checked; a Config built in Go may leave the port out
	eps := c.endpoints()
	for i := range eps {
		var err error
		if eps[i], err = eps[i].withTLS(c.TLS); err != nil {
			return nil, err
		}
		eps[i].Config = c.withDefaults()
		if eps[i].TLS != nil {
			eps[i].handshakes = &handshakes{addr: eps[i].name()}
		}
	}
	l := &Locker{cfg: c, ttl: c.ttl()}
	l.defaults = append(l.defaults, lock.WithTTL(l.ttl))
	if p, _ := parseRetry(c.Retry); p != nil {
		if c.MaxAttempts != 0 {
			p = lock.LimitAttempts(p, c.MaxAttempts)
		}
		l.defaults = append(l.defaults, lock.WithRetry(p))
	}
	l.defaults = append(l.defaults, waits[c.Wait]...)
	conns := make([]driver.Conn, len(eps))
	for i, e := range eps {
		conn, closer, err := driverOf(c).Open(e)
		if closer != nil {
			l.closers = append(l.closers, closer)
		}
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		conns[i] = conn
		if driver.Check(conn) != nil {
			continue // for the strategy to refuse
		}
		conns[i] = guarded{conn, l, e.handshakes}
		if sub, ok := conn.(driver.Subscriber); ok {
			conns[i] = guardedSubscriber{guarded{conn, l, e.handshakes}, sub}
		}
	}
	l.conns = conns
	inner, err := strategyOf(c).New(c, conns)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	if c.OTel {
		inner = otelOf()(inner, c.OTelKeys)
	}
	l.inner = inner
	return l, nil
}

// withDefaults fills in what drivers need.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.DialTimeout, defaultDialTimeout)
	def(&c.ReadTimeout, defaultReadTimeout)
	def(&c.WriteTimeout, defaultWriteTimeout)
	if c.PoolSize == 0 {
		c.PoolSize = 10 * runtime.GOMAXPROCS(0)
	}
	return c
}

// Inspect implements [lock.Locker]. It returns ErrClosed after Close.
func (l *Locker) Inspect(ctx context.Context, key string, opts ...lock.Option) (lock.State, error) {
	if l.refuses(ctx) {
		return lock.State{}, ErrClosed
	}
	return l.inner.Inspect(background.With(ctx, &l.bg), key, opts...)
}

// Break implements [lock.Locker]. It returns ErrClosed after Close.
func (l *Locker) Break(ctx context.Context, key, fingerprint string, opts ...lock.Option) (lock.State, error) {
	if l.refuses(ctx) {
		return lock.State{}, ErrClosed
	}
	return l.inner.Break(background.With(ctx, &l.bg), key, fingerprint, opts...)
}

// Obtain implements [lock.Locker], with the configured TTL when ttl is 0
// (lock.WithTTL), with the configured retry policy unless opts choose one,
// and with lock.WithPolling when the Config's Wait is poll. It returns
// ErrClosed after Close.
func (l *Locker) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...lock.Option) (*lock.Lock, error) {
	if l.refuses(ctx) {
		return nil, ErrClosed
	}
	if len(l.defaults) > 0 {
		opts = append(slices.Clip(l.defaults), opts...)
	}
	return l.inner.Obtain(background.With(ctx, &l.bg), key, ttl, opts...)
}

// ObtainMany implements [lock.Locker] as Obtain does.
func (l *Locker) ObtainMany(ctx context.Context, keys []string, ttl time.Duration, opts ...lock.Option) (*lock.Lock, error) {
	if l.refuses(ctx) {
		return nil, ErrClosed
	}
	if len(l.defaults) > 0 {
		opts = append(slices.Clip(l.defaults), opts...)
	}
	return l.inner.ObtainMany(background.With(ctx, &l.bg), keys, ttl, opts...)
}

// TTL returns the configured default TTL (30s unless the Config sets one),
// which Obtain, ObtainMany and lock.Do use when their ttl is 0:
//
//	lk, err := locker.Obtain(ctx, key, 0) // for locker.TTL()
func (l *Locker) TTL() time.Duration { return l.ttl }

// ReadTimeout returns how long one command waits for its reply: the
// Config's ReadTimeout, or its default (3s) when it sets none. A caller that
// must not wait for a lock bounds its call with it, as the locksmith CLI
// does: a server that stopped answering fails the call then, and no
// clean-up holds it longer.
func (l *Locker) ReadTimeout() time.Duration { return l.cfg.withDefaults().ReadTimeout }

// Config returns the Config the Locker was built from, with each address's
// port: what a program reports it runs.
func (l *Locker) Config() Config { return l.cfg.clone() }

// Conns returns the Locker's connection to each of its servers: redlock's
// nodes in the order of Config().Addrs or Config().Nodes, the one server
// of the other strategies. They serve tools that send commands of their
// own with driver.Do, such as the locksmith CLI's check-legacy, which reads
// INFO on every server. Like the Locker's locks, they fail with ErrClosed
// after Close.
func (l *Locker) Conns() []driver.Conn { return slices.Clone(l.conns) }

// Close waits for the calls in flight to end, and for the work they left
// running in the background (the clean-ups of attempts that got no
// answer, a waiter's leaving the queue, Redlock's calls to the nodes that
// had not answered yet; each bounded by strategy.CleanupTimeout), then
// closes every client the Locker opened, and returns their errors. Once
// Close is called, Obtain, Inspect and Break return an error matching
// ErrClosed; once it has closed the clients, so do the operations of its
// locks: release the locks first. Calling Close again does nothing and
// returns nil.
func (l *Locker) Close() error {
	l.inFlight.Lock()
	l.closing = true
	l.inFlight.Unlock()
	l.bg.Wait()
	l.inFlight.Lock()
	l.closed = true
	l.inFlight.Unlock()
	l.mu.Lock()
	closers, sessions := l.closers, l.sessions
	l.closers, l.sessions = nil, nil
	l.mu.Unlock()
	var errs []error
	for s := range sessions {
		_ = s.Close() // a session that ends with its Locker reports no error
	}
	for _, c := range closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// refuses reports whether a call on ctx gets ErrClosed: Close was
// called. A nil ctx goes on to the inner Locker, which refuses it first,
// as every Locker does, with an *lock.ArgumentError.
func (l *Locker) refuses(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	l.inFlight.RLock()
	defer l.inFlight.RUnlock()
	return l.closing
}

// during runs call unless the Locker is closed, and keeps Close from
// closing the clients until call returns.
func (l *Locker) during(call func() error) error {
	l.inFlight.RLock()
	defer l.inFlight.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return call()
}

// guarded is a client's connection whose calls hold off Close, and fail
// with ErrClosed after it, so that no call ever reaches a closed client
// (a redigo pool panics when one does). Over TLS, an error without an
// answer says when no handshake ever finished (see handshakes).
type guarded struct {
	c  driver.Conn
	l  *Locker
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
	if errors.Is(err, ErrClosed) {
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
	l *Locker
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

// String describes the Locker by its Config, without the password. (fmt
// would print the fields, the password among them.)
func (l *Locker) String() string {
	if l == nil {
		return "locker <nil>"
	}
	return "locker " + l.cfg.String()
}

// Format writes String for every verb, so that none prints the fields (%#v
// would).
func (l *Locker) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, l.String()) }

// LogValue makes log/slog record String, which its JSON handler would
// otherwise record as {}.
func (l *Locker) LogValue() slog.Value { return slog.StringValue(l.String()) }

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
