package lock_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
	"github.com/locksmith-go/lock/strategy/single"
)

// opLog records the operations that a lock's Op hooks see, with the TTL
// of each, and counts those that succeeded.
type opLog struct {
	mu   sync.Mutex
	ops  []string
	ttls []time.Duration
	oks  map[string]int
}

// option returns the option that installs the log's hooks.
func (o *opLog) option() lock.Option {
	return lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
		o.mu.Lock()
		o.ops, o.ttls = append(o.ops, e.Op), append(o.ttls, e.TTL)
		o.mu.Unlock()
		err := next(ctx)
		if err == nil {
			o.mu.Lock()
			if o.oks == nil {
				o.oks = make(map[string]int)
			}
			o.oks[e.Op]++
			o.mu.Unlock()
		}
		return err
	}})
}

// count returns how many operations op the log saw.
func (o *opLog) count(op string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, got := range o.ops {
		if got == op {
			n++
		}
	}
	return n
}

// succeeded returns how many operations op succeeded.
func (o *opLog) succeeded(op string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.oks[op]
}

// TestSetMetadata: on single, over every driver, with scripts and
// without, SetMetadata replaces the metadata in the key's value, keeping
// the token, its stamp and the fence, renews the lease as a Refresh with
// ttl 0 does, and refuses what it cannot do without sending anything.
func TestSetMetadata(t *testing.T) {
	addr, _ := redistest.Addr(t)
	for _, g := range []struct {
		name   string
		combos []matrix.Combo
	}{
		{"single", matrix.Single(addr)},
		{"single-without-scripts", matrix.WithoutScripts(matrix.Single(addr))},
	} {
		for _, c := range g.combos {
			t.Run(g.name+"/"+c.Name, func(t *testing.T) { testSetMetadata(t, c) })
		}
	}
}

