package lock_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestACLRules: the ACL rules that docs/acl.md gives for each strategy
// ("The rule of each strategy") let a user that may run nothing
// else obtain, inspect, refresh, read the TTL of and release a lock on a
// real server, with every option that sends more commands.
// guardKey is redlock's restart guard key, as docs/strategies.md names it.
const guardKey = "locksmith:redlock:up-since"

func TestACLRules(t *testing.T) {
	section := aclSection(t, "## The rule of each strategy")
	srv := redistest.Start(t, 1)[0]
	// A replica, so that WithReplicas' WAIT is answered: Obtain and Refresh
	// succeed only once it acknowledges their writes.
	redistest.StartReplica(t, srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A brand-new node, seeded as docs/strategies.md says, so the guard grants.
	if _, err := srv.Command(ctx, "SET", guardKey, "0"); err != nil {
		t.Fatal(err)
	}
	const base = "+evalsha +eval +get +set +pexpire +pttl +del"
	for _, c := range []struct {
		name  string
		rules []string // each as docs/acl.md gives it
		opts  []lock.Option
		newL  func(driver.Conn) (*lock.Locker, error)
	}{
		{"single", []string{base}, nil, newSingle},
		{"single WithFencing", []string{base, "+exists +time +incr"}, []lock.Option{lock.WithFencing()}, newSingle},
		{"single WithReplicas", []string{base, "+wait"}, nil, func(c driver.Conn) (*lock.Locker, error) {
			return single.New(c, single.WithReplicas(1, 10*time.Second))
		}},
		{"setnx-getset", []string{"+set +get +getset +evalsha +eval +pexpire +pttl +del"}, nil, func(c driver.Conn) (*lock.Locker, error) {
			return setnxgetset.New(c, setnxgetset.WithSafetyTTL(time.Minute))
		}},
		{"setnx-getset WithoutScripts", []string{"+set +get +getset +pexpire +pttl +del +watch +multi +exec +unwatch +discard"}, nil, newSetnxGetsetWithoutScripts},
		{"single WithoutScripts", []string{noScripts}, nil, newSingleWithoutScripts},
		{"single WithoutScripts WithFencing", []string{noScripts, "+exists +time +incr"}, []lock.Option{lock.WithFencing()}, newSingleWithoutScripts},
		{"redlock", []string{base}, nil, func(c driver.Conn) (*lock.Locker, error) { return redlock.New([]driver.Conn{c}) }},
		{"redlock WithoutScripts", []string{noScripts}, nil, newRedlockWithoutScripts},
		{"redlock WithRestartGuard", []string{base, "+time"}, nil, func(c driver.Conn) (*lock.Locker, error) {
			return redlock.New([]driver.Conn{c}, redlock.WithRestartGuard(time.Minute))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range c.rules {
				if !strings.Contains(section, "`"+r+"`") {
					t.Fatalf("docs/acl.md does not give the rule `%s` in \"The rule of each strategy\", want it there", r)
				}
			}
			user := strings.ReplaceAll(c.name, " ", "-")
			locker, err := c.newL(aclConn(t, ctx, srv, user, append([]string{"~lock:*", "~{lock:*", "~" + guardKey}, c.rules...)...))
			if err != nil {
				t.Fatal(err)
			}
			lk, err := locker.Obtain(ctx, "lock:"+user, time.Minute, c.opts...)
			if err != nil {
				t.Fatalf("Obtain = %v, want nil", err)
			}
			if st, err := locker.Inspect(ctx, "lock:"+user); err != nil || !st.Held {
				t.Errorf("Inspect = held %v, %v; want held, nil", st.Held, err)
			}
			if err := lk.Refresh(ctx, time.Minute); err != nil {
				t.Errorf("Refresh = %v, want nil", err)
			}
			if _, err := lk.TTL(ctx); err != nil {
				t.Errorf("TTL = %v, want nil", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release = %v, want nil", err)
			}
		})
	}
}

// TestACLInspect: single's Inspect, with scripts and without, reads the
// fencing counter in the same script or transaction as the lock where the
// user's ACL allows the counters' keys (without scripts, reading them is
// enough), and the lock alone, with Fence 0, where it does not: a user
// that never fences needs no more than the base rule, as docs/acl.md says.
func TestACLInspect(t *testing.T) {
	const rule = "~{lock:*"
	if !strings.Contains(aclSection(t, "## The rule of each strategy"), "`"+rule+"`") {
		t.Fatalf("docs/acl.md does not give the rule `%s` in \"The rule of each strategy\", want it there", rule)
	}
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name  string
		keys  []string
		fence map[string]bool // Inspect reads the counter, with scripts and without
	}{
		{"with the counters' keys", []string{"~lock:*", rule}, map[string]bool{"scripts": true, "without scripts": true}},
		{"with read access to them only", []string{"~lock:*", "%R~{lock:*"}, map[string]bool{"without scripts": true}},
		{"without them", []string{"~lock:*"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			user := "inspect-" + strings.NewReplacer(" ", "-", "'", "").Replace(c.name)
			conn := aclConn(t, ctx, srv, user, slices.Concat(c.keys, []string{"+evalsha +eval +get +set +pexpire +pttl +del", noScripts})...)
			key := "lock:" + user
			if _, err := srv.Command(ctx, "SET", "{"+key+"}:fence", "7"); err != nil {
				t.Fatal(err)
			}
			for name, newL := range map[string]func(driver.Conn) (*lock.Locker, error){"scripts": newSingle, "without scripts": newSingleWithoutScripts} {
				locker, err := newL(conn)
				if err != nil {
					t.Fatal(err)
				}
				lk, err := locker.Obtain(ctx, key, time.Minute, lock.WithMetadata("m"))
				if err != nil {
					t.Fatalf("%s: Obtain = %v, want nil", name, err)
				}
				st, err := locker.Inspect(ctx, key)
				if err != nil || !st.Held || st.Metadata != "m" {
					t.Errorf("%s: Inspect = held %v, metadata %q, %v; want held, \"m\", nil", name, st.Held, st.Metadata, err)
				}
				want := int64(0)
				if c.fence[name] {
					want = 7
				}
				if st.Fence != want {
					t.Errorf("%s: Inspect's Fence: got %d, want %d", name, st.Fence, want)
				}
				if err := lk.Release(ctx); err != nil {
					t.Errorf("%s: Release = %v, want nil", name, err)
				}
			}
		})
	}
}

// TestACLWaiting: the ACL rule that docs/acl.md's "Waiting by
// notification" gives lets a user wait by notification on a real server: a waiter whose
// timer is a minute is woken by the release's message. A user with the
// base rule alone is refused the queue, and waits as a poller.
func TestACLWaiting(t *testing.T) {
	section := aclSection(t, "## Waiting by notification")
	const (
		base = "+evalsha +eval +get +set +pexpire +pttl +del"
		wait = "+time +zadd +zrange +zrank +zrem +hset +hget +hdel +zscore +hincrby +exists +publish +subscribe +unsubscribe +ping"
	)
	for _, r := range []string{wait, "~{lock:*", "&{lock:*"} {
		if !strings.Contains(section, "`"+r+"`") {
			t.Fatalf("docs/acl.md does not give the rule `%s` in \"Waiting by notification\", want it there", r)
		}
	}
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newLocker := func(t *testing.T, user string, rules ...string) *lock.Locker {
		t.Helper()
		l, err := single.New(aclConn(t, ctx, srv, user, append([]string{"~lock:*", "~{lock:*", "&{lock:*"}, rules...)...))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	t.Run("the waiting rule: woken by the release's message", func(t *testing.T) {
		holder, waiter := newLocker(t, "holder", base, wait), newLocker(t, "waiter", base, wait)
		if got, want := wakeReasons(t, ctx, holder, waiter, "lock:wait"), []string{"subscribed", "message"}; !slices.Equal(got, want) {
			t.Errorf("wake reasons = %q, want %q", got, want)
		}
	})

	t.Run("the base rule alone: a waiting attempt falls back to an unqueued one, as WithPolling's", func(t *testing.T) {
		holder, waiter := newLocker(t, "holder-base", base), newLocker(t, "waiter-base", base)
		lk, err := holder.Obtain(ctx, "lock:base", time.Minute)
		if err != nil {
			t.Fatalf("Obtain = %v, want nil", err)
		}
		for _, poll := range []bool{false, true} {
			opts := []lock.Option{lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 2))}
			if poll {
				opts = append(opts, lock.WithPolling())
			}
			if _, err := waiter.Obtain(ctx, "lock:base", time.Minute, opts...); !errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("Obtain (polling: %v) = %v, want ErrNotObtained", poll, err)
			}
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release = %v, want nil: it falls back to a plain delete", err)
		}
	})
}

