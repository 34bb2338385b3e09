package driver_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// deadline is the context timeout of the calls to a paused server, and
// bound how long after it they may return: a generous margin, for a loaded
// machine. Without the checks of New, the refused configurations return
// after 5s (go-redis's ReadTimeout), or not until the server resumes.
const (
	deadline = 200 * time.Millisecond
	bound    = time.Second
)

// calls returns every method of c, each with arguments that need no state,
// and a Get over a pinned Conn (driver.Pin), which every client of the
// test can pin: taking the connection is bounded too.
func calls(c driver.Conn) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"SetNX":   func(ctx context.Context) error { _, err := c.SetNX(ctx, "k", "v", time.Minute); return err },
		"Get":     func(ctx context.Context) error { _, _, err := c.Get(ctx, "k"); return err },
		"GetSet":  func(ctx context.Context) error { _, _, err := c.GetSet(ctx, "k", "v"); return err },
		"Del":     func(ctx context.Context) error { _, err := c.Del(ctx, "k"); return err },
		"PTTL":    func(ctx context.Context) error { _, _, err := c.PTTL(ctx, "k"); return err },
		"EvalSha": func(ctx context.Context) error { _, err := c.EvalSha(ctx, "0000", nil); return err },
		"Eval":    func(ctx context.Context) error { _, err := c.Eval(ctx, "return 1", nil); return err },
		"Pipeline": func(ctx context.Context) error {
			replies, err := driver.Pipeline(ctx, c, [][]any{{"GET", "k"}, {"GET", "k"}})
			for _, r := range replies {
				if e, ok := r.(error); ok && err == nil {
					err = e
				}
			}
			return err
		},
		"Pin": func(ctx context.Context) error {
			return driver.Pin(ctx, c, "k", func(one driver.Conn) error { _, _, err := one.Get(ctx, "k"); return err })
		},
	}
}