func testSetMetadata(t *testing.T, c matrix.Combo) {
	ctx := context.Background()
	l := c.Harness.NewLocker(t)
	conn := c.Harness.Conns(t)[0]
	// held obtains a lock of key for ttl with the metadata "before", and
	// fencing, through log's hooks.
	held := func(t *testing.T, key string, ttl time.Duration, log *opLog, opts ...lock.Option) *lock.Lock {
		t.Helper()
		lk, err := l.Obtain(ctx, key, ttl, append([]lock.Option{lock.WithMetadata("before"), lock.WithFencing(), log.option()}, opts...)...)
		if err != nil {
			t.Fatalf("Obtain: got %v, want a lock", err)
		}
		t.Cleanup(func() { _ = lk.Release(ctx) })
		return lk
	}

	t.Run("Metadata and Inspect read the new metadata", func(t *testing.T) {
		key := conformance.Key(t)
		lk := held(t, key, time.Minute, new(opLog))
		if err := lk.SetMetadata(ctx, "after"); err != nil {
			t.Fatalf("SetMetadata: got %v, want nil", err)
		}
		if got := lk.Metadata(); got != "after" {
			t.Errorf("Metadata(): got %q, want %q", got, "after")
		}
		st, err := l.Inspect(ctx, key)
		if err != nil || !st.Held || st.Metadata != "after" {
			t.Errorf("Inspect: got held %v, metadata %q, %v; want held, %q, nil", st.Held, st.Metadata, err, "after")
		}
	})

	t.Run("the value keeps its token, stamp and fence", func(t *testing.T) {
		key := conformance.Key(t)
		lk := held(t, key, time.Minute, new(opLog))
		token, fence := lk.Token(), lk.Fence
		wantFence, _ := fence()
		before, _, err := conn.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.SetMetadata(ctx, "after"); err != nil {
			t.Fatalf("SetMetadata: got %v, want nil", err)
		}
		if got := lk.Token(); got != token {
			t.Error("Token() changed, want it kept")
		}
		if got, ok := lk.Fence(); got != wantFence || !ok {
			t.Errorf("Fence(): got %d, %v; want %d, true", got, ok, wantFence)
		}
		after, _, err := conn.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSuffix(before, "before") + "after"; after != want {
			t.Errorf("stored value: got %q, want the same token and stamp with the new metadata", strings.TrimPrefix(after, token))
		}
		st, err := l.Inspect(ctx, key)
		if err != nil || st.Fingerprint != strategy.Fingerprint(token) || st.Fence != wantFence || st.HeldFor <= 0 {
			t.Errorf("Inspect: got fingerprint %q, fence %d, held for %v, %v; want the holder's, %d, positive, nil", st.Fingerprint, st.Fence, st.HeldFor, err, wantFence)
		}
	})

	t.Run("it renews the lease and moves ValidUntil", func(t *testing.T) {
		key := conformance.Key(t)
		log := new(opLog)
		lk := held(t, key, 2*time.Second, log)
		time.Sleep(300 * time.Millisecond)
		until := lk.ValidUntil()
		ttl, err := lk.TTL(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.SetMetadata(ctx, "after"); err != nil {
			t.Fatalf("SetMetadata: got %v, want nil", err)
		}
		if got := lk.ValidUntil(); !got.After(until) {
			t.Errorf("ValidUntil: got %v, want after %v", got, until)
		}
		renewed, err := lk.TTL(ctx)
		if err != nil || renewed < ttl+200*time.Millisecond {
			t.Errorf("TTL after SetMetadata: got %v, %v; want at least %v (before it: %v), nil", renewed, err, ttl+200*time.Millisecond, ttl)
		}
		if got := log.count("metadata"); got != 1 {
			t.Errorf("Op hooks of metadata: got %d, want 1", got)
		}
		log.mu.Lock()
		ttls := log.ttls
		log.mu.Unlock()
		if got := ttls[len(ttls)-2]; got != 2*time.Second { // before the TTL's
			t.Errorf("Event.TTL of metadata: got %v, want 2s, the lock's TTL", got)
		}
	})

	t.Run("a later Refresh and Release succeed", func(t *testing.T) {
		key := conformance.Key(t)
		lk := held(t, key, time.Minute, new(opLog))
		if err := lk.SetMetadata(ctx, "after"); err != nil {
			t.Fatalf("SetMetadata: got %v, want nil", err)
		}
		if err := lk.Refresh(ctx, 0); err != nil {
			t.Errorf("Refresh: got %v, want nil", err)
		}
		if err := lk.SetMetadata(ctx, ""); err != nil {
			t.Errorf("SetMetadata of no metadata: got %v, want nil", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release: got %v, want nil", err)
		}
		if st, err := l.Inspect(ctx, key); err != nil || st.Held {
			t.Errorf("Inspect after Release: got held %v, %v; want free, nil", st.Held, err)
		}
	})

	t.Run("a key taken by another holder gives ErrTaken and is left alone", func(t *testing.T) {
		key := conformance.Key(t)
		lk := held(t, key, time.Minute, new(opLog))
		if _, err := l.Break(ctx, key, ""); err != nil {
			t.Fatal(err)
		}
		other, err := l.Obtain(ctx, key, time.Minute, lock.WithMetadata("other"))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Release(ctx)
		err = lk.SetMetadata(ctx, "after")
		if !errors.Is(err, lock.ErrTaken) {
			t.Fatalf("SetMetadata: got %v, want ErrTaken", err)
		}
		if strings.Contains(err.Error(), lk.Token()) {
			t.Errorf("SetMetadata's error %q quotes the token, want it not to", err)
		}
		if got := lk.Metadata(); got != "before" {
			t.Errorf("Metadata(): got %q, want %q", got, "before")
		}
		if got := lk.Err(); !errors.Is(got, lock.ErrTaken) {
			t.Errorf("Err(): got %v, want ErrTaken: the lock ended", got)
		}
		st, err := l.Inspect(ctx, key)
		if err != nil || st.Metadata != "other" || st.Fingerprint != strategy.Fingerprint(other.Token()) {
			t.Errorf("Inspect: got metadata %q, fingerprint %q, %v; want the other holder's", st.Metadata, st.Fingerprint, err)
		}
	})

	t.Run("a gone key gives ErrExpired and is not written", func(t *testing.T) {
		key := conformance.Key(t)
		lk := held(t, key, time.Minute, new(opLog))
		if _, err := l.Break(ctx, key, ""); err != nil {
			t.Fatal(err)
		}
		if err := lk.SetMetadata(ctx, "after"); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("SetMetadata: got %v, want ErrExpired", err)
		}
		if _, ok, err := conn.Get(ctx, key); ok || err != nil {
			t.Errorf("GET: got found %v, %v; want nothing written", ok, err)
		}
	})

	t.Run("a lapsed lock is refused with Err, and nothing is sent", func(t *testing.T) {
		key := conformance.Key(t)
		log := new(opLog)
		lk := held(t, key, 100*time.Millisecond, log)
		waitDone(t, lk)
		err := lk.SetMetadata(ctx, "after")
		if !errors.Is(err, lock.ErrLapsed) || err != lk.Err() {
			t.Errorf("SetMetadata: got %v, want Err(), %v", err, lk.Err())
		}
		if got := log.count("metadata"); got != 0 {
			t.Errorf("Op hooks of metadata: got %d, want 0", got)
		}
	})

	t.Run("invalid metadata is refused, and nothing is sent", func(t *testing.T) {
		key := conformance.Key(t)
		log := new(opLog)
		lk := held(t, key, time.Minute, log)
		err := lk.SetMetadata(ctx, "\x1elooks like a stamp")
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "metadata" {
			t.Errorf("SetMetadata: got %v, want an *ArgumentError named metadata", err)
		}
		if got := log.count("metadata"); got != 0 {
			t.Errorf("Op hooks of metadata: got %d, want 0", got)
		}
		if st, err := l.Inspect(ctx, key); err != nil || st.Metadata != "before" || lk.Metadata() != "before" {
			t.Errorf("metadata: got %q stored, %q held, %v; want %q", st.Metadata, lk.Metadata(), err, "before")
		}
	})

	t.Run("a nil ctx is refused", func(t *testing.T) {
		lk := held(t, conformance.Key(t), time.Minute, new(opLog))
		var ae *lock.ArgumentError
		var none context.Context // nil
		if err := lk.SetMetadata(none, "after"); !errors.As(err, &ae) || ae.Name != "ctx" {
			t.Errorf("SetMetadata(nil): got %v, want an *ArgumentError named ctx", err)
		}
	})

	t.Run("it spends no refresh of WithMaxRefreshes", func(t *testing.T) {
		lk := held(t, conformance.Key(t), time.Minute, new(opLog), lock.WithMaxRefreshes(1))
		for i := range 2 {
			if err := lk.SetMetadata(ctx, "after"); err != nil {
				t.Fatalf("SetMetadata %d: got %v, want nil", i+1, err)
			}
		}
		if err := lk.Refresh(ctx, 0); err != nil {
			t.Errorf("the one Refresh allowed: got %v, want nil", err)
		}
		if err := lk.SetMetadata(ctx, "again"); err != nil {
			t.Errorf("SetMetadata once the refreshes are spent: got %v, want nil", err)
		}
		if err := lk.Refresh(ctx, 0); !errors.Is(err, lock.ErrRefreshLimit) {
			t.Errorf("a second Refresh: got %v, want ErrRefreshLimit", err)
		}
	})

	t.Run("WithMaxHold shortens its lease", func(t *testing.T) {
		lk := held(t, conformance.Key(t), 2*time.Second, new(opLog), lock.WithMaxHold(2*time.Second))
		time.Sleep(300 * time.Millisecond)
		if err := lk.SetMetadata(ctx, "after"); err != nil {
			t.Fatalf("SetMetadata: got %v, want nil", err)
		}
		if ttl, err := lk.TTL(ctx); err != nil || ttl > 1750*time.Millisecond {
			t.Errorf("TTL: got %v, %v; want at most 1.75s, the hold left", ttl, err)
		}
	})

	t.Run("auto-refresh goes on with the new value", func(t *testing.T) {
		key := conformance.Key(t)
		log := new(opLog)
		lk := held(t, key, 300*time.Millisecond, log, lock.WithRefreshFraction(0.2))
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lk.SetMetadata(ctx, "after"); err != nil {
			t.Fatalf("SetMetadata: got %v, want nil", err)
		}
		waitFor(t, "3 refreshes", func() bool { return log.succeeded("refresh") >= 3 })
		if err := lk.Err(); err != nil {
			t.Errorf("Err(): got %v, want nil: the lock is held", err)
		}
		if st, err := l.Inspect(ctx, key); err != nil || st.Metadata != "after" {
			t.Errorf("Inspect: got metadata %q, %v; want %q", st.Metadata, err, "after")
		}
	})
}

// TestSetMetadataUnsupported: a strategy that cannot relabel a value
// (setnx-getset, Redlock), a lock of several keys and a shared lock refuse
// SetMetadata with an *ArgumentError named lock that matches
// errors.ErrUnsupported, sending nothing; the lock stays held.
func TestSetMetadataUnsupported(t *testing.T) {
	ctx := context.Background()
	addr, _ := redistest.Addr(t)
	conn := redistest.Drivers()[1].Conn(t, addr) // go-redis, RESP3
	singleLocker, err := single.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	redlockLocker, err := redlock.New([]driver.Conn{conn})
	if err != nil {
		t.Fatal(err)
	}
	legacy := matrix.SetnxGetset(addr)[0]
	for _, c := range []struct {
		name   string
		obtain func(t *testing.T, key string, hooks lock.Option) (*lock.Lock, error)
	}{
		{"setnx-getset", func(t *testing.T, key string, hooks lock.Option) (*lock.Lock, error) {
			return legacy.Harness.NewLocker(t).Obtain(ctx, key, time.Minute, hooks)
		}},
		{"redlock", func(t *testing.T, key string, hooks lock.Option) (*lock.Lock, error) {
			return redlockLocker.Obtain(ctx, key, time.Minute, hooks)
		}},
		{"a lock of several keys", func(t *testing.T, key string, hooks lock.Option) (*lock.Lock, error) {
			return singleLocker.ObtainMany(ctx, []string{"{" + key + "}:a", "{" + key + "}:b"}, time.Minute, hooks)
		}},
		{"a semaphore", func(t *testing.T, key string, hooks lock.Option) (*lock.Lock, error) {
			return singleLocker.Obtain(ctx, key, time.Minute, lock.WithPermits(2), hooks)
		}},
		{"a read-write lock's writer", func(t *testing.T, key string, hooks lock.Option) (*lock.Lock, error) {
			return singleLocker.Obtain(ctx, key, time.Minute, lock.WithWrite(), hooks)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := new(opLog)
			lk, err := c.obtain(t, conformance.Key(t), log.option())
			if err != nil {
				t.Fatalf("Obtain: got %v, want a lock", err)
			}
			err = lk.SetMetadata(ctx, "after")
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "lock" || !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("SetMetadata: got %v, want an *ArgumentError named lock matching errors.ErrUnsupported", err)
			}
			if got := log.count("metadata"); got != 0 {
				t.Errorf("Op hooks of metadata: got %d, want 0", got)
			}
			if got := lk.Metadata(); got != "" {
				t.Errorf("Metadata(): got %q, want it unchanged, empty", got)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release: got %v, want nil: the lock is still held", err)
			}
		})
	}
}