// TestACLHints: the rule that docs/acl.md gives for the wake-up hints of
// setnx-getset and Redlock ("The rule of each strategy") lets
// their waiters be woken by a release's message on a real server, with the
// lock keys and the channels alone: a waiter whose timer is a minute gets
// the lock once the holder releases it.
func TestACLHints(t *testing.T) {
	section := aclSection(t, "## The rule of each strategy")
	const hints = "+publish +subscribe +unsubscribe +ping"
	for _, r := range []string{hints, "&{lock:*"} {
		if !strings.Contains(section, "`"+r+"`") {
			t.Fatalf("docs/acl.md does not give the rule `%s` in \"The rule of each strategy\", want it there", r)
		}
	}
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name string
		rule string // the strategy's, as docs/acl.md gives it
		newL func(driver.Conn) (*lock.Locker, error)
	}{
		{"setnx-getset", "+set +get +getset +evalsha +eval +pexpire +pttl +del", func(c driver.Conn) (*lock.Locker, error) {
			return setnxgetset.New(c, setnxgetset.WithSafetyTTL(time.Minute))
		}},
		{"redlock", "+evalsha +eval +get +set +pexpire +pttl +del", func(c driver.Conn) (*lock.Locker, error) { return redlock.New([]driver.Conn{c}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			newLocker := func(user string) *lock.Locker {
				l, err := c.newL(aclConn(t, ctx, srv, user, "~lock:*", "&{lock:*", c.rule, hints))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			holder, waiter := newLocker(c.name+"-holder"), newLocker(c.name+"-waiter")
			if got, want := wakeReasons(t, ctx, holder, waiter, "lock:hints-"+c.name), []string{"subscribed", "message"}; !slices.Equal(got, want) {
				t.Errorf("wake reasons = %q, want %q", got, want)
			}
		})
	}
}

// aclConn creates (or resets) the ACL user user on srv, allowed acl (key
// patterns, channel patterns and commands, as docs/acl.md gives them) and
// nothing else, and returns a go-redis connection as that user, closed
// when t ends.
func aclConn(t *testing.T, ctx context.Context, srv *redistest.Server, user string, acl ...string) driver.Conn {
	return aclConnOver(t, ctx, srv, "goredis", user, acl...)
}

// aclConnOver is aclConn over the driver named d: goredis, redigo or
// rueidis.
func aclConnOver(t *testing.T, ctx context.Context, srv *redistest.Server, d, user string, acl ...string) driver.Conn {
	t.Helper()
	setuser := append([]string{"ACL", "SETUSER", user, "reset", "on", ">secret"}, strings.Fields(strings.Join(acl, " "))...)
	if _, err := srv.Command(ctx, setuser...); err != nil {
		t.Fatal(err)
	}
	switch d {
	case "redigo":
		pool := &redigoredis.Pool{DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
			return redigoredis.DialContext(ctx, "tcp", srv.Addr, redigoredis.DialUsername(user), redigoredis.DialPassword("secret"))
		}}
		t.Cleanup(func() { _ = pool.Close() })
		return redigo.New(pool)
	case "rueidis":
		return rueidisdriver.New(redistest.RueidisClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr}, Username: user, Password: "secret"}))
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: "secret", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = client.Close() })
	return goredis.New(client)
}

