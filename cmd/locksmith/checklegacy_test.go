package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// window is the tests' --window: long enough for the legacy clients they
// simulate to send commands in it, whatever the machine's load.
const window = "2s"

// doer sends a command: a go-redis client, or one of its connections.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// errorceptionLock tries once to take the lock name as errorception/redis-lock
// (2013 and before, a Node client) does: the key is lock.<name>, the value
// Date.now() + timeout + 1 in milliseconds; SETNX, and when that fails, GET
// and, if the timestamp passed, GETSET, which wins if the old value is the
// one read.
func errorceptionLock(ctx context.Context, c doer, name string, timeout time.Duration) error {
	key := "lock." + name
	expiry := strconv.FormatInt(time.Now().Add(timeout).UnixMilli()+1, 10)
	set, err := c.Do(ctx, "SETNX", key, expiry).Int()
	if err != nil || set == 1 {
		return err
	}
	current, err := c.Do(ctx, "GET", key).Text()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if v, _ := strconv.ParseFloat(current, 64); err != nil || v > float64(time.Now().UnixMilli()) {
		return err
	}
	return c.Do(ctx, "GETSET", key, expiry).Err()
}

// legacyTraffic runs an errorception/redis-lock client against addr until
// the test ends: it takes lock.<name> for 1ms again and again, and never
// releases it, as a holder that crashed, so that each attempt sends SETNX,
// GET and GETSET.
func legacyTraffic(t *testing.T, addr, name string) {
	client := redistest.GoRedis(t, addr, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := errorceptionLock(ctx, client, name, time.Millisecond); err != nil && ctx.Err() == nil {
				t.Errorf("the legacy client: %v", err)
				return
			}
		}
	}()
}

// legacyHolder takes lock.<name> for an hour as errorception/redis-lock does,
// on a connection of its own named clientName, which then stays idle: its
// last command stays SETNX.
func legacyHolder(t *testing.T, addr, name, clientName string) {
	conn := redistest.GoRedis(t, addr, 2).Conn()
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.Do(ctx(t), "CLIENT", "SETNAME", clientName).Err(); err != nil {
		t.Fatalf("CLIENT SETNAME: %v", err)
	}
	if err := errorceptionLock(ctx(t), conn, name, time.Hour); err != nil {
		t.Fatalf("the legacy holder: %v", err)
	}
}

// checkJSON runs check-legacy --json with env and args, and returns the
// result and the report it printed.
func checkJSON(t *testing.T, env []string, args ...string) (result, legacyReport) {
	t.Helper()
	r := locksmith(t, env, append([]string{"check-legacy", "--json", "--window", window}, args...)...)
	var rep legacyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("check-legacy --json printed no JSON report (%v):\n%s", err, r)
	}
	return r, rep
}

// serverOf returns the report's server addr.
func serverOf(t *testing.T, rep legacyReport, addr string) *serverReport {
	t.Helper()
	for _, s := range rep.Servers {
		if s.Addr == addr {
			return s
		}
	}
	t.Fatalf("got no server %s in the report %+v", addr, rep)
	return nil
}

