package single_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// scriptModes are the two ways the Strategy talks to a server.
var scriptModes = []struct {
	name string
	mark func(driver.Conn) driver.Conn
}{{"scripts", withScripts}, {"without scripts", driver.WithoutScripts}}

// fencedShape is a fenced acquisition of one shape, and where its counters
// live.
type fencedShape struct {
	name     string
	scripts  bool // it needs scripts (a semaphore)
	obtain   func(ctx context.Context, l *lock.Locker, key string, ttl time.Duration) (*lock.Lock, error)
	counters func(key string) []string
	tokens   func(lk *lock.Lock, key string) []int64
}

// fencedShapes are the fenced acquisitions: a lock of one key, of two keys,
// a read-write lock's writer and a semaphore's permit.
var fencedShapes = []fencedShape{{
	name: "one key",
	obtain: func(ctx context.Context, l *lock.Locker, key string, ttl time.Duration) (*lock.Lock, error) {
		return l.Obtain(ctx, key, ttl, lock.WithFencing())
	},
	counters: func(key string) []string { f, _ := single.FenceKey(key); return []string{f} },
	tokens:   func(lk *lock.Lock, _ string) []int64 { n, _ := lk.Fence(); return []int64{n} },
}, {
	name: "two keys",
	obtain: func(ctx context.Context, l *lock.Locker, key string, ttl time.Duration) (*lock.Lock, error) {
		return l.ObtainMany(ctx, []string{"{" + key + "}:a", "{" + key + "}:b"}, ttl, lock.WithFencing())
	},
	counters: func(key string) []string {
		a, _ := single.FenceKey("{" + key + "}:a")
		b, _ := single.FenceKey("{" + key + "}:b")
		return []string{a, b}
	},
	tokens: func(lk *lock.Lock, key string) []int64 {
		a, _ := lk.FenceOf("{" + key + "}:a")
		b, _ := lk.FenceOf("{" + key + "}:b")
		return []int64{a, b}
	},
}, {
	name:    "writer",
	scripts: true,
	obtain: func(ctx context.Context, l *lock.Locker, key string, ttl time.Duration) (*lock.Lock, error) {
		return l.Obtain(ctx, key, ttl, lock.WithFencing(), lock.WithWrite())
	},
	counters: func(key string) []string { sh, _ := cas.NewShared(key, false); return []string{sh.Fence} },
	tokens:   func(lk *lock.Lock, _ string) []int64 { n, _ := lk.Fence(); return []int64{n} },
}, {
	name:    "semaphore",
	scripts: true,
	obtain: func(ctx context.Context, l *lock.Locker, key string, ttl time.Duration) (*lock.Lock, error) {
		return l.Obtain(ctx, key, ttl, lock.WithFencing(), lock.WithPermits(1))
	},
	counters: func(key string) []string { sh, _ := cas.NewShared(key, false); return []string{sh.Fences} },
	tokens:   func(lk *lock.Lock, _ string) []int64 { n, _ := lk.Fence(); return []int64{n} },
}}

// TestFenceTTL: a fenced acquisition gives each of its counters the
// lifetime: 100 × its TTL by default, WithFenceTTL's, or none with
// WithFenceTTL(0); over every driver, with scripts and without.
func TestFenceTTL(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := testContext(t)
	const ttl = time.Second
	for _, c := range []struct {
		name string
		opts []single.Option
		most time.Duration // the longest PTTL wanted; -1: none
	}{
		{"default", nil, 100 * ttl},
		{"WithFenceTTL(3s)", []single.Option{single.WithFenceTTL(3 * time.Second)}, 3 * time.Second},
		{"WithFenceTTL(0)", []single.Option{single.WithFenceTTL(0)}, -1},
	} {
		for _, d := range redistest.Drivers() {
			for _, m := range scriptModes {
				for _, sh := range fencedShapes {
					if sh.scripts && m.name != "scripts" {
						continue
					}
					t.Run(c.name+"/"+d.Name+"/"+m.name+"/"+sh.name, func(t *testing.T) {
						l, err := single.New(m.mark(d.Conn(t, srv.Addr)), c.opts...)
						if err != nil {
							t.Fatal(err)
						}
						key := conformance.Key(t)
						lk, err := sh.obtain(ctx, l, key, ttl)
						if err != nil {
							t.Fatalf("fenced obtain = %v, want a lock", err)
						}
						defer lk.Release(ctx)
						for _, f := range sh.counters(key) {
							got, err := srv.Command(ctx, "PTTL", f)
							if err != nil {
								t.Fatal(err)
							}
							ms, _ := strconv.ParseInt(got, 10, 64)
							switch pttl := time.Duration(ms) * time.Millisecond; {
							case c.most < 0 && ms != -1:
								t.Errorf("PTTL %s = %s, want -1 (no expiry)", f, got)
							case c.most >= 0 && (ms <= 0 || pttl > c.most):
								t.Errorf("PTTL %s = %s, want in (0, %d]", f, got, c.most.Milliseconds())
							}
						}
					})
				}
			}
		}
	}
}

// TestFenceTTLNegative: New refuses a negative lifetime.
func TestFenceTTLNegative(t *testing.T) {
	addr, _ := redistest.Addr(t)
	_, err := single.New(goredis.New(redistest.GoRedis(t, addr, 3)), single.WithFenceTTL(-1))
	var ae *lock.ArgumentError
	if !errors.As(err, &ae) || ae.Name != "fence ttl" {
		t.Errorf("New WithFenceTTL(-1) = %v, want an *ArgumentError named %q", err, "fence ttl")
	}
}