// wakeReasons has holder take key, and waiter wait for it with a retry
// delay of a minute; holder releases it once the waiter has been woken (by
// its subscription's confirmation) and has found the lock held again: it
// is subscribed, and asleep for a minute unless a message comes. It returns
// why the waiter woke, each time, once it got the lock.
func wakeReasons(t *testing.T, ctx context.Context, holder, waiter *lock.Locker, key string) []string {
	t.Helper()
	lk, err := holder.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain = %v, want nil", err)
	}
	var reasons []string
	ready := make(chan struct{})
	probe := lock.WithHooks(&lock.Hooks{
		Wait: func(_ context.Context, e lock.Event) {
			if e.Op == "woken" {
				reasons = append(reasons, e.Reason)
			}
		},
		Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
			err := next(ctx)
			if len(reasons) == 1 && errors.Is(err, lock.ErrNotObtained) {
				close(ready)
			}
			return err
		},
	})
	done := make(chan error, 1)
	go func() {
		lk, err := waiter.Obtain(ctx, key, time.Minute, lock.WithRetry(lock.Linear(time.Minute)), probe)
		if err == nil {
			err = lk.Release(ctx)
		}
		done <- err
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("waiter's Obtain = %v before it was woken and found the lock held, want it to wait", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter's Obtain = %v, want a lock", err)
	}
	return reasons
}

