package config_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
	_ "github.com/locksmith-go/lock/config/otelconfig"
	_ "github.com/locksmith-go/lock/config/redigoconfig"
	_ "github.com/locksmith-go/lock/config/rueidisconfig"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// open opens c and closes it when t ends.
func open(t testing.TB, c config.Config) *lock.Locker {
	t.Helper()
	l, err := config.Open(c)
	if err != nil {
		t.Fatalf("Open(%v): %v", c, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func builder(c config.Config) func(t *testing.T, addrs []string) *lock.Locker {
	return func(t *testing.T, addrs []string) *lock.Locker {
		c := c
		c.Addrs = addrs
		return open(t, c)
	}
}

// testDriver returns the test harness's driver of the name, for planting
// and inspecting keys.
func testDriver(t testing.TB, name string) redistest.Driver {
	drivers := redistest.Drivers()
	i := slices.IndexFunc(drivers, func(d redistest.Driver) bool { return d.Name == name })
	if i < 0 {
		t.Fatalf("no test driver %s", name)
	}
	return drivers[i]
}

// drivers are the built-in drivers, with the test driver of the same
// client library.
var drivers = []struct{ name, test string }{{"goredis", "goredis-resp3"}, {"redigo", "redigo"}, {"rueidis", "rueidis"}}

// TestConformance: each built-in strategy built from a Config passes the
// conformance suite, on real servers (Redlock on 5), once: each over
// another built-in driver, so that every driver is opened by config too.
// The full matrix of strategies × drivers is the strategies' own packages'
// business; this run checks that config builds them alike.
func TestConformance(t *testing.T) {
	addr, real := redistest.Addr(t)
	var nodes []string
	if real {
		for _, s := range redistest.Start(t, 5) {
			nodes = append(nodes, s.Addr)
		}
	} else {
		t.Log("redis-server not found: redlock needs real servers and is left out")
	}
	var combos []matrix.Combo
	add := func(c config.Config, addrs []string, d redistest.Driver) *matrix.Combo {
		combo := matrix.FromAddrs(c.Strategy+"/"+c.Driver, addrs, d, builder(c))
		// MutualExclusion at its full size (2000 acquisitions) runs on the
		// same strategies and drivers in their own packages: here a
		// quarter checks that config builds them alike.
		combo.Harness.Acquisitions = 500
		combo.Harness.NewWithNilConn = func() (*lock.Locker, error) {
			c := c
			c.Addrs, c.Driver = addrs, nilDriver
			l, err := config.Open(c)
			if err != nil {
				return nil, err // not a nil *Locker in a non-nil Locker
			}
			return l, nil
		}
		combos = append(combos, combo)
		return &combos[len(combos)-1]
	}
	// Each strategy over another driver: drivers[i] for the i-th.
	add(config.Config{Strategy: "single", Driver: drivers[0].name}, []string{addr}, testDriver(t, drivers[0].test))
	legacy := add(config.Config{Strategy: "setnx-getset", Driver: drivers[1].name, TimestampFormat: "ms", SafetyTTL: time.Second}, []string{addr}, testDriver(t, drivers[1].test))
	legacy.Harness.ExtraTTL, legacy.Harness.Skip = 2*time.Millisecond, matrix.SetnxGetsetSkips
	if real {
		// The node timeout is redlock's default, derived from each call's
		// TTL: 1s at the suite's long TTL. A test process under -race on
		// two busy cores stalls for up to ~400ms at a time, and
		// ExactlyOneWinner's 32 Lockers over 5 nodes each took 500ms nodes
		// past their timeouts. Short ones are the strategy's own tests'
		// business.
		redlock := add(config.Config{Strategy: "redlock", Driver: drivers[2].name}, nodes, testDriver(t, drivers[2].test))
		redlock.Harness.ShortTTL, redlock.Harness.Skip = matrix.RedlockShortTTL, matrix.RedlockSkips
	}
	matrix.Run(t, combos, 0)
}

// nilDriver is a registered driver whose connections are nil, as a broken
// third-party driver's could be.
const nilDriver = "test-nil"

func init() {
	config.RegisterDriver(nilDriver, config.Driver{Topologies: []string{"sentinel", "cluster"}, Open: func(config.Endpoint) (driver.Conn, io.Closer, error) {
		return nil, nil, nil
	}})
}

// clients returns how many clients are connected to s, this one included.
func clients(t *testing.T, s *redistest.Server) int {
	t.Helper()
	info, err := s.Command(context.Background(), "INFO", "clients")
	if err != nil {
		t.Fatalf("INFO clients on %s: %v", s.Addr, err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "connected_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatalf("INFO clients on %s has no connected_clients: %q", s.Addr, info)
	return 0
}

// eventually polls cond for up to 10s (a generous bound for a busy
// machine), and reports whether it came true.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// contend has workers obtain and release keys at once, so that pools open
// several connections.
func contend(t *testing.T, l *lock.Locker, workers int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				lk, err := l.Obtain(ctx, fmt.Sprintf("contend:%d:%d", w, i), 10*time.Second)
				if err == nil {
					err = lk.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Obtain and Release: %v", err)
	}
}

// TestCloseLeavesNoConnection: Close closes every client the Locker
// opened, on every server, for each strategy × driver.
// TestOpenAddsTheDefaultPort: a Config built in Go may name a server
// without its port, as the URL may; Open does not connect, so no server is
// touched.
func TestOpenAddsTheDefaultPort(t *testing.T) {
	c := config.Config{Strategy: "single", Addrs: []string{"127.0.0.1"}}
	if got, want := c.Defaults().Addrs, []string{"127.0.0.1:6379"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestCloseLeavesNoConnection(t *testing.T) {
	for _, strategy := range []string{"single", "setnx-getset", "redlock"} {
		for _, d := range drivers {
			t.Run(strategy+"/"+d.name, func(t *testing.T) {
				servers := redistest.Start(t, 1)
				if strategy == "redlock" {
					servers = redistest.Start(t, 3)
				}
				c := config.Config{Strategy: strategy, Driver: d.name, NodeTimeout: 2 * time.Second}
				before := make([]int, len(servers))
				for i, s := range servers {
					c.Addrs = append(c.Addrs, s.Addr)
					before[i] = clients(t, s)
				}
				goroutines := runtime.NumGoroutine()
				l := open(t, c)
				contend(t, l, 8)
				for i, s := range servers {
					if n := clients(t, s); n <= before[i] {
						t.Fatalf("clients of %s while open = %d, want more than the %d before Open", s.Addr, n, before[i])
					}
				}
				if err := l.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				for i, s := range servers {
					if !eventually(func() bool { return clients(t, s) == before[i] }) {
						t.Errorf("clients of %s after Close = %d, want %d as before Open", s.Addr, clients(t, s), before[i])
					}
				}
				if !eventually(func() bool { return runtime.NumGoroutine() <= goroutines }) {
					var stacks strings.Builder
					_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
					t.Errorf("goroutines after Close = %d, want at most the %d before Open; they are:\n%s", runtime.NumGoroutine(), goroutines, stacks.String())
				}
			})
		}
	}
}

// TestPoolSize: no more than pool_size connections per server, however
// many callers.
func TestPoolSize(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			before := clients(t, s)
			l := open(t, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{s.Addr}, PoolSize: 2})
			done := make(chan struct{})
			peak := make(chan int)
			go func() {
				most := 0
				for {
					select {
					case <-done:
						peak <- most
						return
					default:
						most = max(most, clients(t, s)-before)
						time.Sleep(time.Millisecond)
					}
				}
			}()
			contend(t, l, 16)
			close(done)
			if got := <-peak; got > 2 || got < 1 {
				t.Errorf("peak connections = %d, want 1 or 2 (pool_size=2)", got)
			}
		})
	}
}

// TestReadTimeout: a call without a deadline on a server that stopped
// answering ends with the read timeout's error.
func TestReadTimeout(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t, 1)[0]
			l := open(t, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{s.Addr}, ReadTimeout: 100 * time.Millisecond})
			lk, err := l.Obtain(context.Background(), "warm-up", time.Second) // connect first
			if err != nil {
				t.Fatalf("Obtain: %v", err)
			}
			_ = lk.Release(context.Background())
			s.Pause()
			defer s.Resume()
			done := make(chan error, 1)
			go func() {
				_, err := l.Obtain(context.Background(), "paused", time.Second)
				done <- err
			}()
			select {
			case err := <-done:
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					t.Fatalf("Obtain on a paused server = %v, want a network timeout", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Obtain on a paused server with read_timeout=100ms still waits after 30s")
			}
		})
	}
}