func TestCheckLegacy(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	redistest.RequireBinary(t)

	t.Run("an active legacy client is found, with its connection and key", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		legacyHolder(t, srv.Addr, "report", "billing-cron")
		legacyTraffic(t, srv.Addr, "invoices")
		r, rep := checkJSON(t, []string{"LOCKSMITH_URL=single://" + srv.Addr})
		if r.code != exitLegacyFound || rep.Verdict != verdictFound {
			t.Fatalf("got verdict %q, %s\nwant %q, exit %d", rep.Verdict, r, verdictFound, exitLegacyFound)
		}
		s := serverOf(t, rep, srv.Addr)
		if s.Calls["setnx"] == 0 || s.Calls["getset"] == 0 {
			t.Errorf("got calls %v, want SETNX and GETSET calls", s.Calls)
		}
		var named bool
		for _, c := range s.Clients {
			named = named || c.Name == "billing-cron" && c.Cmd == "setnx"
		}
		if !named {
			t.Errorf("got clients %+v, want billing-cron, whose last command was setnx", s.Clients)
		}
		var key *legacyKey
		for i, k := range s.Keys {
			if k.Key == "lock.report" {
				key = &s.Keys[i]
			}
		}
		if key == nil || key.Unit != "milliseconds" || !key.NoTTL || time.Until(key.Expiry) < 30*time.Minute {
			t.Errorf("got keys %+v, want lock.report, a timestamp in milliseconds about an hour ahead with no TTL", s.Keys)
		}
	})

	t.Run("the library's single strategy is not flagged", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		url := "single://" + srv.Addr
		l := openLocker(t, url)
		ctx, cancel := context.WithCancel(ctx(t))
		// Take and release locks, fenced and with metadata: SET NX PX in
		// scripts, and a fencing counter with no TTL. The first lock is
		// taken before the check starts, so that its scan, at the start of
		// the window, finds the counter; the others all through the window.
		obtainRelease := func() error {
			lk, err := l.Obtain(ctx, "lock.report", time.Minute, lock.WithFencing(), lock.WithMetadata(`{"host":"h"}`))
			if err == nil {
				err = lk.Release(ctx)
			}
			return err
		}
		if err := obtainRelease(); err != nil {
			t.Fatalf("the single strategy's first lock: %v", err)
		}
		done := make(chan error, 1)
		go func() {
			for ctx.Err() == nil {
				if err := obtainRelease(); err != nil && ctx.Err() == nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		r, rep := checkJSON(t, []string{"LOCKSMITH_URL=" + url})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("the single strategy's locks: %v", err)
		}
		if r.code != exitOK || rep.Verdict != verdictClean {
			t.Fatalf("got verdict %q, %s\nwant %q, exit 0", rep.Verdict, r, verdictClean)
		}
		if s := serverOf(t, rep, srv.Addr); s.Calls["evalsha"]+s.Calls["eval"] == 0 || s.Scanned == 0 {
			t.Errorf("got calls %v and %d keys scanned, want the single strategy's scripts counted and its keys scanned", s.Calls, s.Scanned)
		}
	})

	t.Run("the library's setnx-getset with a safety TTL, holding a lock, is not flagged", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		url := "setnx-getset://" + srv.Addr + "?format=ms&safety_ttl=1m"
		lk, err := openLocker(t, url).Obtain(ctx(t), "lock.report", time.Hour)
		if err != nil {
			t.Fatalf("Obtain: %v", err)
		}
		t.Cleanup(func() { _ = lk.Release(context.Background()) })
		r, rep := checkJSON(t, []string{"LOCKSMITH_URL=" + url})
		if r.code != exitOK || rep.Verdict != verdictClean {
			t.Fatalf("got verdict %q, %s\nwant %q, exit 0", rep.Verdict, r, verdictClean)
		}
		if s := serverOf(t, rep, srv.Addr); len(s.Keys) != 1 || s.Keys[0].NoTTL {
			t.Errorf("got keys %+v, want lock.report listed, with its TTL", s.Keys)
		}
	})

	t.Run("a leaked legacy key is found with no traffic", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		expired := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
		if _, err := srv.Command(ctx(t), "SET", "lock:nightly", expired); err != nil {
			t.Fatal(err)
		}
		r := locksmith(t, []string{"LOCKSMITH_URL=single://" + srv.Addr}, "check-legacy", "--window", window)
		if r.code != exitLegacyFound {
			t.Fatalf("got %s\nwant exit %d", r, exitLegacyFound)
		}
		for _, want := range []string{verdictFound + ":", `key "lock:nightly" holds a legacy timestamp (seconds) and no TTL`, "(leaked)"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("got stdout\n%s\nwant %q in it", r.stdout, want)
			}
		}
	})

	t.Run("values that are no timestamps around now are not flagged", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		for _, kv := range [][]string{
			{"counter", "42"},                  // 1970 in seconds
			{"{lock:a}:fence", "7"},            // single's fencing counter
			{"old", "1000000000"},              // 2001
			{"far", "99999999999"},             // 5138 in seconds, 1973 in milliseconds
			{"word", "soon"},                   // no number
			{"long", strings.Repeat("1", 100)}, // too long for a timestamp
		} {
			if _, err := srv.Command(ctx(t), "SET", kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := srv.Command(ctx(t), "RPUSH", "list", "1"); err != nil {
			t.Fatal(err)
		}
		r, rep := checkJSON(t, []string{"LOCKSMITH_URL=single://" + srv.Addr})
		if s := serverOf(t, rep, srv.Addr); r.code != exitOK || len(s.Keys) != 0 || s.Scanned != 7 {
			t.Errorf("got %s\nwant exit 0, no keys, 7 scanned", r)
		}
	})

	t.Run("--prefix narrows the scan", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		now := strconv.FormatInt(time.Now().Unix(), 10)
		for _, key := range []string{"lock.a", "lock*b", "other"} {
			if _, err := srv.Command(ctx(t), "SET", key, now); err != nil {
				t.Fatal(err)
			}
		}
		_, rep := checkJSON(t, []string{"LOCKSMITH_URL=single://" + srv.Addr}, "--prefix", "lock*")
		if s := serverOf(t, rep, srv.Addr); s.Scanned != 1 || len(s.Keys) != 1 || s.Keys[0].Key != "lock*b" {
			t.Errorf("got %d keys scanned, keys %+v; want lock*b alone (the prefix is no pattern)", s.Scanned, s.Keys)
		}
	})

	t.Run("a user denied INFO gets inconclusive", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		if _, err := srv.Command(ctx(t), "ACL", "SETUSER", "checker", "on", ">secret", "~*", "-@all", "+client|list", "+scan", "+getrange", "+pttl"); err != nil {
			t.Fatal(err)
		}
		r := locksmith(t, []string{"LOCKSMITH_URL=single://checker@" + srv.Addr, "LOCKSMITH_PASSWORD=secret"}, "check-legacy", "--window", window)
		if r.code != exitInconclusive || !strings.Contains(r.stdout, verdictInconclusive+":\n  "+srv.Addr+" denied INFO commandstats (NOPERM") {
			t.Errorf("got %s\nwant exit %d, inconclusive as INFO was denied", r, exitInconclusive)
		}
	})

	t.Run("a user with the ACL of the help gets a verdict", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		rule := strings.Fields("ACL SETUSER checker on >secret ~* -@all +info +client|list +scan +getrange +pttl")
		if _, err := srv.Command(ctx(t), rule...); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Command(ctx(t), "SET", "k", "v"); err != nil {
			t.Fatal(err)
		}
		r := locksmith(t, []string{"LOCKSMITH_URL=single://checker@" + srv.Addr, "LOCKSMITH_PASSWORD=secret"}, "check-legacy", "--window", window)
		if r.code != exitOK {
			t.Errorf("got %s\nwant exit 0", r)
		}
	})

	t.Run("redlock: legacy traffic on one server of three names that server", func(t *testing.T) {
		t.Parallel()
		srvs := redistest.Start(t, 3)
		legacyTraffic(t, srvs[1].Addr, "invoices")
		url := "LOCKSMITH_URL=redlock://" + srvs[0].Addr + "," + srvs[1].Addr + "," + srvs[2].Addr
		r, rep := checkJSON(t, []string{url})
		if r.code != exitLegacyFound {
			t.Fatalf("got %s\nwant exit %d", r, exitLegacyFound)
		}
		for _, reason := range rep.Reasons {
			if !strings.HasPrefix(reason, srvs[1].Addr) {
				t.Errorf("got the reason %q, want reasons about %s alone", reason, srvs[1].Addr)
			}
		}
		for i, srv := range srvs {
			if s := serverOf(t, rep, srv.Addr); (s.Calls["setnx"] > 0) != (i == 1) {
				t.Errorf("%s: got %d SETNX calls, want some on %s alone", srv.Addr, s.Calls["setnx"], srvs[1].Addr)
			}
		}
	})

	t.Run("an unreachable server gets unavailable at once", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		closed := redistest.ClosedAddrs(t, 2)
		url := "LOCKSMITH_URL=redlock://" + srv.Addr + "," + closed[0] + "," + closed[1]
		// A window longer than the hang detector: the check must not wait for it.
		r := locksmith(t, []string{url}, "check-legacy", "--json", "--window", "1h")
		var rep legacyReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitUnavailable || rep.Verdict != verdictUnavailable || len(rep.Servers) != 3 {
			t.Errorf("got %s\nwant exit %d and a JSON report of 3 servers, verdict %q", r, exitUnavailable, verdictUnavailable)
		}
	})

	t.Run("a paused server gets unavailable, once a command timed out", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		srv.Pause()
		// A window longer than the hang detector: the check must not wait for it.
		r := locksmith(t, []string{"LOCKSMITH_URL=single://" + srv.Addr}, "check-legacy", "--window", "1h")
		want := verdictUnavailable + ":\n  " + srv.Addr + " could not be reached: INFO commandstats: "
		if r.code != exitUnavailable || !strings.Contains(r.stdout, want) {
			t.Errorf("got %s\nwant exit %d and %q", r, exitUnavailable, want)
		}
	})

	t.Run("the scan limit stops the scan, and says so", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		for i := range 5 {
			if _, err := srv.Command(ctx(t), "SET", "k"+strconv.Itoa(i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		r := locksmith(t, []string{"LOCKSMITH_URL=single://" + srv.Addr}, "check-legacy", "--window", window, "--scan-limit", "2")
		want := "the scan of " + srv.Addr + " stopped at --scan-limit 2 keys: keys beyond were not read"
		if r.code != exitOK || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "scanned 2 keys") {
			t.Errorf("got %s\nwant exit 0, 2 keys scanned, and %q", r, want)
		}
	})

	t.Run("Ctrl-C ends the window", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, 1)[0]
		cmd, stdout, stderr := command(t, []string{"LOCKSMITH_URL=single://" + srv.Addr}, "-v", "check-legacy", "--window", "1h")
		pr, pw := io.Pipe()
		cmd.Stderr = io.MultiWriter(stderr, pw)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		watching := make(chan struct{})
		go func() {
			lines := bufio.NewScanner(pr)
			for lines.Scan() {
				if strings.Contains(lines.Text(), "watching") {
					close(watching)
					break
				}
			}
			_, _ = io.Copy(io.Discard, pr)
		}()
		select {
		case <-watching:
		case <-time.After(hang):
			_ = cmd.Process.Kill()
			t.Fatalf("check-legacy -v never said it was watching")
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		r := wait(t, cmd, stdout, stderr)
		_ = pw.Close()
		if r.code != exitSignal+int(syscall.SIGINT) {
			t.Errorf("got %s\nwant exit %d", r, exitSignal+int(syscall.SIGINT))
		}
	})

	t.Run("usage errors", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"--window", "0s"},
			{"--window", "soon"},
			{"--scan-limit", "0"},
			{"extra"},
		} {
			r := locksmith(t, []string{"LOCKSMITH_URL=single://" + redistest.ClosedAddr(t)}, append([]string{"check-legacy"}, args...)...)
			if r.code != exitUsage {
				t.Errorf("check-legacy %s: got %s\nwant exit %d", strings.Join(args, " "), r, exitUsage)
			}
		}
	})

	t.Run("the help says what it reads, never does, needs, and exits with", func(t *testing.T) {
		t.Parallel()
		r := locksmith(t, nil, "check-legacy", "--help")
		for _, want := range []string{"INFO commandstats", "CLIENT LIST", "SCAN MATCH", "never writes", "CONFIG RESETSTAT",
			"+info +client|list +scan +getrange +pttl", "0   clean", "1   legacy activity found", "3   inconclusive", "69  unavailable", "130 interrupted", "server-wide"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("got help\n%s\nwant %q in it", r.stdout, want)
			}
		}
	})
}

// openLocker opens a Locker of url in the test, closed when it ends.
func openLocker(t *testing.T, url string) *lock.Locker {
	t.Helper()
	c, err := config.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	l, err := config.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}