// aclSection returns the section of docs/acl.md under heading: from it to
// the next heading of its level or above.
func aclSection(t *testing.T, heading string) string {
	t.Helper()
	doc, err := os.ReadFile("docs/acl.md")
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/acl.md has no section %q", heading)
	}
	level, _, _ := strings.Cut(heading, " ")
	for _, l := range []string{"#", "##", "###", "####"}[:len(level)] {
		if i := strings.Index(text, "\n"+l+" "); i >= 0 {
			text = text[:i]
		}
	}
	return text
}

// newSingle is single.New with no options.
func newSingle(c driver.Conn) (*lock.Locker, error) { return single.New(c) }

func newSingleWithoutScripts(c driver.Conn) (*lock.Locker, error) {
	return single.New(driver.WithoutScripts(c))
}

func newSetnxGetsetWithoutScripts(c driver.Conn) (*lock.Locker, error) {
	return setnxgetset.New(driver.WithoutScripts(c), setnxgetset.WithSafetyTTL(time.Minute))
}

// newRedlockWithoutScripts is a Redlock Locker of one node, without
// scripts.
func newRedlockWithoutScripts(c driver.Conn) (*lock.Locker, error) {
	return redlock.New([]driver.Conn{driver.WithoutScripts(c)})
}

// noScripts is the ACL rule of single without scripts and of Redlock's
// nodes without scripts, as docs/acl.md gives it for a server without
// DELEX, DELIFEQ and SET … IFEQ's own commands.
const noScripts = "+get +set +pexpire +pttl +del +watch +multi +exec +unwatch +discard"

// TestACLWithoutScripts: the whole conformance suite passes for a Locker
// of each strategy without scripts (single, setnx-getset, and Redlock over
// one node) whose user is denied @scripting, and refused EVAL, so that the
// suite shows that nothing needs a script: over go-redis, and with LOCKSMITH_FULL=1 over each driver.
// MutualExclusion runs 200 acquisitions, the quick size, in every mode.
func TestACLWithoutScripts(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := aclConn(t, ctx, srv, "no-scripts", "~*", "&*", "+@all", "-@scripting")
	if _, err := driver.Do(ctx, conn, "EVAL", "return 1", 0); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("EVAL = %v, want NOPERM: the user must be denied scripts", err)
	}
	drivers := []string{"goredis"}
	if redistest.Full() {
		drivers = append(drivers, "redigo", "rueidis")
	}
	var combos []matrix.Combo
	for _, d := range drivers {
		for _, c := range []struct {
			combo matrix.Combo
			newL  func(driver.Conn) (*lock.Locker, error)
		}{
			{matrix.Prefix("single", matrix.WithoutScripts(matrix.Single(srv.Addr)))[0], newSingleWithoutScripts},
			{matrix.Prefix("setnx-getset", matrix.WithoutScripts(matrix.SetnxGetset(srv.Addr)))[0], func(c driver.Conn) (*lock.Locker, error) {
				// The options of the combination, ms+safety-ttl.
				return setnxgetset.New(driver.WithoutScripts(c), setnxgetset.WithFormat(setnxgetset.Milliseconds), setnxgetset.WithSafetyTTL(time.Second))
			}},
			{matrix.Prefix("redlock", matrix.WithoutScripts(matrix.Redlock([]string{srv.Addr})))[0], newRedlockWithoutScripts},
		} {
			// MutualExclusion at a tenth of its size under LOCKSMITH_FULL=1
			// too: this test checks that each property runs without a
			// script; the strategies' own suites without scripts check
			// exclusion at full size. (Under CI's load, this run's 2000
			// acquisitions over a one-node Redlock missed its 1s node
			// timeout: "no quorum", 0 overlaps.)
			c.combo.Harness.Acquisitions = 200
			c.combo.Harness.NewLocker = func(t *testing.T) *lock.Locker {
				l, err := c.newL(aclConnOver(t, t.Context(), srv, d, conformance.Key(t), "~*", "&*", "+@all", "-@scripting"))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			combos = append(combos, matrix.Prefix(d, []matrix.Combo{c.combo})...)
		}
	}
	matrix.Run(t, combos, 1)
}