// losing is a driver.Conn that loses the reply of the next script it runs
// with three arguments (single's relabel: value, next, TTL): it sends it,
// or drops it when drop is set, and reports a timeout. It sends the other
// commands (the batches' pipelines) as its Conn does.
type losing struct {
	driver.Conn
	lose, drop atomic.Bool
}

func (c *losing) Do(ctx context.Context, args ...any) (any, error) {
	return c.Conn.(driver.Commander).Do(ctx, args...)
}

func (c *losing) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	return c.run(len(args), func() (any, error) { return c.Conn.EvalSha(ctx, sha1, keys, args...) })
}

func (c *losing) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	return c.run(len(args), func() (any, error) { return c.Conn.Eval(ctx, src, keys, args...) })
}

// run sends a script of n arguments, and loses its reply if it is the
// relabel that c is to lose. A NOSCRIPT reply goes back as it is: Eval
// follows it.
func (c *losing) run(n int, send func() (any, error)) (any, error) {
	if n != 3 || !c.lose.Load() {
		return send()
	}
	if c.drop.Load() {
		c.lose.Store(false)
		return nil, os.ErrDeadlineExceeded
	}
	reply, err := send()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return reply, err
	}
	c.lose.Store(false)
	return nil, os.ErrDeadlineExceeded
}

