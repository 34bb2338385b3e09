// Package locktest provides an embedded Redis server for tests and examples
// of code that takes locks, in the spirit of net/http/httptest.
//
// The server is miniredis, in the test's own process on a free loopback
// port: it needs no redis-server, and keeps real time. Before each command
// every TTL is decreased by the wall-clock time since the previous one, and
// the keys whose TTL ran out are removed, so a key set with a TTL of d is
// there to every command that arrives less than d later and gone to every
// one after, as on Redis; no timer runs in the background, and no key
// expires half-way through a script.
//
// In a test, one line gives a driver connection to a fresh server, stopped
// when the test ends:
//
//	locker, err := single.New(locktest.GoRedis(t)) // or locktest.Redigo(t)
//
// [NewServer] gives the server itself; [StartServer] starts one outside a
// test, for an Example or a demo. miniredis implements the commands and
// scripts the strategies send, but not persistence, replication or
// Cluster: test those against real redis-server processes. The server
// fakes the faults a holder must survive, so that a test of the code that
// holds a lock needs no sleep and no raw command: a key that expires now
// or that another holder overwrites ([Server.ExpireNow],
// [Server.Overwrite]), a clock that runs ahead ([Server.FastForward]), a
// server that stops answering ([Server.Pause]) and an ACL that refuses a
// command ([Server.Refuse]). The repository's docs/testing.md guide has
// more.
package locktest

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
)

// ErrFIPSOnly is StartServer's error in FIPS 140-only mode
// (GODEBUG=fips140=only), where the embedded server, which computes each
// script's SHA-1 in this process, would panic: test against a redis-server
// of your own there.
var ErrFIPSOnly = errors.New("locktest: the embedded server computes scripts' SHA-1 in this process, which FIPS 140-only mode (GODEBUG=fips140=only) forbids: use a redis-server of your own")

// Server is an embedded Redis listening on a loopback port.
type Server struct {
	m     *miniredis.Miniredis
	addr  string
	clock *clock

	mu      sync.Mutex
	closers []func() error // the clients the server handed out
	closed  bool
}

// StartServer starts an embedded server on a free loopback port. The caller
// must Close it. In FIPS 140-only mode (GODEBUG=fips140=only) it returns
// ErrFIPSOnly: the embedded server runs scripts in this process, and names
// them by their SHA-1, which that mode forbids.
func StartServer() (*Server, error) {
	if strings.Contains(","+os.Getenv("GODEBUG")+",", ",fips140=only,") {
		return nil, ErrFIPSOnly
	}
	m, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	// TTLs decrease by the exact wall-clock time elapsed since the previous
	// command, on every command, before it runs; no timer is involved. The
	// clock is set before each command that a client sends, and never by
	// the commands that a script calls, so that it stands still while a
	// script runs, as on Redis. Without that, a key could expire between two
	// of a script's commands, which Redis never lets happen.
	m.ClockTTL(true)
	c := &clock{m: m, refused: map[string]int{}}
	m.Server().SetPreHook(c.tick)
	return &Server{m: m, addr: m.Addr(), clock: c}, nil
}

// clock sets the embedded server's time to the wall clock's plus what
// FastForward added, never backwards; it also holds the commands of a
// paused server, and refuses those an ACL would (see faults.go).
type clock struct {
	m *miniredis.Miniredis

	mu    sync.Mutex // held while it sets the server's time, which takes the server's lock
	last  time.Time
	ahead time.Duration // FastForward's

	// faults guards what follows, never while it calls the server: a
	// script's commands, which hold the server's lock, read it.
	faults  sync.Mutex
	paused  chan struct{}  // closed by Resume; nil when not paused
	refused map[string]int // by lower-case command name: how many Refuse calls refuse it
}

// tick is the server's hook before every command: it refuses a command
// that Refuse names, holds one of a paused server until Resume, and sets
// the time, unless a script sends the command (its time stands, and its
// server was answering when it started).
func (c *clock) tick(p *server.Peer, cmd string, _ ...string) bool {
	c.faults.Lock()
	refused, paused := c.refused[strings.ToLower(cmd)] > 0, c.paused
	c.faults.Unlock()
	if refused {
		p.WriteError(noPerm(cmd))
		return true
	}
	script := fromScript(p)
	if script {
		return false // the script holds the server's lock: its time stands
	}
	if paused != nil {
		<-paused
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now().Add(c.ahead); now.After(c.last) {
		c.last = now
	}
	c.m.SetTime(c.last)
	return false
}

// fromScript reports whether p is the peer of a command that a Lua script
// calls, which miniredis marks as nested in its connection context.
func fromScript(p *server.Peer) bool {
	v := reflect.ValueOf(p.Ctx)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	nested := v.Elem().FieldByName("nested")
	return nested.IsValid() && nested.Kind() == reflect.Bool && nested.Bool()
}

// NewServer starts an embedded server for t, and closes it when t ends. It
// fails t if the server cannot start.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer()
	if err != nil {
		t.Fatalf("locktest: start the embedded server: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// GoRedis returns a go-redis connection to a new embedded server, which is
// closed, with the connection, when t ends.
func GoRedis(t testing.TB) driver.Conn {
	t.Helper()
	return goredis.New(NewServer(t).GoRedisClient())
}

// Redigo returns a redigo connection to a new embedded server, which is
// closed, with the connection, when t ends.
func Redigo(t testing.TB) driver.Conn {
	t.Helper()
	s := NewServer(t)
	return redigo.New(s.RedigoPool(), redigo.WithAddr(s.Addr()))
}

// Addr returns the server's address, host:port.
func (s *Server) Addr() string { return s.addr }

// GoRedisClient returns a new go-redis client of the server, with the
// settings the lock strategies want: the context's deadline bounds each
// command (ContextTimeoutEnabled), and commands are never retried by the
// client (MaxRetries -1, DialerRetries 1). Close closes it.
func (s *Server) GoRedisClient() *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:                  s.Addr(),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
	})
	s.onClose(c.Close)
	return c
}

// RedigoPool returns a new redigo pool of the server, whose connections
// have a dial timeout of 5s and read and write timeouts of 3s, go-redis's
// defaults, for calls whose context has no deadline. Close closes it.
func (s *Server) RedigoPool() *redigoredis.Pool {
	addr := s.Addr()
	p := &redigoredis.Pool{
		MaxIdle: 8,
		DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
			return redigoredis.DialContext(ctx, "tcp", addr,
				redigoredis.DialConnectTimeout(5*time.Second),
				redigoredis.DialReadTimeout(3*time.Second),
				redigoredis.DialWriteTimeout(3*time.Second))
		},
	}
	s.onClose(p.Close)
	return p
}

func (s *Server) onClose(f func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closers = append(s.closers, f)
}

// Close closes the clients the server handed out, then stops the server.
// Calls after the first do nothing. A client asked for after Close is the
// caller's to close.
func (s *Server) Close() {
	s.mu.Lock()
	closers, closed := s.closers, s.closed
	s.closers, s.closed = nil, true
	s.mu.Unlock()
	if closed {
		return
	}
	s.Resume() // the commands held by a pause would hold the server's close
	for _, f := range closers {
		_ = f()
	}
	s.m.Close()
}