// TestACLShared: the rule that docs/acl.md gives for semaphores and
// read-write locks lets a user that may run nothing else take, wait for,
// refresh, downgrade, inspect, break and release them on a real server,
// with fencing.
func TestACLShared(t *testing.T) {
	const (
		base   = "+evalsha +eval +get +set +pexpire +pttl +del"
		wait   = "+time +zadd +zrange +zrank +zrem +hset +hget +hdel +zscore +hincrby +exists +publish +subscribe +unsubscribe +ping"
		shared = "+type +zcard +zrangebyscore +hmget +hexists"
	)
	section := aclSection(t, "## Semaphores and read-write locks")
	for _, r := range []string{shared, "+incr", "~{lock:*"} {
		if !strings.Contains(section, "`"+r+"`") {
			t.Fatalf("docs/acl.md does not give the rule `%s` in \"Semaphores and read-write locks\", want it there", r)
		}
	}
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newLocker := func(t *testing.T, user string) *lock.Locker {
		t.Helper()
		l, err := single.New(aclConn(t, ctx, srv, user, "~lock:*", "~{lock:*", "&{lock:*", base, wait, shared, "+incr"))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Run("semaphore", func(t *testing.T) {
		holder, waiter := newLocker(t, "sem-holder"), newLocker(t, "sem-waiter")
		lk, err := holder.Obtain(ctx, "lock:sem", time.Minute, lock.WithPermits(1), lock.WithFencing())
		if err != nil {
			t.Fatalf("Obtain = %v, want nil", err)
		}
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Errorf("Refresh = %v, want nil", err)
		}
		if st, err := waiter.Inspect(ctx, "lock:sem"); err != nil || len(st.Holders) != 1 {
			t.Errorf("Inspect = %d holders, %v, want 1, nil", len(st.Holders), err)
		}
		got := make(chan error, 1)
		go func() {
			w, err := waiter.Obtain(ctx, "lock:sem", time.Minute, lock.WithPermits(1), lock.WithRetry(lock.Linear(time.Minute)))
			if err == nil {
				_, err = waiter.Break(ctx, "lock:sem", strategy.Fingerprint(w.Token()))
			}
			got <- err
		}()
		waitForQueue(t, ctx, srv, "{lock:sem}:q")
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release = %v, want nil", err)
		}
		if err := <-got; err != nil {
			t.Errorf("the waiter's Obtain, woken by the release, then Break = %v, want nil", err)
		}
	})
	t.Run("read-write lock", func(t *testing.T) {
		l := newLocker(t, "rw")
		w, err := l.Obtain(ctx, "lock:rw", time.Minute, lock.WithWrite(), lock.WithFencing())
		if err != nil {
			t.Fatalf("Obtain = %v, want nil", err)
		}
		if err := w.Downgrade(ctx); err != nil {
			t.Errorf("Downgrade = %v, want nil", err)
		}
		r, err := l.Obtain(ctx, "lock:rw", time.Minute, lock.WithRead(), lock.WithFencing())
		if err != nil {
			t.Fatalf("a reader's Obtain = %v, want nil", err)
		}
		for _, lk := range []*lock.Lock{w, r} {
			if _, err := lk.TTL(ctx); err != nil {
				t.Errorf("TTL = %v, want nil", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release = %v, want nil", err)
			}
		}
	})
}