// TestSetMetadataLostReply: a SetMetadata whose reply was lost leaves the
// lock unsure of the value it holds; the next call settles it, by hand or
// in a batch of auto-refreshes, adopting the new value, with its metadata
// and the same token, when it landed, and keeping the old one when it did
// not.
func TestSetMetadataLostReply(t *testing.T) {
	ctx := context.Background()
	addr, _ := redistest.Addr(t)
	for _, c := range []struct {
		name    string
		dropped bool   // the relabel never reached the server
		want    string // the metadata once the lock settled
		settle  func(t *testing.T, lk *lock.Lock, log *opLog)
	}{
		{"landed, then a Refresh", false, "after", refreshOnce},
		{"dropped, then a Refresh", true, "before", refreshOnce},
		{"landed, then auto-refresh in a batch", false, "after", autoRefresh},
		{"dropped, then auto-refresh in a batch", true, "before", autoRefresh},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := &losing{Conn: redistest.Drivers()[1].Conn(t, addr)}
			conn.drop.Store(c.dropped)
			l, err := single.New(conn)
			if err != nil {
				t.Fatal(err)
			}
			key := conformance.Key(t)
			log := new(opLog)
			lk, err := l.Obtain(ctx, key, time.Second, lock.WithMetadata("before"), log.option(), lock.WithRefreshFraction(0.2))
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Release(ctx)
			token := lk.Token()
			conn.lose.Store(true)
			err = lk.SetMetadata(ctx, "after")
			if !errors.Is(err, lock.ErrNoAnswer) || errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("SetMetadata: got %v, want ErrNoAnswer, not ErrNotHeld", err)
			}
			c.settle(t, lk, log)
			if err := lk.Err(); err != nil {
				t.Errorf("Err(): got %v, want nil: the lock is held", err)
			}
			if got := lk.Metadata(); got != c.want {
				t.Errorf("Metadata(): got %q, want %q", got, c.want)
			}
			if lk.Token() != token {
				t.Error("Token() changed, want it kept")
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release: got %v, want nil", err)
			}
			if _, ok, err := conn.Get(ctx, key); ok || err != nil {
				t.Errorf("GET after Release: got found %v, %v; want the key gone", ok, err)
			}
		})
	}
}

// refreshOnce settles lk with a Refresh by hand.
func refreshOnce(t *testing.T, lk *lock.Lock, _ *opLog) {
	t.Helper()
	if err := lk.Refresh(context.Background(), 0); err != nil {
		t.Errorf("Refresh: got %v, want nil", err)
	}
}

// autoRefresh settles lk with auto-refreshes, which single batches.
func autoRefresh(t *testing.T, lk *lock.Lock, log *opLog) {
	t.Helper()
	if err := lk.StartRefresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "2 refreshes, or the lock's end", func() bool { return log.succeeded("refresh") >= 2 || lk.Err() != nil })
	lk.StopRefresh()
}