// TestDatabase: the locks live in the configured database.
func TestDatabase(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	for i, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			db := 3 + i
			l := open(t, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{s.Addr}, DB: db})
			lk, err := l.Obtain(context.Background(), "in-db", time.Minute)
			if err != nil {
				t.Fatalf("Obtain: %v", err)
			}
			defer lk.Release(context.Background())
			info, err := s.Command(context.Background(), "INFO", "keyspace")
			if want := fmt.Sprintf("db%d:keys=1,", db); err != nil || !strings.Contains(info, want) {
				t.Fatalf("INFO keyspace = %q, %v; want %s", info, err, want)
			}
		})
	}
}

// TestACL: a username and password authenticate, and a wrong password
// fails without showing itself.
func TestACL(t *testing.T) {
	const password = "Pa55-word-of-alice"
	s := redistest.Start(t, 1, "--user", "alice", "on", ">"+password, "~*", "+@all")[0]
	for _, d := range drivers {
		t.Run(d.name+"/the right password locks", func(t *testing.T) {
			l := open(t, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{s.Addr}, Username: "alice", Password: password})
			lk, err := l.Obtain(context.Background(), "acl", time.Second)
			if err != nil {
				t.Fatalf("Obtain: %v", err)
			}
			if err := lk.Release(context.Background()); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
		t.Run(d.name+"/a wrong password fails, and stays secret", func(t *testing.T) {
			const wrong = "Wr0ng-password-of-alice"
			l := open(t, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{s.Addr}, Username: "alice", Password: wrong})
			_, err := l.Obtain(context.Background(), "acl", time.Second)
			if err == nil || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("Obtain with a wrong password = %v, want an authentication error", err)
			}
			if strings.Contains(err.Error(), wrong) {
				t.Fatalf("the error %q shows the password", err)
			}
		})
	}
}