// TestFencesSurviveCounterLoss: tokens keep increasing when a counter
// expires or is deleted between acquisitions; over every driver, with
// scripts and without, for each fenced shape.
func TestFencesSurviveCounterLoss(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := testContext(t)
	losses := []struct {
		name string
		lose func(t *testing.T, counter string)
	}{
		{"none", func(*testing.T, string) {}},
		{"DEL", func(t *testing.T, counter string) {
			if _, err := srv.Command(ctx, "DEL", counter); err != nil {
				t.Fatal(err)
			}
		}},
		{"PEXPIRE 1", func(t *testing.T, counter string) {
			if _, err := srv.Command(ctx, "PEXPIRE", counter, "1"); err != nil {
				t.Fatal(err)
			}
			for { // the server expires it within a millisecond or so: the test's deadline bounds the wait
				got, err := srv.Command(ctx, "EXISTS", counter)
				if err != nil {
					t.Fatal(err)
				}
				if got == "0" {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}},
	}
	for _, d := range redistest.Drivers() {
		for _, m := range scriptModes {
			for _, sh := range fencedShapes {
				if sh.scripts && m.name != "scripts" {
					continue
				}
				t.Run(d.Name+"/"+m.name+"/"+sh.name, func(t *testing.T) {
					l, err := single.New(m.mark(d.Conn(t, srv.Addr)))
					if err != nil {
						t.Fatal(err)
					}
					key := conformance.Key(t)
					var last []int64
					for round := range 12 {
						loss := losses[round%len(losses)]
						lk, err := sh.obtain(ctx, l, key, time.Minute)
						if err != nil {
							t.Fatalf("round %d: fenced obtain = %v, want a lock", round, err)
						}
						got := sh.tokens(lk, key)
						for i, n := range got {
							if last != nil && n <= last[i] {
								t.Errorf("round %d, after %s: token %d = %d, want more than %d", round, losses[(round-1)%len(losses)].name, i, n, last[i])
							}
						}
						last = got
						if err := lk.Release(ctx); err != nil {
							t.Fatal(err)
						}
						for _, f := range sh.counters(key) {
							loss.lose(t, f)
						}
					}
				})
			}
		}
	}
}

// TestFenceCountersExpire is the measurement of the lifetime: once n names
// have been fenced, obtained and released for a TTL of 1s, the server holds
// no counter once their lifetime, WithFenceTTL(2s), has passed; with
// WithFenceTTL(0) it holds n. n is 100,000 with LOCKSMITH_FULL=1, 2,000
// otherwise.
func TestFenceCountersExpire(t *testing.T) {
	n := 2000
	if redistest.Full() {
		n = 100_000
	}
	for _, c := range []struct {
		name string
		life time.Duration // 0: none
	}{
		{"WithFenceTTL(2s)", 2 * time.Second},
		{"WithFenceTTL(0)", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t, 1)[0]
			ctx := context.Background()
			l, err := single.New(goredis.New(redistest.GoRedis(t, srv.Addr, 3)), single.WithFenceTTL(c.life))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			fenceAll(ctx, t, l, n)
			fenced := time.Since(start)
			left, mem := dbsize(ctx, t, srv), usedMemory(ctx, t, srv)
			if c.life == 0 {
				if left != n {
					t.Errorf("DBSIZE after %d names were fenced, without a lifetime = %d, want %d", n, left, n)
				}
				t.Logf("n = %d: fenced in %v; %d counters left without a lifetime, used_memory %s", n, fenced, left, mem)
				return
			}
			// Wait for the counters to go: the lifetime, then the server's
			// expiry cycle. The bound, a minute past the lifetime, is not a
			// measure of speed.
			for left > 0 && time.Since(start) < fenced+c.life+time.Minute {
				time.Sleep(100 * time.Millisecond)
				left = dbsize(ctx, t, srv)
			}
			if left != 0 {
				t.Errorf("DBSIZE once the lifetime %v passed = %d, want 0", c.life, left)
			}
			t.Logf("n = %d: fenced in %v (used_memory %s); %d counters left %v after the start, with a lifetime of %v (used_memory %s)",
				n, fenced, mem, left, time.Since(start), c.life, usedMemory(ctx, t, srv))
		})
	}
}

// fenceAll fences, obtains and releases n distinct names with l, from 48
// goroutines.
func fenceAll(ctx context.Context, t *testing.T, l *lock.Locker, n int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 48)
	for range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				lk, err := l.Obtain(ctx, fmt.Sprintf("fencettl:%d", i), time.Second, lock.WithFencing())
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
		t.Fatalf("fenced obtain and release = %v, want nil", err)
	}
}

// dbsize returns how many keys the server holds.
func dbsize(ctx context.Context, t *testing.T, srv *redistest.Server) int {
	t.Helper()
	got, err := srv.Command(ctx, "DBSIZE")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(got)
	if err != nil {
		t.Fatalf("DBSIZE = %q, want a number", got)
	}
	return n
}

// usedMemory returns the server's used_memory_human (INFO memory).
func usedMemory(ctx context.Context, t *testing.T, srv *redistest.Server) string {
	t.Helper()
	info, err := srv.Command(ctx, "INFO", "memory")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "used_memory_human:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