// waitForQueue waits until the queue q on srv has a waiter.
func waitForQueue(t *testing.T, ctx context.Context, srv *redistest.Server, q string) {
	t.Helper()
	for {
		if n, err := srv.Command(ctx, "ZCARD", q); err == nil && n != "0" {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no waiter in %s: %v", q, ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestACLScriptsRefused: single.New with no option, as a user whose ACL
// denies scripts (+@all -@scripting), or on a server that does not know
// EVALSHA and EVAL, obtains, refreshes, reads and releases a lock, plain,
// fenced or of several keys, and lock.Do refreshes it while fn runs: the
// first contact finds scripts refused before anything is written, and the
// Locker runs without them (docs/acl.md, "A server that refuses
// scripts"). Over each driver; no key is left behind. A semaphore, which
// only scripts have, is refused with an error that names the mode without
// scripts; and a driver that cannot run without scripts is refused its
// Obtain, having written nothing.
func TestACLScriptsRefused(t *testing.T) {
	const heading = "## A server that refuses scripts"
	aclSection(t, heading)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, server := range []struct {
		name  string
		extra []string // the server's arguments
		acl   []string // the user's
	}{
		{"an ACL without @scripting", nil, []string{"~*", "&*", "+@all", "-@scripting"}},
		{"a server without EVALSHA and EVAL", []string{"--rename-command", "EVALSHA", "", "--rename-command", "EVAL", ""}, []string{"~*", "&*", "+@all"}},
	} {
		t.Run(server.name, func(t *testing.T) {
			srv := redistest.Start(t, 1, server.extra...)[0]
			redistest.StartReplica(t, srv.Addr) // for WithReplicas' WAIT
			for _, d := range []string{"goredis", "redigo", "rueidis"} {
				t.Run(d, func(t *testing.T) {
					newLocker := func(t *testing.T, opts ...single.Option) *lock.Locker {
						t.Helper()
						l, err := single.New(aclConnOver(t, ctx, srv, d, "refused-"+d, server.acl...), opts...)
						if err != nil {
							t.Fatal(err)
						}
						return l
					}
					t.Run("Obtain, Inspect, Refresh, TTL and Release", func(t *testing.T) {
						key := "lock:" + t.Name()
						l := newLocker(t)
						lk, err := l.Obtain(ctx, key, time.Minute)
						if err != nil {
							t.Fatalf("Obtain = %v, want nil", err)
						}
						if st, err := l.Inspect(ctx, key); err != nil || !st.Held {
							t.Errorf("Inspect = held %v, %v; want held, nil", st.Held, err)
						}
						if err := lk.Refresh(ctx, time.Minute); err != nil {
							t.Errorf("Refresh = %v, want nil", err)
						}
						if _, err := lk.TTL(ctx); err != nil {
							t.Errorf("TTL = %v, want nil", err)
						}
						if err := lk.Release(ctx); err != nil {
							t.Errorf("Release = %v, want nil", err)
						}
						wantNoKeys(t, ctx, srv, key)
					})
					t.Run("WithFencing", func(t *testing.T) {
						key := "lock:" + t.Name()
						l := newLocker(t)
						var fences []int64
						for range 2 {
							lk, err := l.Obtain(ctx, key, time.Minute, lock.WithFencing())
							if err != nil {
								t.Fatalf("Obtain = %v, want nil", err)
							}
							fence, _ := lk.Fence()
							fences = append(fences, fence)
							if err := lk.Release(ctx); err != nil {
								t.Errorf("Release = %v, want nil", err)
							}
						}
						if fences[1] <= fences[0] {
							t.Errorf("fencing tokens %v, want increasing", fences)
						}
						wantNoKeys(t, ctx, srv, key)
					})
					t.Run("WithReplicas", func(t *testing.T) {
						key := "lock:" + t.Name()
						lk, err := newLocker(t, single.WithReplicas(1, 10*time.Second)).Obtain(ctx, key, time.Minute)
						if err != nil {
							t.Fatalf("Obtain = %v, want nil", err)
						}
						if err := lk.Refresh(ctx, time.Minute); err != nil {
							t.Errorf("Refresh = %v, want nil", err)
						}
						if err := lk.Release(ctx); err != nil {
							t.Errorf("Release = %v, want nil", err)
						}
						wantNoKeys(t, ctx, srv, key)
					})
					t.Run("ObtainMany", func(t *testing.T) {
						keys := []string{"{lock:" + t.Name() + "}:a", "{lock:" + t.Name() + "}:b"}
						lk, err := newLocker(t).ObtainMany(ctx, keys, time.Minute)
						if err != nil {
							t.Fatalf("ObtainMany = %v, want nil", err)
						}
						if err := lk.Refresh(ctx, time.Minute); err != nil {
							t.Errorf("Refresh = %v, want nil", err)
						}
						if err := lk.Release(ctx); err != nil {
							t.Errorf("Release = %v, want nil", err)
						}
						wantNoKeys(t, ctx, srv, keys...)
					})
					t.Run("Do: fn's lock is refreshed", func(t *testing.T) {
						key := "lock:" + t.Name()
						refreshed := make(chan error, 100)
						hooks := lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
							err := next(ctx)
							if e.Op == "refresh" {
								refreshed <- err
							}
							return err
						}})
						err := lock.Do(ctx, newLocker(t), key, 3*time.Second, func(ctx context.Context) error {
							select {
							case err := <-refreshed:
								return err
							case <-ctx.Done():
								return context.Cause(ctx)
							}
						}, hooks)
						if err != nil {
							t.Errorf("Do = %v, want nil: fn returns its lock's first refresh's error", err)
						}
						wantNoKeys(t, ctx, srv, key)
					})
					t.Run("a semaphore: refused, naming the mode without scripts", func(t *testing.T) {
						key := "lock:" + t.Name()
						l := newLocker(t)
						for i := range 2 { // at first contact, and once the refusal is known
							_, err := l.Obtain(ctx, key, time.Minute, lock.WithPermits(2))
							if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "WithoutScripts") {
								t.Errorf("Obtain %d = %v, want an error matching errors.ErrUnsupported that names WithoutScripts", i+1, err)
							}
						}
						wantNoKeys(t, ctx, srv, key, "{"+key+"}:shared")
					})
				})
			}
			t.Run("scripts refused under a running Locker: its lock is refreshed and released", func(t *testing.T) {
				if server.extra != nil {
					t.Skip("the ACL's case: the server's commands cannot change while it runs")
				}
				key := "lock:" + t.Name()
				l, err := single.New(aclConn(t, ctx, srv, "refused-later", "~*", "&*", "+@all"))
				if err != nil {
					t.Fatal(err)
				}
				lk, err := l.Obtain(ctx, key, time.Minute) // a script has run: then the bare SET NX
				if err != nil {
					t.Fatalf("Obtain = %v, want nil", err)
				}
				lk2, err := l.Obtain(ctx, key+":2", time.Minute)
				if err != nil {
					t.Fatalf("the second Obtain = %v, want nil", err)
				}
				if _, err := srv.Command(ctx, "ACL", "SETUSER", "refused-later", "-@scripting"); err != nil {
					t.Fatal(err)
				}
				if err := lk.Refresh(ctx, time.Minute); err != nil {
					t.Errorf("Refresh = %v, want nil", err)
				}
				for _, lk := range []*lock.Lock{lk, lk2} {
					if err := lk.Release(ctx); err != nil {
						t.Errorf("Release = %v, want nil", err)
					}
				}
				wantNoKeys(t, ctx, srv, key, key+":2")
			})
			t.Run("a driver that cannot pin: Obtain refused, nothing written", func(t *testing.T) {
				key := "lock:" + t.Name()
				type unpinned struct{ driver.Conn } // hides driver.Pinner
				l, err := single.New(unpinned{aclConn(t, ctx, srv, "refused-unpinned", server.acl...)})
				if err != nil {
					t.Fatal(err)
				}
				for i := range 2 { // at first contact, and once the refusal is known
					_, err := l.Obtain(ctx, key, time.Minute)
					if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "refuses scripts") || !strings.Contains(err.Error(), "WithoutScripts") {
						t.Errorf("Obtain %d = %v, want an error matching errors.ErrUnsupported that says the server refuses scripts and names WithoutScripts", i+1, err)
					}
				}
				wantNoKeys(t, ctx, srv, key)
			})
		})
	}
}

