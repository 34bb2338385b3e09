package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// requireGCC skips t unless gcc is on PATH, and fails it instead when
// LOCKSMITH_REQUIRE_JEPSEN=1.
func requireGCC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		require(t, fmt.Errorf("the clock shim needs gcc: %w", err))
	}
}

// newClock makes a Clock in dir and closes it when t ends.
func newClock(t *testing.T, dir string) *Clock {
	t.Helper()
	requireGCC(t)
	c, err := NewClock(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// set sets c's offset, or fails t.
func set(t *testing.T, c *Clock, offset time.Duration) {
	t.Helper()
	if err := c.Set(offset); err != nil {
		t.Fatal(err)
	}
}

// date runs date +%s%N with env appended to the environment and returns
// the time it printed, with the real time before and after the run.
func date(t *testing.T, env []string) (got, before, after time.Time) {
	t.Helper()
	cmd := exec.Command("date", "+%s%N")
	cmd.Env = append(os.Environ(), env...)
	before = time.Now()
	out, err := cmd.Output()
	after = time.Now()
	if err != nil {
		t.Fatalf("date: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("date printed %q: %v", out, err)
	}
	return time.Unix(0, ns), before, after
}

// TestClockShim runs date under a Clock: the cheap check that the shim
// loads and shifts, which needs no namespace.
func TestClockShim(t *testing.T) {
	c := newClock(t, t.TempDir())
	for _, offset := range []time.Duration{1000 * time.Hour, -1000*time.Hour - 250*time.Millisecond} {
		t.Run("date under Env shows an offset of "+offset.String(), func(t *testing.T) {
			set(t, c, offset)
			defer set(t, c, 0)
			got, before, after := date(t, c.Env())
			if got.Before(before.Add(offset)) || got.After(after.Add(offset)) {
				t.Errorf("date under Env: got %v, want between %v and %v", got, before.Add(offset), after.Add(offset))
			}
		})
	}
	t.Run("date without Env keeps real time", func(t *testing.T) {
		set(t, c, time.Hour)
		defer set(t, c, 0)
		if got, before, after := date(t, nil); got.Before(before) || got.After(after) {
			t.Errorf("date without Env: got %v, want between %v and %v", got, before, after)
		}
	})
	t.Run("the shim without an offset file of 8 bytes shifts nothing", func(t *testing.T) {
		set(t, c, time.Hour)
		defer set(t, c, 0)
		empty := filepath.Join(t.TempDir(), "empty")
		if err := os.WriteFile(empty, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, env := range [][]string{
			{c.Env()[0]}, // LD_PRELOAD alone
			{c.Env()[0], clockFileEnv + "=" + filepath.Join(t.TempDir(), "none")},
			{c.Env()[0], clockFileEnv + "=" + empty},
		} {
			if got, before, after := date(t, env); got.Before(before) || got.After(after) {
				t.Errorf("date under %q: got %v, want between %v and %v", env, got, before, after)
			}
		}
	})
	t.Run("Offset is what Set set", func(t *testing.T) {
		set(t, c, -3*time.Second)
		defer set(t, c, 0)
		if got := c.Offset(); got != -3*time.Second {
			t.Errorf("Offset: got %v, want -3s", got)
		}
	})
	t.Run("a closed Clock refuses Set and puts its processes back at real time", func(t *testing.T) {
		c, err := NewClock(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		set(t, c, time.Hour)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Set(time.Hour); err == nil {
			t.Errorf("Set after Close: got nil error, want one")
		}
		if got := c.Offset(); got != 0 {
			t.Errorf("Offset after Close: got %v, want 0", got)
		}
		if got, before, after := date(t, c.Env()); got.Before(before) || got.After(after) {
			t.Errorf("date under Env after Close: got %v, want between %v and %v", got, before, after)
		}
	})
	t.Run("Strobe flips between 0 and delta, and ends at 0", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Strobe(ctx, time.Hour, time.Millisecond) }()
		seen := map[time.Duration]bool{}
		for start := time.Now(); len(seen) < 2 && time.Since(start) < 10*time.Second; time.Sleep(100 * time.Microsecond) {
			seen[c.Offset()] = true
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !seen[0] || !seen[time.Hour] || len(seen) != 2 {
			t.Errorf("offsets seen during Strobe: got %v, want 0 and 1h", seen)
		}
		if got := c.Offset(); got != 0 {
			t.Errorf("Offset after Strobe: got %v, want 0", got)
		}
	})
}

// TestNewClock: the shim is built once per dir, and NewClock says what is
// wrong when gcc is missing or fails.
func TestNewClock(t *testing.T) {
	requireGCC(t)
	t.Run("a second Clock in a dir reuses its shim, without gcc", func(t *testing.T) {
		dir := t.TempDir()
		first := newClock(t, dir)
		t.Setenv("PATH", t.TempDir())
		second, err := NewClock(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		if first.lib != second.lib {
			t.Errorf("second Clock's shim: got %s, want %s", second.lib, first.lib)
		}
		if first.file == second.file {
			t.Errorf("two Clocks' offset files: got both %s, want each its own", first.file)
		}
	})
	t.Run("without gcc, NewClock says so", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		c, err := NewClock(t.TempDir())
		if err == nil {
			c.Close()
			t.Fatal("NewClock without gcc: got nil error, want one")
		}
		if !strings.Contains(err.Error(), "needs gcc") {
			t.Errorf("NewClock without gcc: got %v, want an error saying it needs gcc", err)
		}
	})
	t.Run("when gcc fails, NewClock gives its output", func(t *testing.T) {
		bin := t.TempDir()
		script := "#!/bin/sh\necho 'gcc: fatal error: out of cheese' >&2\nexit 1\n"
		if err := os.WriteFile(filepath.Join(bin, "gcc"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin)
		dir := t.TempDir()
		c, err := NewClock(dir)
		if err == nil {
			c.Close()
			t.Fatal("NewClock with a failing gcc: got nil error, want one")
		}
		if !strings.Contains(err.Error(), "out of cheese") {
			t.Errorf("NewClock with a failing gcc: got %v, want gcc's output in it", err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
			t.Errorf("files left by a failed build: got %q, want none", left)
		}
	})
}

// pttl sets key for 30 s at the clock's offset from, moves the clock to
// to, and returns the key's PTTL there with the real time that went by
// from just before the SET to just after the PTTL: the PTTL is 30 s - (to
// - from) less at most that much.
func pttl(t *testing.T, c *Clock, admin *redis.Client, key string, from, to time.Duration) (ttl, elapsed time.Duration) {
	t.Helper()
	ctx := context.Background()
	set(t, c, from)
	start := time.Now()
	if err := admin.Set(ctx, key, "v", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	set(t, c, to)
	ttl, err := admin.PTTL(ctx, key).Result()
	elapsed = time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	set(t, c, 0)
	return ttl, elapsed
}

// TestClock moves the clock of a redis-server in a namespace: a jump moves
// every expiry, as Redis keeps them in wall-clock time.
func TestClock(t *testing.T) {
	requireNet(t)
	n := newNet(t, "n1", "n2")
	dir := shortDir(t)
	c := newClock(t, dir)
	s := NewServer(n.Node("n1"), dir)
	s.Env = c.Env()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Kill(); err != nil {
			t.Error(err)
		}
	})
	admin := s.Admin()
	defer admin.Close()
	ctx := context.Background()

	// within checks a PTTL against want less at most elapsed, give or take
	// the millisecond that Redis rounds to.
	within := func(t *testing.T, ttl, elapsed, want time.Duration) {
		t.Helper()
		if ttl < want-elapsed-time.Millisecond || ttl > want+time.Millisecond {
			t.Errorf("PTTL: got %v, want between %v and %v", ttl, want-elapsed, want)
		}
	}
	t.Run("a key's PTTL at offset 0 is its PX", func(t *testing.T) {
		ttl, elapsed := pttl(t, c, admin, "k0", 0, 0)
		t.Logf("PTTL %d ms, %v after SET", ttl.Milliseconds(), elapsed)
		within(t, ttl, elapsed, 30*time.Second)
	})
	t.Run("+20s takes 20 s off a key's PTTL", func(t *testing.T) {
		ttl, elapsed := pttl(t, c, admin, "k20", 0, 20*time.Second)
		t.Logf("PTTL %d ms, %v after SET", ttl.Milliseconds(), elapsed)
		within(t, ttl, elapsed, 10*time.Second)
	})
	t.Run("+40s ends a 30 s key", func(t *testing.T) {
		if ttl, _ := pttl(t, c, admin, "k40", 0, 40*time.Second); ttl != -2 {
			t.Errorf("PTTL: got %v, want -2ns (no key)", ttl)
		}
		if n, err := admin.Exists(ctx, "k40").Result(); err != nil || n != 0 {
			t.Errorf("EXISTS at offset 0 again: got %d, %v, want 0: an expired key stays gone", n, err)
		}
	})
	t.Run("-60s adds 60 s to a key's PTTL", func(t *testing.T) {
		ttl, elapsed := pttl(t, c, admin, "k-60", 0, -60*time.Second)
		t.Logf("PTTL %d ms, %v after SET", ttl.Milliseconds(), elapsed)
		within(t, ttl, elapsed, 90*time.Second)
	})
	t.Run("a key set for 30 s at -60s is gone at 0", func(t *testing.T) {
		ttl, elapsed := pttl(t, c, admin, "k-60b", -60*time.Second, -60*time.Second)
		t.Logf("PTTL at -60s %d ms, %v after SET", ttl.Milliseconds(), elapsed)
		within(t, ttl, elapsed, 30*time.Second)
		if ttl, err := admin.PTTL(ctx, "k-60b").Result(); err != nil || ttl != -2 {
			t.Errorf("PTTL back at 0: got %v, %v, want -2ns (no key): its expiry was 30 s before real time", ttl, err)
		}
	})
	t.Run("TIME under the clock is this process's real time + offset", func(t *testing.T) {
		const offset = -1000*time.Hour - 250*time.Millisecond // a fraction, below 0: gettimeofday's carry
		set(t, c, offset)
		defer set(t, c, 0)
		before := time.Now()
		got, err := admin.Time(ctx).Result()
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if got.Before(before.Add(offset).Truncate(time.Microsecond)) || got.After(after.Add(offset)) {
			t.Errorf("TIME: got %v, want between %v and %v", got, before.Add(offset), after.Add(offset))
		}
	})
	t.Run("the server answers across jumps and does not crash", func(t *testing.T) {
		for _, offset := range []time.Duration{time.Hour, -time.Hour, 24 * time.Hour, -24 * time.Hour, 0} {
			set(t, c, offset)
			if err := admin.Ping(ctx).Err(); err != nil {
				t.Errorf("PING at offset %v: got %v, want PONG", offset, err)
			}
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Strobe(sctx, 10*time.Second, time.Millisecond) }()
		for i, start := 0, time.Now(); time.Since(start) < 100*time.Millisecond; i++ {
			if err := admin.Set(ctx, "strobe", i, 5*time.Second).Err(); err != nil {
				t.Errorf("SET during Strobe: got %v, want OK", err)
				break
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := admin.Ping(ctx).Err(); err != nil {
			t.Errorf("PING after Strobe: got %v, want PONG", err)
		}
		select {
		case <-s.done:
			t.Errorf("server: got ended, want running")
		default:
		}
		log, err := os.ReadFile(filepath.Join(dir, s.Node.Name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, crash := range []string{"BUG REPORT", "crashed by signal"} {
			if strings.Contains(string(log), crash) {
				t.Errorf("server log: got %q in it, want no crash:\n%s", crash, log)
			}
		}
	})
	t.Run("Check passes on a server under the clock, and leaves the clock as it was", func(t *testing.T) {
		set(t, c, 5*time.Second)
		defer set(t, c, 0)
		if err := c.Check(s); err != nil {
			t.Error(err)
		}
		if got := c.Offset(); got != 5*time.Second {
			t.Errorf("Offset after Check: got %v, want 5s", got)
		}
		if n, err := admin.Exists(ctx, "locksmith-jepsen:clock-check").Result(); err != nil || n != 0 {
			t.Errorf("EXISTS of Check's key after it: got %d, %v, want 0", n, err)
		}
	})
	t.Run("Check fails on a server that is not under the clock, naming its binary", func(t *testing.T) {
		other := startServer(t, n.Node("n2"), shortDir(t))
		bin, _ := exec.LookPath("redis-server")
		if b := os.Getenv("LOCKSMITH_REDIS_SERVER"); b != "" {
			bin = b
		}
		err := c.Check(other)
		if err == nil || !strings.Contains(err.Error(), bin) {
			t.Errorf("Check: got %v, want an error naming %s", err, bin)
		}
		// Under the clock's Env in name only, without LD_PRELOAD in effect,
		// the server's expiries do not move: Check finds that by the PTTL.
		other.Env = c.Env()
		err = c.Check(other)
		if err == nil || !strings.Contains(err.Error(), "does not follow the clock shim") {
			t.Errorf("Check of a server whose clock does not move: got %v, want an error saying it does not follow", err)
		}
	})
}
