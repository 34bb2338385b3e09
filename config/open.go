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
	"sync"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	lockotel "github.com/locksmith-go/lock/otel"
)

// ErrClosed is returned by Obtain on a [Locker] that was closed.
var ErrClosed = errors.New("config: locker closed")

// Locker is the [lock.Locker] that [Open] builds from a Config. It owns the
// clients it opened: Close closes them. It is safe for concurrent use.
type Locker struct {
	inner lock.Locker
	cfg   Config
	ttl   time.Duration
	retry lock.Option // the default retry policy, or nil

	mu      sync.Mutex
	closers []io.Closer
	closed  bool
}

var _ lock.Locker = (*Locker)(nil)

// Open builds the Locker that c describes: it checks c (see
// [Config.Validate]), reads the TLS files, and opens a client of each server
// with the configured driver. Clients connect lazily, on the first lock
// operation, as database/sql's Open does: Open does not talk to Redis.
// Close the Locker to close them.
func Open(c Config) (*Locker, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.clone()
	tlsConfig, err := c.TLS.clientConfig()
	if err != nil {
		return nil, err
	}
	l := &Locker{cfg: c, ttl: c.ttl()}
	if p, _ := parseRetry(c.Retry); p != nil {
		if c.MaxAttempts != 0 {
			p = lock.LimitAttempts(p, c.MaxAttempts)
		}
		l.retry = lock.WithRetry(p)
	}
	d := driverOf(c)
	e := Endpoint{Config: c.withDefaults()}
	open := func(addr string) (driver.Conn, error) {
		e := e
		e.Addr, e.TLS = addr, forServer(tlsConfig, addr)
		conn, closer, err := d.Open(e)
		if closer != nil {
			l.mu.Lock()
			l.closers = append(l.closers, closer)
			l.mu.Unlock()
		}
		return conn, err
	}
	inner, err := strategyOf(c).New(c, open)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	if c.OTel {
		inner = lockotel.NewLocker(inner, lockotel.WithKeys(otelKeys[c.OTelKeys]))
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
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	if c.PoolSize == 0 {
		c.PoolSize = 10 * runtime.GOMAXPROCS(0)
	}
	return c
}

// Obtain implements [lock.Locker], with the configured retry policy unless
// opts choose one. It returns ErrClosed after Close.
func (l *Locker) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...lock.Option) (*lock.Lock, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if l.retry != nil {
		opts = append([]lock.Option{l.retry}, opts...)
	}
	return l.inner.Obtain(ctx, key, ttl, opts...)
}

// TTL returns the configured default TTL (DefaultTTL unless the Config sets
// one), for callers that take it from the configuration:
//
//	lk, err := locker.Obtain(ctx, key, locker.TTL())
func (l *Locker) TTL() time.Duration { return l.ttl }

// Config returns the Config the Locker was built from.
func (l *Locker) Config() Config { return l.cfg.clone() }

// Close closes every client the Locker opened, and returns the first
// error. Release the locks first: their Refresh and Release need the
// clients. Calling Close again does nothing and returns nil.
func (l *Locker) Close() error {
	l.mu.Lock()
	closers := l.closers
	l.closers, l.closed = nil, true
	l.mu.Unlock()
	var errs []error
	for _, c := range closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// String describes the Locker by its Config, without the password.
func (l *Locker) String() string { return "locker " + l.cfg.String() }

// Format writes String for every verb.
func (l *Locker) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, l.String()) }

// LogValue makes log/slog record the Config, without the password.
func (l *Locker) LogValue() slog.Value { return l.cfg.LogValue() }

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