// TestTLS: a TLS-only server with a certificate made for the test.
func TestTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	s := redistest.StartTLS(t, pki)
	ctx := context.Background()
	trusted := config.TLS{Enabled: true, CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}
	for _, d := range drivers {
		obtain := func(t *testing.T, tls config.TLS) error {
			t.Helper()
			l := open(t, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{s.Addr}, TLS: tls, DialTimeout: 5 * time.Second})
			lk, err := l.Obtain(ctx, "tls:"+t.Name(), time.Second) // a key of its own: the cases run in parallel
			if err == nil {
				err = lk.Release(ctx)
			}
			return err
		}
		t.Run(d.name+"/the CA and a client certificate lock", func(t *testing.T) {
			t.Parallel()
			if err := obtain(t, trusted); err != nil {
				t.Fatalf("Obtain and Release over TLS: %v", err)
			}
		})
		t.Run(d.name+"/the server's name is checked", func(t *testing.T) {
			t.Parallel()
			tls := trusted
			tls.ServerName = "not-the-server.example"
			if err := obtain(t, tls); err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("Obtain with another server name = %v, want a certificate error", err)
			}
		})
		t.Run(d.name+"/without the CA, the certificate is not trusted", func(t *testing.T) {
			t.Parallel()
			tls := trusted
			tls.CAFile = ""
			if err := obtain(t, tls); err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("Obtain without the CA = %v, want a certificate error", err)
			}
		})
		t.Run(d.name+"/without a client certificate, the server refuses", func(t *testing.T) {
			t.Parallel()
			tls := trusted
			tls.CertFile, tls.KeyFile = "", ""
			if err := obtain(t, tls); err == nil || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("Obtain without a client certificate = %v, want an error", err)
			}
		})
		t.Run(d.name+"/skip-verify accepts any certificate (unsafe)", func(t *testing.T) {
			t.Parallel()
			tls := trusted
			tls.CAFile, tls.InsecureSkipVerify = "", true
			if err := obtain(t, tls); err != nil {
				t.Fatalf("Obtain with tls_insecure_skip_verify: %v", err)
			}
		})
		t.Run(d.name+"/plain TCP fails", func(t *testing.T) {
			t.Parallel()
			if err := obtain(t, config.TLS{}); err == nil || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("Obtain over plain TCP = %v, want an error", err)
			}
		})
	}
}