// wantNoKeys fails t if any of keys exists on srv.
func wantNoKeys(t *testing.T, ctx context.Context, srv *redistest.Server, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if n, err := srv.Command(ctx, "EXISTS", k); err != nil || n != "0" {
			t.Errorf("EXISTS %s = %s, %v; want 0: a key left behind", k, n, err)
		}
	}
}

// TestACLBreakMark: the mark of a Break is a key beside the lock's,
// {lock:…}:broken:<fingerprint>, which Break writes with SET and the broken
// holder reads with EXISTS. A user whose ACL allows the base rule alone
// (not the companions' keys, nor EXISTS) breaks the lock all the same, and
// its broken holder reports ErrExpired, as before the mark; with the
// companions' keys and +exists, ErrBroken.
func TestACLBreakMark(t *testing.T) {
	const base = "~lock:* +evalsha +eval +get +set +pexpire +pttl +del"
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name, user, rule string
		want             error
	}{
		{"the base rule: ErrExpired", "base", base, lock.ErrExpired},
		{"with the companions and EXISTS: ErrBroken", "marks", base + " ~{lock:* +exists", lock.ErrBroken},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := single.New(aclConn(t, ctx, srv, c.user, c.rule))
			if err != nil {
				t.Fatal(err)
			}
			lk, err := l.Obtain(ctx, "lock:break", time.Minute)
			if err != nil {
				t.Fatalf("Obtain = %v, want a lock", err)
			}
			if _, err := l.Break(ctx, "lock:break", ""); err != nil {
				t.Fatalf("Break = %v, want nil", err)
			}
			err = lk.Release(ctx)
			if !errors.Is(err, c.want) || c.want == lock.ErrExpired && errors.Is(err, lock.ErrBroken) {
				t.Errorf("the broken holder's Release = %v, want %v", err, c.want)
			}
		})
	}
}

