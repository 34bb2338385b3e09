package elect_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/redlock"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
	"github.com/locksmith-go/lock/strategy/single"
)

func TestMain(m *testing.M) {
	// The election suite waits for a cancelled campaign's subscription to
	// go: after 100ms rather than the 30s a process keeps one for the next
	// waiter.
	notify.SetLinger(100 * time.Millisecond)
	redistest.Parallel(8) // the tests wait on servers and timers
	os.Exit(m.Run())
}

// counter is single's fencing counter of key, which numbers its terms.
func counter(key string) string {
	k, _ := single.FenceKey(key)
	return k
}

// TestConformance runs the election suite over every driver, on a server
// that keeps its data across a restart (appendfsync always).
func TestConformance(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	_, err := redistest.Binary()
	real := err == nil || redistest.Required()
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			// A server of its own, which its restart stops for nobody else.
			var srv *redistest.Server
			var addr string
			if real {
				srv = redistest.Start(t, 1, "--appendonly", "yes", "--appendfsync", "always")[0]
				addr = srv.Addr
			} else {
				addr, _ = redistest.Addr(t)
			}
			h := conformance.ElectorHarness{
				NewLocker: func(t *testing.T) *lock.Locker {
					l, err := single.New(d.Conn(t, addr))
					if err != nil {
						t.Fatal(err)
					}
					return l
				},
				Conn:    func(t *testing.T) driver.Conn { return d.Conn(t, addr) },
				Counter: counter,
			}
			if real {
				h.Pause = func(t *testing.T, d time.Duration) {
					srv.Pause()
					time.Sleep(d)
					srv.Resume()
				}
				h.Restart = func(t *testing.T) {
					if err := srv.Restart(); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				h.Skip = map[string]string{
					"LossBeforeNextLeaderWhenPaused": "the embedded server cannot be paused",
					"TermsIncreaseAcrossRestart":     "the embedded server cannot be restarted",
				}
			}
			conformance.RunElector(t, h)
		})
	}
	unpaused := map[string]string{
		"LossBeforeNextLeaderWhenPaused": "the harness pauses single servers only",
		"TermsIncreaseAcrossRestart":     "the harness restarts single servers only",
	}
	t.Run("without scripts", func(t *testing.T) {
		t.Parallel()
		addr, _ := redistest.Addr(t)
		conn := func(t *testing.T) driver.Conn { return driver.WithoutScripts(redistest.Drivers()[0].Conn(t, addr)) }
		skip := maps.Clone(unpaused)
		skip["HandoverWakesTheNext"] = "without scripts there is no queue: a candidate polls, and a release wakes nobody"
		conformance.RunElector(t, conformance.ElectorHarness{
			NewLocker: func(t *testing.T) *lock.Locker {
				l, err := single.New(conn(t))
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
			Conn:    func(t *testing.T) driver.Conn { return redistest.Drivers()[0].Conn(t, addr) },
			Counter: counter, Skip: skip,
		})
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		if !real {
			t.Skip("the embedded server cannot be a Cluster")
		}
		addrs := redistest.StartCluster(t, 3).Addrs()
		conn := func(t *testing.T) driver.Conn { return goredis.New(redistest.GoRedisCluster(t, addrs)) }
		conformance.RunElector(t, conformance.ElectorHarness{
			NewLocker: func(t *testing.T) *lock.Locker {
				l, err := single.New(conn(t))
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
			Conn: conn, Counter: counter, Skip: unpaused,
		})
	})
}

func TestNew(t *testing.T) {
	addr, _ := redistest.Addr(t)
	conn := redistest.Drivers()[0].Conn(t, addr)
	l, err := single.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("refuses a strategy without fencing tokens", func(t *testing.T) {
		legacy, err := setnxgetset.New(conn)
		if err != nil {
			t.Fatal(err)
		}
		rl, err := redlock.New([]driver.Conn{conn})
		if err != nil {
			t.Fatal(err)
		}
		for name, l := range map[string]*lock.Locker{"setnx-getset": legacy, "redlock": rl} {
			_, err := elect.New(l, "k")
			var a *lock.ArgumentError
			if !errors.As(err, &a) || a.Name != "locker" || !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("New over %s = %v, want an *ArgumentError named locker matching errors.ErrUnsupported", name, err)
			}
		}
	})
	for _, c := range []struct {
		name   string
		locker *lock.Locker
		key    string
		opts   []elect.Option
		want   string
	}{
		{"nil locker", nil, "k", nil, "locker"},
		{"empty key", l, "", nil, "key"},
		{"lease under 30ms", l, "k", []elect.Option{elect.WithLease(29 * time.Millisecond)}, "lease"},
		{"stop grace of half the lease", l, "k", []elect.Option{elect.WithLease(time.Second), elect.WithStopGrace(500 * time.Millisecond)}, "stop grace"},
		{"negative stop grace", l, "k", []elect.Option{elect.WithStopGrace(-time.Second)}, "stop grace"},
		{"interval under 1ms", l, "k", []elect.Option{elect.WithInterval(time.Microsecond)}, "interval"},
		{"identity that opens a stamp", l, "k", []elect.Option{elect.WithIdentity("\x1eweb-3")}, "identity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := elect.New(c.locker, c.key, c.opts...)
			var a *lock.ArgumentError
			if !errors.As(err, &a) || a.Name != c.want {
				t.Errorf("New = %v, want an *ArgumentError named %q", err, c.want)
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		e, err := elect.New(l, "k")
		if err != nil {
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		if e.Lease() != 15*time.Second || e.StopGrace() != 3*time.Second || e.Interval() != time.Second || e.Identity() == "" || e.Key() != "k" {
			t.Errorf("lease %v, stop grace %v, interval %v, identity %q, key %q; want 15s, 3s, 1s, %q pid=…, k", e.Lease(), e.StopGrace(), e.Interval(), e.Identity(), e.Key(), host)
		}
	})
	t.Run("nil ctx", func(t *testing.T) {
		e, err := elect.New(l, "k")
		if err != nil {
			t.Fatal(err)
		}
		var a *lock.ArgumentError
		//lint:ignore SA1012 a nil ctx is what is tested
		if _, err := e.Campaign(nil); !errors.As(err, &a) || a.Name != "ctx" {
			t.Errorf("Campaign(nil) = %v, want an *ArgumentError named ctx", err)
		}
		//lint:ignore SA1012 a nil ctx is what is tested
		if err := e.Run(nil, func(context.Context, *elect.Term) error { return nil }); !errors.As(err, &a) || a.Name != "ctx" {
			t.Errorf("Run(nil, …) = %v, want an *ArgumentError named ctx", err)
		}
		if err := e.Run(context.Background(), nil); !errors.As(err, &a) || a.Name != "lead" {
			t.Errorf("Run(ctx, nil) = %v, want an *ArgumentError named lead", err)
		}
		//lint:ignore SA1012 a nil ctx is what is tested
		if err := e.IsLeader(nil); !errors.As(err, &a) || a.Name != "ctx" {
			t.Errorf("IsLeader(nil) = %v, want an *ArgumentError named ctx", err)
		}
		//lint:ignore SA1012 a nil ctx is what is tested
		if _, err := e.Leader(nil); !errors.As(err, &a) || a.Name != "ctx" {
			t.Errorf("Leader(nil) = %v, want an *ArgumentError named ctx", err)
		}
	})
}

func TestIsLeader(t *testing.T) {
	addr, _ := redistest.Addr(t)
	l, err := single.New(redistest.Drivers()[0].Conn(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	e, err := elect.New(l, conformance.Key(t), elect.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Run("before a term", func(t *testing.T) {
		if err := e.IsLeader(ctx); !errors.Is(err, elect.ErrNotLeader) {
			t.Errorf("IsLeader = %v, want ErrNotLeader", err)
		}
	})
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("in a term", func(t *testing.T) {
		if err := e.IsLeader(ctx); err != nil {
			t.Errorf("IsLeader = %v, want nil", err)
		}
	})
	t.Run("with ctx done", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := e.IsLeader(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("IsLeader = %v, want context.Canceled", err)
		}
	})
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	t.Run("after Resign", func(t *testing.T) {
		if err := e.IsLeader(ctx); !errors.Is(err, elect.ErrNotLeader) {
			t.Errorf("IsLeader = %v, want ErrNotLeader", err)
		}
		if err := term.Err(); !errors.Is(err, elect.ErrResigned) || !errors.Is(err, elect.ErrNotLeader) {
			t.Errorf("Err = %v, want ErrResigned, matching ErrNotLeader", err)
		}
		if !term.ValidUntil().IsZero() {
			t.Errorf("ValidUntil = %v, want the zero time", term.ValidUntil())
		}
	})
}

func TestRun(t *testing.T) {
	redistest.RequireBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Run("campaigns through an outage of the server", func(t *testing.T) {
		srv := redistest.Start(t, 1)[0]
		l, err := single.New(redistest.Drivers()[0].Conn(t, srv.Addr))
		if err != nil {
			t.Fatal(err)
		}
		srv.Kill()
		var failed atomic.Int64
		probe := elect.WithHooks(&elect.Hooks{Campaign: func(ctx context.Context, _ *elect.Elector, next func(context.Context) (*elect.Term, error)) (*elect.Term, error) {
			term, err := next(ctx)
			if err != nil && failed.Add(1) == 3 {
				if err := srv.Restart(); err != nil {
					t.Error(err)
				}
			}
			return term, err
		}})
		e, err := elect.New(l, conformance.Key(t), elect.WithLease(time.Second), elect.WithInterval(20*time.Millisecond), probe)
		if err != nil {
			t.Fatal(err)
		}
		err = e.Run(ctx, func(context.Context, *elect.Term) error { return errLed })
		if !errors.Is(err, errLed) {
			t.Errorf("Run = %v, want lead's error once the server is back", err)
		}
		if n := failed.Load(); n < 3 {
			t.Errorf("%d campaigns failed, want at least 3 while the server was down", n)
		}
	})
	t.Run("returns an error that will not pass", func(t *testing.T) {
		srv := redistest.Start(t, 1)[0]
		// An ACL that denies the election's keys.
		if _, err := srv.Command(ctx, "ACL", "SETUSER", "elsewhere", "reset", "on", ">secret", "~elsewhere:*", "&*", "+@all"); err != nil {
			t.Fatal(err)
		}
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "elsewhere", Password: "secret", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = client.Close() })
		l, err := single.New(goredis.New(client))
		if err != nil {
			t.Fatal(err)
		}
		e, err := elect.New(l, conformance.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		err = e.Run(ctx, func(context.Context, *elect.Term) error { return errLed })
		if err == nil || errors.Is(err, errLed) || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("Run under an ACL that denies the key = %v, want its NOPERM error", err)
		}
	})
	t.Run("a closed Locker", func(t *testing.T) {
		addr, _ := redistest.Addr(t)
		l, err := single.New(redistest.Drivers()[0].Conn(t, addr))
		if err != nil {
			t.Fatal(err)
		}
		e, err := elect.New(l, conformance.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Close()
		if err := e.Run(ctx, func(context.Context, *elect.Term) error { return errLed }); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Run over a closed Locker = %v, want ErrClosed", err)
		}
	})
	t.Run("a panic in lead releases", func(t *testing.T) {
		addr, _ := redistest.Addr(t)
		l, err := single.New(redistest.Drivers()[0].Conn(t, addr))
		if err != nil {
			t.Fatal(err)
		}
		e, err := elect.New(l, conformance.Key(t), elect.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("recovered %v, want lead's panic", r)
				}
			}()
			_ = e.Run(ctx, func(context.Context, *elect.Term) error { panic("boom") })
		}()
		if err := e.IsLeader(ctx); !errors.Is(err, elect.ErrNotLeader) {
			t.Errorf("IsLeader after lead panicked = %v, want ErrNotLeader", err)
		}
		if l, err := e.Leader(ctx); !errors.Is(err, elect.ErrNoLeader) {
			t.Errorf("Leader after lead panicked = %+v, %v, want ErrNoLeader: the lease released", l, err)
		}
	})
}