// TestTLSToAServerWithoutTLS: with tls=true against a server that speaks
// plain TCP, where the TLS handshake never finishes, Obtain says that Redis
// did not answer because the handshake never finished; its error matches
// ErrNoAnswer, never ErrNotObtained, on every driver.
func TestTLSToAServerWithoutTLS(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			l := open(t, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{s.Addr},
				TLS: config.TLS{Enabled: true, InsecureSkipVerify: true}, DialTimeout: 500 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := l.Obtain(ctx, "tls:"+t.Name(), time.Minute)
			if !errors.Is(err, lock.ErrNoAnswer) || errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("Obtain: got %v, want an error matching lock.ErrNoAnswer, not lock.ErrNotObtained", err)
			}
			if want := "TLS handshake with " + s.Addr + " never finished"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Obtain: got %v, want it to say %q", err, want)
			}
		})
	}
}

// blockingDriver is a registered driver whose EvalSha waits for blocked to
// close, and which records when calls end and clients close.
const blockingDriver = "test-blocking"

var blocking struct {
	entered, blocked chan struct{}
	mu               sync.Mutex
	events           []string
}

func (b *blockingConn) record(e string) {
	blocking.mu.Lock()
	blocking.events = append(blocking.events, e)
	blocking.mu.Unlock()
}

// blockingConn blocks in the command that a first attempt sends, and then
// grants it: the acquire script at a Locker's first contact with a server
// (single's detection of a server that refuses scripts), a bare SET NX PX
// after.
type blockingConn struct{ driver.Conn }

func (b *blockingConn) SetNX(context.Context, string, string, time.Duration) (bool, error) {
	b.block()
	return true, nil
}

func (b *blockingConn) EvalSha(context.Context, string, []string, ...any) (any, error) {
	b.block()
	return int64(1), nil // the acquire script's: the lock is ours
}

func (b *blockingConn) block() {
	blocking.entered <- struct{}{}
	<-blocking.blocked
	b.record("the attempt returned")
}

func (b *blockingConn) Close() error { b.record("client closed"); return nil }

func init() {
	config.RegisterDriver(blockingDriver, config.Driver{Open: func(config.Endpoint) (driver.Conn, io.Closer, error) {
		c := &blockingConn{}
		return c, c, nil
	}})
}

