package single_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestPlainLockOnASharedName: a plain lock of a name that a semaphore or a
// read-write lock holds is refused with an error that matches
// ErrMismatch and says which it holds, not obtained and not reported held,
// whatever its retry policy, with no failed clean-up (it wrote nothing),
// and the shared lock's holders are left as they were (docs/semaphores.md,
// "A plain lock on the same name").
func TestPlainLockOnASharedName(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := sharedLocker(t, addr)
	for _, c := range []struct {
		name  string
		shape lock.Option
		says  string
	}{
		{"semaphore", lock.WithPermits(2), "the key holds a semaphore of 2 permits, not a plain lock"},
		{"read-write lock", lock.WithRead(), "the key holds a read-write lock, not a plain lock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := conformance.Key(t)
			h, err := l.Obtain(ctx, key, time.Minute, c.shape)
			if err != nil {
				t.Fatalf("the shared lock's Obtain = %v, want a lock", err)
			}
			defer h.Release(ctx)
			var failed []error // clean-ups that failed
			hooks := lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
				err := next(ctx)
				if e.Op == "cleanup" && err != nil {
					failed = append(failed, err)
				}
				return err
			}})
			for _, retry := range []lock.RetryPolicy{lock.NoRetry(), lock.LimitAttempts(lock.Linear(time.Millisecond), 2)} {
				lk, err := l.Obtain(ctx, key, time.Minute, lock.WithRetry(retry), hooks)
				if err == nil {
					lk.Release(ctx)
				}
				if !errors.Is(err, lock.ErrMismatch) || errors.Is(err, lock.ErrNotObtained) || !strings.Contains(err.Error(), c.says) {
					t.Errorf("a plain Obtain of the shared lock's name = %v, want ErrMismatch, saying %q", err, c.says)
				}
			}
			if len(failed) != 0 {
				t.Errorf("clean-ups after the refusals failed: %v, want none: nothing was written to delete", failed)
			}
			st, err := l.Inspect(ctx, key)
			if err != nil || len(st.Holders) != 1 {
				t.Errorf("Inspect after the plain Obtains = %d holders, %v, want 1, nil", len(st.Holders), err)
			}
			if err := h.Refresh(ctx, time.Minute); err != nil {
				t.Errorf("the shared lock's Refresh = %v, want nil", err)
			}
		})
	}
}

// TestSharedTTLAndRefresh: a holder's TTL is its own lease, and a refresh
// extends its lease alone: the other holders' leases are left as they were.
func TestSharedTTLAndRefresh(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := sharedLocker(t, addr)
	key := conformance.Key(t)
	short, err := l.Obtain(ctx, key, 10*time.Second, lock.WithPermits(2))
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	defer short.Release(ctx)
	long, err := l.Obtain(ctx, key, time.Hour, lock.WithPermits(2))
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	defer long.Release(ctx)
	if ttl, err := short.TTL(ctx); err != nil || ttl > 10*time.Second || ttl < 9*time.Second {
		t.Errorf("the 10s holder's TTL = %v, %v, want its own lease, at most 10s", ttl, err)
	}
	if err := short.Refresh(ctx, 20*time.Second); err != nil {
		t.Fatalf("Refresh = %v, want nil", err)
	}
	if ttl, err := short.TTL(ctx); err != nil || ttl <= 10*time.Second {
		t.Errorf("the refreshed holder's TTL = %v, %v, want more than 10s", ttl, err)
	}
	if ttl, err := long.TTL(ctx); err != nil || ttl <= 59*time.Minute {
		t.Errorf("the other holder's TTL = %v, %v, want its own hour", ttl, err)
	}
	if err := long.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	if err := short.Refresh(ctx, 20*time.Second); err != nil {
		t.Errorf("Refresh after the other's Release = %v, want nil", err)
	}
	if _, err := long.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("the released holder's TTL = %v, want ErrNotHeld", err)
	}
}

// TestReadWriteFences: the write side fences as a plain lock does, from the
// counter at FenceKey, larger for every writer; a reader with WithFencing
// reads the current fence, the last writer's.
func TestReadWriteFences(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := sharedLocker(t, addr)
	key := conformance.Key(t)
	fenceOf := func(opts ...lock.Option) int64 {
		t.Helper()
		lk, err := l.Obtain(ctx, key, time.Minute, append(opts, lock.WithFencing())...)
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		defer lk.Release(ctx)
		fence, ok := lk.Fence()
		if !ok || fence <= 0 {
			t.Fatalf("Fence() = %d, %v, want a positive token", fence, ok)
		}
		return fence
	}
	first := fenceOf(lock.WithWrite())
	if got := fenceOf(lock.WithRead()); got != first {
		t.Errorf("a reader's fence after the writer's %d: %d, want the same", first, got)
	}
	plain := fenceOf()
	if plain <= first {
		t.Errorf("a plain lock's fence after the writer's %d: %d, want more: they share the counter", first, plain)
	}
	if second := fenceOf(lock.WithWrite()); second <= plain {
		t.Errorf("the next writer's fence: %d, want more than %d", second, plain)
	}
}