// errLed is what the leads of TestRun return.
var errLed = errors.New("led")

// TestOneLossSignal: a term's end stops its refreshes, so that a leader
// told it stepped down never revives its lease: none is sent after the
// end, while the lease runs out and the next candidate is elected.
func TestOneLossSignal(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		cut   atomic.Bool
		ended atomic.Bool
		after atomic.Int64 // the refreshes begun after the term ended
	)
	hooks := lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
		if e.Op != "refresh" {
			return next(ctx)
		}
		if ended.Load() {
			after.Add(1)
		}
		if cut.Load() {
			// Cut off: nothing reaches the server, and the refresh times
			// out at once, so that the refresher tries again soon.
			return fmt.Errorf("cut off: %w", context.DeadlineExceeded)
		}
		return next(ctx)
	}})
	key := conformance.Key(t)
	newElector := func(opts ...lock.Option) *elect.Elector {
		l, err := single.New(redistest.Drivers()[0].Conn(t, addr))
		if err != nil {
			t.Fatal(err)
		}
		// The stop grace leaves the refresher room for a retry before the
		// lease ends, which it must not send.
		e, err := elect.New(l.With(opts...), key, elect.WithLease(600*time.Millisecond), elect.WithStopGrace(250*time.Millisecond), elect.WithInterval(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	term, err := newElector(hooks).Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cut.Store(true)
	<-term.Done()
	ended.Store(true)
	if !errors.Is(term.Err(), elect.ErrStepDown) {
		t.Errorf("Err = %v, want ErrStepDown", term.Err())
	}
	next, err := newElector().Campaign(ctx) // once the lease has run out
	if err != nil {
		t.Fatal(err)
	}
	if n := after.Load(); n > 0 {
		t.Errorf("%d refreshes begun after the term ended, want none", n)
	}
	if err := next.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTermGuard: a term's guarded writes land while it leads, and a term
// whose key another candidate took (as after a pause past its lease)
// writes nothing and ends with an error matching ErrNotLeader, in both
// forms; a resigned term's are refused before anything is sent.
func TestTermGuard(t *testing.T) {
	addr, _ := redistest.Addr(t)
	conn := redistest.Drivers()[0].Conn(t, addr)
	l, err := single.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const set = `return redis.call('SET', KEYS[1], ARGV[1])`
	for _, form := range []struct {
		name  string
		write func(term *elect.Term, key, value string) error
	}{
		{"script", func(term *elect.Term, key, value string) error {
			_, err := term.Guard(ctx, set, []string{key}, value)
			return err
		}},
		{"commands", func(term *elect.Term, key, value string) error {
			_, err := term.GuardCommands(ctx, []string{key}, []any{"SET", key, value})
			return err
		}},
	} {
		t.Run(form.name, func(t *testing.T) {
			key := "{" + conformance.Key(t) + "}"
			data := key + ":config"
			e, err := elect.New(l, key, elect.WithLease(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			term, err := e.Campaign(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := form.write(term, data, "leader's"); err != nil {
				t.Fatalf("a leader's guarded write: got %v, want nil", err)
			}
			if _, _, err := conn.GetSet(ctx, key, "a successor's lease"); err != nil {
				t.Fatal(err)
			}
			if err := form.write(term, data, "stale"); !errors.Is(err, elect.ErrNotLeader) || !errors.Is(err, lock.ErrTaken) {
				t.Errorf("a deposed leader's guarded write: got %v, want ErrNotLeader and ErrTaken", err)
			}
			if v, _, _ := conn.Get(ctx, data); v != "leader's" {
				t.Errorf("the guarded key: got %q, want %q", v, "leader's")
			}
			if err := term.Err(); !errors.Is(err, elect.ErrNotLeader) {
				t.Errorf("Err: got %v, want ErrNotLeader", err)
			}
			if err := form.write(term, data, "later"); !errors.Is(err, elect.ErrNotLeader) {
				t.Errorf("an ended term's guarded write: got %v, want ErrNotLeader", err)
			}
		})
	}
}