// TestCloseWaitsForCallsInFlight: Close closes the clients only once the
// calls in flight have returned, and calls after it fail with ErrClosed.
func TestCloseWaitsForCallsInFlight(t *testing.T) {
	blocking.entered, blocking.blocked, blocking.events = make(chan struct{}), make(chan struct{}), nil
	l, err := config.Open(config.Config{Strategy: "single", Driver: blockingDriver, Addrs: []string{"h"}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = l.Obtain(context.Background(), "k", time.Second) }()
	<-blocking.entered
	closed := make(chan error)
	go func() { closed <- l.Close() }()
	time.Sleep(20 * time.Millisecond) // time for a Close that does not wait to finish
	close(blocking.blocked)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if want := []string{"the attempt returned", "client closed"}; !slices.Equal(blocking.events, want) {
		t.Fatalf("events = %q, want %q", blocking.events, want)
	}
}

// TestCallsAfterClose: a lock obtained before Close cannot be released after
// it, and says why; Close waits for the work that calls left running in the
// background (a waiter's leaving the queue), and a Redlock Obtain whose
// clean-ups still run in the background when Close comes leaves no call on
// a closed client.
func TestCallsAfterClose(t *testing.T) {
	ctx := context.Background()
	for _, d := range drivers {
		t.Run(d.name+"/Release after Close is ErrClosed", func(t *testing.T) {
			t.Parallel()
			l := open(t, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{redistest.Start(t, 1)[0].Addr}})
			lk, err := l.Obtain(ctx, "after-close:"+d.name, time.Second)
			if err != nil {
				t.Fatalf("Obtain: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := lk.Release(ctx); !errors.Is(err, lock.ErrClosed) {
				t.Fatalf("Release after Close = %v, want ErrClosed", err)
			}
		})
		t.Run(d.name+"/a nil ctx after Close is an ArgumentError", func(t *testing.T) {
			t.Parallel()
			l := open(t, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{redistest.Start(t, 1)[0].Addr}})
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			var none context.Context
			_, obtainErr := l.Obtain(none, "k", time.Second)
			_, inspectErr := l.Inspect(none, "k")
			_, breakErr := l.Break(none, "k", "")
			for call, err := range map[string]error{"Obtain": obtainErr, "Inspect": inspectErr, "Break": breakErr} {
				if ae := (*lock.ArgumentError)(nil); !errors.As(err, &ae) || ae.Name != "ctx" {
					t.Errorf("%s with a nil ctx after Close = %v, want an *ArgumentError named ctx", call, err)
				}
			}
		})
		t.Run(d.name+"/Close right after a waiting Obtain gave up leaves the queue", func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t, 1)[0]
			c := config.Config{Strategy: "single", Driver: d.name, Addrs: []string{s.Addr}, Retry: "linear:1m"}
			key := "gave-up:" + d.name
			held, err := open(t, c).Obtain(ctx, key, time.Minute)
			if err != nil {
				t.Fatalf("Obtain: %v", err)
			}
			defer held.Release(ctx)
			l := open(t, c)
			waiting, cancel := context.WithCancel(ctx)
			defer cancel()
			queued := lock.WithHooks(&lock.Hooks{Wait: func(_ context.Context, e lock.Event) {
				if e.Op == "enqueued" {
					cancel()
				}
			}})
			if _, err := l.Obtain(waiting, key, time.Minute, queued); !errors.Is(err, context.Canceled) {
				t.Fatalf("Obtain cancelled while queued = %v, want context.Canceled", err)
			}
			if err := l.Close(); err != nil { // the waiter leaves the queue in the background
				t.Fatalf("Close: %v", err)
			}
			if got, err := s.Command(ctx, "ZCARD", "{"+key+"}:q"); got != "0" || err != nil {
				t.Errorf("waiters after Close = %q (%v), want 0: Close waits for the waiter to leave", got, err)
			}
		})
		t.Run(d.name+"/Close right after a Redlock Obtain failed fast", func(t *testing.T) {
			t.Parallel()
			servers := redistest.Start(t, 3)
			c := config.Config{Strategy: "redlock", Driver: d.name, Addrs: addrsOf(servers), NodeTimeout: 200 * time.Millisecond}
			held, err := open(t, c).Obtain(ctx, "failed-fast:"+d.name, time.Minute)
			if err != nil {
				t.Fatalf("Obtain: %v", err)
			}
			defer held.Release(ctx)
			servers[2].Pause() // its answer is still pending when the others said taken
			defer servers[2].Resume()
			l := open(t, c)
			if _, err := l.Obtain(ctx, "failed-fast:"+d.name, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("Obtain of a held key = %v, want ErrNotObtained", err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
		})
	}
}