// TestDeadlineOnAPausedServer: with every client configuration that New
// accepts, every command to a paused (SIGSTOPped) server fails when its
// context ends, by its deadline or by its cancellation, on a connection
// opened before the pause (warm) and on one dialled during it (cold: the
// dial, and the handshake or SELECT it sends, are bounded too). A
// cancelled command's error matches context.Canceled. (go-redis bounds a
// command by its context's deadline alone: before goredis.Conn watched the
// cancellation, a cancelled command returned by the client's ReadTimeout,
// or never. rueidis bounds a connection's handshake by the deadline alone:
// before driver/rueidis's NewClient watched the cancellation, a cancelled
// command that dialled returned by Dialer.Timeout. A rueidis client opened
// otherwise still does, and retries without it.)
func TestDeadlineOnAPausedServer(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	cluster := redistest.StartCluster(t, 3)
	addr := srv.Addr
	goRedis := func(o redis.Options) func(t *testing.T) driver.Conn {
		return func(t *testing.T) driver.Conn {
			o.Addr, o.ContextTimeoutEnabled = addr, true
			c := redis.NewClient(&o)
			t.Cleanup(func() { _ = c.Close() })
			return goredis.New(c)
		}
	}
	type testOnBorrow = func(context.Context, redigoredis.Conn, time.Time) error
	pool := func(test testOnBorrow, opts ...redigoredis.DialOption) func(t *testing.T) driver.Conn {
		return func(t *testing.T) driver.Conn {
			p := &redigoredis.Pool{MaxIdle: 4, TestOnBorrowContext: test,
				DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
					return redigoredis.DialContext(ctx, "tcp", addr, opts...)
				}}
			t.Cleanup(func() { _ = p.Close() })
			return redigo.New(p)
		}
	}
	ping := func(ctx context.Context, c redigoredis.Conn, _ time.Time) error {
		_, err := redigoredis.DoContext(c, ctx, "PING")
		return err
	}
	for _, tc := range []struct {
		name     string
		conn     func(t *testing.T) driver.Conn
		servers  []*redistest.Server // paused; srv when nil
		nocancel bool                // only the deadline counts: a client opened without the driver's constructor
	}{
		{"goredis/defaults", goRedis(redis.Options{}), nil, false},
		{"goredis/no timeouts of its own", goRedis(redis.Options{ReadTimeout: -1, WriteTimeout: -1}), nil, false},
		{"goredis/RESP2 with retries", goRedis(redis.Options{Protocol: 2, MaxRetries: 5}), nil, false},
		{"goredis/Ring", func(t *testing.T) driver.Conn {
			c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ContextTimeoutEnabled: true, ReadTimeout: -1})
			t.Cleanup(func() { _ = c.Close() })
			return goredis.New(c)
		}, nil, false},
		{"goredis/ClusterClient", func(t *testing.T) driver.Conn {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true, ReadTimeout: -1})
			t.Cleanup(func() { _ = c.Close() })
			return goredis.New(c)
		}, cluster.Servers, false},
		{"redigo/no read timeout", pool(nil), nil, false},
		{"redigo/SELECT and CLIENT SETNAME on dial", pool(nil, redigoredis.DialDatabase(1), redigoredis.DialClientName("locksmith")), nil, false},
		{"redigo/TestOnBorrowContext", pool(ping), nil, false},
		{"rueidis/standalone", func(t *testing.T) driver.Conn { return rueidisdriver.New(redistest.Rueidis(t, addr)) }, nil, false},
		{"rueidis/standalone with retries", func(t *testing.T) driver.Conn {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			return rueidisdriver.New(c)
		}, nil, true},
		{"rueidis/Cluster", func(t *testing.T) driver.Conn {
			return rueidisdriver.New(redistest.RueidisCluster(t, cluster.Addrs()))
		}, cluster.Servers, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := tc.servers
			if servers == nil {
				servers = []*redistest.Server{srv}
			}
			for _, c := range []struct {
				warm   bool
				cancel bool // the context is cancelled after deadline, rather than timed out
			}{{true, false}, {false, false}, {true, true}, {false, true}} {
				if c.cancel && tc.nocancel {
					continue
				}
				warm := c.warm
				// Each method on a client of its own, all at once.
				names := slices.Sorted(maps.Keys(calls(nil)))
				todo := make([]func(context.Context) error, len(names))
				for i, name := range names {
					todo[i] = calls(tc.conn(t))[name]
					if !warm {
						continue
					}
					if err := todo[i](context.Background()); err != nil && !isServerError(err) {
						t.Fatalf("%s before the pause = %v, want a reply", name, err)
					}
				}
				resume := func() {
					for _, s := range servers {
						s.Resume()
					}
				}
				for _, s := range servers {
					s.Pause()
				}
				hung := time.AfterFunc(time.Minute, resume) // a call that ignores its context ends, and fails the test
				errs, took := make([]error, len(todo)), make([]time.Duration, len(todo))
				var wg sync.WaitGroup
				for i, call := range todo {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), deadline)
						if c.cancel {
							ctx, cancel = context.WithCancel(context.Background())
							time.AfterFunc(deadline, cancel)
						}
						defer cancel()
						start := time.Now()
						errs[i] = call(ctx)
						took[i] = time.Since(start)
					}()
				}
				wg.Wait()
				hung.Stop()
				resume()
				end := "deadline"
				if c.cancel {
					end = "cancellation"
				}
				for i, name := range names {
					t.Logf("warm=%v %s by %s: %v after %v", warm, name, end, errs[i], took[i].Round(time.Millisecond))
					if errs[i] == nil || took[i] > bound {
						t.Errorf("warm=%v: %s with a %v %s on a paused server = %v after %v, want an error well before %v",
							warm, name, deadline, end, errs[i], took[i], bound)
					}
					if c.cancel && !errors.Is(errs[i], context.Canceled) {
						t.Errorf("warm=%v: %s cancelled = %v, want an error matching %v", warm, name, errs[i], context.Canceled)
					}
				}
			}
		})
	}
}

// isServerError reports whether err is the server's answer, such as
// EVALSHA's NOSCRIPT: the connection works.
func isServerError(err error) bool {
	var goredisErr redis.Error
	var redigoErr redigoredis.Error
	_, rueidisErr := rueidis.IsRedisErr(err)
	return errors.As(err, &goredisErr) || errors.As(err, &redigoErr) || rueidisErr
}