// TestACLGuard: the rule docs/acl.md gives for guarded writes lets a user
// that may run nothing else guard a SET on its data's keys, in both forms;
// a write of a command the user is denied fails with the server's refusal
// and writes nothing.
func TestACLGuard(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := aclConn(t, ctx, srv, "guard", "~*", "+evalsha +eval +get +set +pexpire +pttl +del", "+watch +multi +exec +unwatch +discard")
	l, err := single.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Obtain(ctx, "{acl:guard}", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	if _, err := lk.Guard(ctx, `return redis.call('SET', KEYS[1], ARGV[1])`, []string{"{acl:guard}:a"}, "1"); err != nil {
		t.Errorf("Guard: got %v, want nil", err)
	}
	if _, err := lk.GuardCommands(ctx, []string{"{acl:guard}:b"}, []any{"SET", "{acl:guard}:b", "1"}); err != nil {
		t.Errorf("GuardCommands: got %v, want nil", err)
	}
	t.Run("a denied command: refused, nothing written", func(t *testing.T) {
		// Each server words a refusal inside a script its own way (Redis
		// 7.0: "ERR The user executing the script can't run this command";
		// Valkey 8: "ERR ACL failure in script").
		_, err := lk.Guard(ctx, `return redis.call('INCR', KEYS[1])`, []string{"{acl:guard}:n"})
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "incr") && !strings.Contains(err.Error(), "can't run this command") {
			t.Errorf("Guard of a denied INCR: got %v, want the server's refusal", err)
		}
		if _, err := lk.GuardCommands(ctx, []string{"{acl:guard}:n"}, []any{"INCR", "{acl:guard}:n"}); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("GuardCommands of a denied INCR: got %v, want NOPERM", err)
		}
		wantNoKeys(t, ctx, srv, "{acl:guard}:n")
		if err := lk.Err(); err != nil {
			t.Errorf("Err after denied writes: got %v, want nil", err)
		}
	})
}