// TestWait: a Locker waits by notification by default, and polls with
// wait=poll or over a driver that cannot subscribe; a notified waiter whose
// timer is a minute is woken by the release, and Close closes the
// subscriber's connection too.
func TestWait(t *testing.T) {
	for _, d := range drivers {
		for _, wait := range []string{"", "notify", "poll"} {
			t.Run(d.name+"/wait="+wait, func(t *testing.T) {
				s := redistest.Start(t, 1)[0]
				before, goroutines := clients(t, s), runtime.NumGoroutine()
				l, err := config.Open(config.Config{Strategy: "single", Driver: d.name, Addrs: []string{s.Addr}, Retry: "linear:1m", Wait: wait})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				// Every built-in driver subscribes: only poll polls.
				polls := wait == "poll"
				retry := lock.WithRetry(lock.Linear(time.Minute))
				if polls {
					retry = lock.WithRetry(lock.Linear(10 * time.Millisecond))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				holder, err := l.Obtain(ctx, "wait", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				var ops []string
				queued := make(chan struct{}, 1)
				hooks := lock.WithHooks(&lock.Hooks{Wait: func(_ context.Context, e lock.Event) {
					mu.Lock()
					ops = append(ops, e.Op)
					mu.Unlock()
					select {
					case queued <- struct{}{}:
					default:
					}
				}})
				done := make(chan error, 1)
				go func() {
					lk, err := l.Obtain(ctx, "wait", time.Minute, hooks, retry)
					if err == nil {
						err = lk.Release(ctx)
					}
					done <- err
				}()
				if !polls {
					select {
					case <-queued: // the release wakes it, by its message or by the subscription's confirmation
					case err := <-done:
						t.Fatalf("waiter's Obtain = %v before it was queued, want it to wait", err)
					}
				}
				if err := holder.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatalf("waiter's Obtain = %v, want a lock", err)
				}
				mu.Lock()
				defer mu.Unlock()
				if polls && len(ops) != 0 {
					t.Errorf("Wait events = %v, want none: a poller neither queues nor listens", ops)
				}
				if !polls && (len(ops) == 0 || ops[0] != "enqueued") {
					t.Errorf("Wait events = %v, want enqueued first: a waiter queues and listens", ops)
				}
				if err := l.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				if !eventually(func() bool { return clients(t, s) == before }) {
					t.Errorf("clients after Close = %d, want %d as before Open", clients(t, s), before)
				}
				if !eventually(func() bool { return runtime.NumGoroutine() <= goroutines }) {
					var stacks strings.Builder
					_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
					t.Errorf("goroutines after Close = %d, want at most the %d before Open; they are:\n%s", runtime.NumGoroutine(), goroutines, stacks.String())
				}
			})
		}
	}
}

// TestConns: OpenConns opens a connection per server in the order of
// Addrs, for tools that send commands of their own; they fail with
// ErrClosed after Close.
func TestConns(t *testing.T) {
	servers := redistest.Start(t, 3)
	addrs := []string{servers[2].Addr, servers[0].Addr, servers[1].Addr}
	ctx := context.Background()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			conns, l, err := config.OpenConns(config.Config{Strategy: "redlock", Driver: d.name, Addrs: addrs})
			if err != nil {
				t.Fatal(err)
			}
			if len(conns) != len(addrs) {
				t.Fatalf("Conns: got %d, want %d", len(conns), len(addrs))
			}
			for i, c := range conns {
				if got := driver.Addr(c); got != addrs[i] {
					t.Errorf("Conns()[%d]: got %s, want %s", i, got, addrs[i])
				}
				reply, err := driver.Do(ctx, c, "INFO", "server")
				info, _ := reply.(string)
				want := "tcp_port:" + addrs[i][strings.LastIndex(addrs[i], ":")+1:] + "\r\n"
				if err != nil || !strings.Contains(info, want) {
					t.Errorf("INFO server on %s: got %T %.40q…, %v; want a string with %q", addrs[i], reply, info, err, want)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if _, err := driver.Do(ctx, conns[0], "PING"); !errors.Is(err, lock.ErrClosed) {
				t.Errorf("Do after Close: got %v, want ErrClosed", err)
			}
		})
	}
}