// TestSemaphorePermitCost: taking and releasing one permit makes the server
// run at most 15 commands (INFO commandstats, which counts those that the
// scripts run), however many others hold one: with 999 of 1000 permits
// held, at most 1.5 times as many as with 2 of 3 (scripts that read every
// holder's permit, as before, ran 1034 with 999 of 1000 held, 37 with
// none). The others hold their permits with the same TTL, so that each
// acquisition extends the keys' expiry, as in a semaphore whose holders all
// take one TTL. A count, not a timing.
func TestSemaphorePermitCost(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const most = 15
	var few, many float64 // with 2 of 3 held, and 999 of 1000
	for _, c := range []struct {
		permits, held int
		cost          *float64
	}{{3, 0, nil}, {3, 2, &few}, {1000, 999, &many}} {
		t.Run(fmt.Sprintf("%d of %d held", c.held, c.permits), func(t *testing.T) {
			key := conformance.Key(t)
			permits := lock.WithPermits(c.permits)
			others := sharedLocker(t, srv.Addr)
			for range c.held {
				lk, err := others.Obtain(ctx, key, time.Minute, permits)
				if err != nil {
					t.Fatalf("Obtain of a permit that others hold = %v, want a lock", err)
				}
				defer lk.Release(ctx)
			}
			l := sharedLocker(t, srv.Addr)
			cycle := func() {
				t.Helper()
				lk, err := l.Obtain(ctx, key, time.Minute, permits)
				if err != nil {
					t.Fatalf("Obtain with %d of %d permits held = %v, want a lock", c.held, c.permits, err)
				}
				if err := lk.Release(ctx); err != nil {
					t.Fatalf("Release = %v, want nil", err)
				}
			}
			cycle() // loads the scripts and opens the connection
			const cycles = 10
			before := commandStats(t, ctx, srv)
			for range cycles {
				cycle()
			}
			ran, total := map[string]float64{}, 0.0
			for cmd, n := range commandStats(t, ctx, srv) {
				if n -= before[cmd]; n > 0 {
					ran[cmd] = float64(n) / cycles
					total += ran[cmd]
				}
			}
			t.Logf("per permit taken and released: %.1f commands, %v", total, ran)
			if c.cost != nil {
				*c.cost = total
			}
			if total > most {
				t.Errorf("commands the server ran per permit taken and released = %.1f, want at most %d", total, most)
			}
		})
	}
	if few > 0 && many > 1.5*few {
		t.Errorf("commands per permit with 999 of 1000 held = %.1f, want at most 1.5 × %.1f, as with 2 of 3 held", many, few)
	}
}

// commandStats returns how many times srv has run each command (INFO
// commandstats, those that scripts ran included), but for INFO and a
// connection's handshake.
func commandStats(t *testing.T, ctx context.Context, srv *redistest.Server) map[string]int64 {
	t.Helper()
	info, err := srv.Command(ctx, "INFO", "commandstats")
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	ran := map[string]int64{}
	for line := range strings.Lines(info) {
		// cmdstat_evalsha:calls=12,usec=345,...; cmdstat_client|setname:...
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isStat := strings.CutPrefix(name, "cmdstat_")
		cmd, _, _ := strings.Cut(name, "|")
		switch {
		case !ok || !isStat:
			continue
		case cmd == "info", cmd == "hello", cmd == "client", cmd == "auth", cmd == "select", cmd == "ping":
			continue
		}
		n, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		calls, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		ran[cmd] += calls
	}
	return ran
}

// TestSemaphoreReapsEveryExpiredHolder: an acquisition that finds the
// leases of many crashed holders ended (more than one batch of the reaper,
// 100) frees all their permits at once, and takes the lowest free; only the
// live holders keep an entry on the server.
func TestSemaphoreReapsEveryExpiredHolder(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv := redistest.Start(t, 1)[0]
	rdb := redistest.GoRedis(t, srv.Addr, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := sharedLocker(t, srv.Addr)
	key := conformance.Key(t)
	permits := lock.WithPermits(300)
	live, err := l.Obtain(ctx, key, time.Minute, permits)
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	defer live.Release(ctx)
	const crashed = 250
	for range crashed {
		if _, err := l.Obtain(ctx, key, 100*time.Millisecond, permits); err != nil {
			t.Fatalf("Obtain of a holder that crashes = %v, want a lock", err)
		}
	}
	for { // until the server ended the crashed holders' leases
		st, err := l.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect = %v, want nil", err)
		}
		if len(st.Holders) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	lk, err := l.Obtain(ctx, key, time.Minute, permits)
	if err != nil {
		t.Fatalf("Obtain after %d leases ended = %v, want a lock", crashed, err)
	}
	defer lk.Release(ctx)
	if p, _ := lk.Permit(); p != 1 {
		t.Errorf("Permit() = %d, want 1: the lowest free, once the crashed holders' permits were freed", p)
	}
	m, _ := cas.Companion(key, "shared")
	if n, err := rdb.ZCard(ctx, key).Result(); err != nil || n != 2 {
		t.Errorf("the holders' sorted set has %d entries (%v), want 2: the expired ones reaped", n, err)
	}
	fields, err := rdb.HKeys(ctx, m).Result()
	var held []string
	for _, f := range fields {
		if strings.HasPrefix(f, "p") {
			held = append(held, f)
		}
	}
	if err != nil || len(held) != 2 {
		t.Errorf("the hash %s holds %d permits (%v), want 2: the expired holders' freed", m, len(held), err)
	}
}

// TestSemaphoreNameDeleted: deleting a semaphore's name (DEL key) frees it,
// as it frees a plain lock: the next Obtain may state another limit, and
// gets every permit.
func TestSemaphoreNameDeleted(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv := redistest.Start(t, 1)[0]
	rdb := redistest.GoRedis(t, srv.Addr, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := sharedLocker(t, srv.Addr)
	key := conformance.Key(t)
	for range 3 {
		if _, err := l.Obtain(ctx, key, time.Minute, lock.WithPermits(3)); err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
	}
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	for want := range 2 {
		lk, err := l.Obtain(ctx, key, time.Minute, lock.WithPermits(2))
		if err != nil {
			t.Fatalf("Obtain WithPermits(2) after the name was deleted = %v, want a lock", err)
		}
		defer lk.Release(ctx)
		if p, _ := lk.Permit(); p != want {
			t.Errorf("Permit() = %d, want %d", p, want)
		}
	}
}