// TestReplicas: replicas=N from a URL reaches single.WithReplicas, over
// each driver: a master with a replica grants the lock, one without refuses
// it with a *single.ReplicaError.
func TestReplicas(t *testing.T) {
	master := redistest.Start(t, 1)[0]
	redistest.StartReplica(t, master.Addr)
	alone := redistest.Start(t, 1)[0]
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			t.Run("a replica acknowledges: obtained", func(t *testing.T) {
				c, err := config.ParseURL("single://" + master.Addr + "?driver=" + d.name + "&replicas=1&replica_timeout=10s")
				if err != nil {
					t.Fatal(err)
				}
				lk, err := open(t, c).Obtain(ctx, "replicas:"+d.name, time.Minute)
				if err != nil {
					t.Fatalf("Obtain: got %v, want nil", err)
				}
				if err := lk.Release(ctx); err != nil {
					t.Errorf("Release: got %v, want nil", err)
				}
			})
			t.Run("no replica: a *single.ReplicaError", func(t *testing.T) {
				c, err := config.ParseURL("single://" + alone.Addr + "?driver=" + d.name + "&replicas=1")
				if err != nil {
					t.Fatal(err)
				}
				_, err = open(t, c).Obtain(ctx, "replicas:"+d.name, time.Minute)
				var re *single.ReplicaError
				if !errors.As(err, &re) || re.Want != 1 {
					t.Errorf("Obtain: got %v, want a *single.ReplicaError wanting 1 replica", err)
				}
			})
		})
	}
}

// TestWithoutScripts: without_scripts=true from a URL marks the
// connections of single, setnx-getset and redlock driver.WithoutScripts,
// over each driver: a user denied @scripting obtains, refreshes and releases, where
// the same URL without the setting obtains (by SET NX) but cannot release:
// the server refuses the script; but for single, which finds the refusal
// at its first contact and locks without scripts there.
func TestWithoutScripts(t *testing.T) {
	const password = "Pa55-word-of-noscript"
	s := redistest.Start(t, 1, "--user", "noscript", "on", ">"+password, "~*", "&*", "+@all", "-@scripting")[0]
	for _, st := range []string{"single", "setnx-getset", "redlock"} {
		for _, d := range drivers {
			testWithoutScripts(t, st+"://noscript:"+password+"@"+s.Addr+"?driver="+d.name, st+"/"+d.name)
		}
	}
}

func testWithoutScripts(t *testing.T, base, name string) {
	t.Run(name+"/without_scripts=true: obtained, refreshed, released", func(t *testing.T) {
		c, err := config.ParseURL(base + "&without_scripts=true")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		lk, err := open(t, c).Obtain(ctx, "noscript:"+name, time.Minute)
		if err != nil {
			t.Fatalf("Obtain: got %v, want nil", err)
		}
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Errorf("Refresh: got %v, want nil", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release: got %v, want nil", err)
		}
	})
	if strings.HasPrefix(name, "single/") {
		t.Run(name+"/unset: found at the first contact, obtained and released", func(t *testing.T) {
			c, err := config.ParseURL(base)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			lk, err := open(t, c).Obtain(ctx, "scripted:"+name, time.Minute)
			if err != nil {
				t.Fatalf("Obtain: got %v, want nil", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release: got %v, want nil", err)
			}
		})
		return
	}
	t.Run(name+"/unset: a script is refused", func(t *testing.T) {
		c, err := config.ParseURL(base)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		// setnx-getset obtains by SETNX, and its release is a script;
		// redlock's first contact with a node is a script.
		lk, err := open(t, c).Obtain(ctx, "scripted:"+name, time.Minute)
		if err == nil {
			err = lk.Release(ctx)
		}
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("Obtain, then Release: got %v, want the server's NOPERM", err)
		}
	})
}
