package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// servers starts n redis-servers and returns LOCKSMITH_URL for strategy
// over them, and the servers.
func servers(t *testing.T, strategy string, n int) (env string, srvs []*redistest.Server) {
	t.Helper()
	srvs = redistest.Start(t, n)
	addrs := make([]string, n)
	for i, s := range srvs {
		addrs[i] = s.Addr
	}
	return "LOCKSMITH_URL=" + strategy + "://" + strings.Join(addrs, ","), srvs
}

// locker opens, in the test process, the Locker of env's LOCKSMITH_URL: a
// library client of the same servers as locksmith's.
func locker(t *testing.T, env string) *lock.Locker {
	t.Helper()
	return openLocker(t, strings.TrimPrefix(env, "LOCKSMITH_URL="))
}

// get returns the value of key on srv, "" when there is none.
func get(t *testing.T, srv *redistest.Server, key string) string {
	t.Helper()
	v, err := srv.Command(ctx(t), "GET", key)
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// inspected is inspect's JSON object, as the tests read it.
type inspected struct {
	Name        string `json:"name"`
	Held        bool   `json:"held"`
	Verdict     string `json:"verdict"`
	TTL         int64  `json:"ttl_ms"`
	Fingerprint string `json:"fingerprint"`
	Holder      *struct {
		holder
		Age int64 `json:"age_ms"`
	} `json:"holder"`
	Metadata  string         `json:"metadata"`
	Fence     int64          `json:"fence"`
	Waiters   int            `json:"waiters"`
	Permits   int            `json:"permits"`
	ReadWrite bool           `json:"read_write"`
	Holders   []sharedHolder `json:"holders"`
	Expiry    *time.Time     `json:"expiry"`
	Takeover  *bool          `json:"takeover"`
	Nodes     []struct {
		Node        string `json:"node"`
		Held        bool   `json:"held"`
		TTL         int64  `json:"ttl_ms"`
		Fingerprint string `json:"fingerprint"`
		Error       string `json:"error"`
		Broken      *bool  `json:"broken"` // break's
	} `json:"nodes"`
	Error  string `json:"error"`
	Broken bool   `json:"broken"` // break's
	Note   string `json:"note"`   // break's
}

// sharedHolder is a holder of a semaphore or a read-write lock, as
// inspect's JSON gives it.
type sharedHolder struct {
	Fingerprint string `json:"fingerprint"`
	TTL         int64  `json:"ttl_ms"`
	Permit      *int   `json:"permit"`
	Side        string `json:"side"`
	Holder      *struct {
		holder
		Age int64 `json:"age_ms"`
	} `json:"holder"`
	Metadata string `json:"metadata"`
}

// inspectJSON runs locksmith inspect --json name, and returns what it printed.
func inspectJSON(t *testing.T, env, name string) (inspected, result) {
	t.Helper()
	r := locksmith(t, []string{env}, "inspect", "--json", name)
	return parse(t, r), r
}

// parse reads the JSON object that r printed.
func parse(t *testing.T, r result) inspected {
	t.Helper()
	var got inspected
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("got output that is not JSON (%v):\n%s", err, r)
	}
	return got
}

// acquire runs locksmith acquire name with args and returns the handle it
// printed, and its token.
func acquire(t *testing.T, env, name string, args ...string) (handle, token string) {
	t.Helper()
	r := locksmith(t, []string{env}, append([]string{"acquire", name}, args...)...)
	if r.code != 0 {
		t.Fatalf("acquire %s: got %s\nwant exit 0", name, r)
	}
	handle = strings.TrimSpace(r.stdout)
	h, err := decodeHandle(handle)
	if err != nil {
		t.Fatalf("acquire %s: got handle %q: %v", name, handle, err)
	}
	return handle, h.token
}

// noSecret fails t if token appears in any output of r.
func noSecret(t *testing.T, token string, rs ...result) {
	t.Helper()
	for _, r := range rs {
		if strings.Contains(r.stdout+r.stderr, token) {
			t.Errorf("got the token in the output:\n%s", r)
		}
	}
}

func TestInspect(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	t.Run("free", func(t *testing.T) {
		t.Parallel()
		env := url(t, "single")
		got, r := inspectJSON(t, env, "job")
		if r.code != exitNotHeld || got.Held || got.Verdict != "free" || got.TTL != 0 || got.Fingerprint != "" {
			t.Errorf("got %s\nwant exit 1, held false, verdict free, ttl_ms 0, no fingerprint", r)
		}
		if h := locksmith(t, []string{env}, "inspect", "job"); h.code != exitNotHeld || !strings.Contains(h.stdout, "free") {
			t.Errorf("got %s\nwant exit 1 and \"free\"", h)
		}
	})

	t.Run("held by locksmith acquire: the holder's metadata", func(t *testing.T) {
		t.Parallel()
		env := url(t, "single")
		_, token := acquire(t, env, "job", "--ttl", "1m")
		got, r := inspectJSON(t, env, "job")
		host, _ := os.Hostname()
		switch h := got.Holder; {
		case r.code != 0 || !got.Held || got.Verdict != "held":
			t.Fatalf("got %s\nwant exit 0, held", r)
		case got.Fingerprint != strategy.Fingerprint(token):
			t.Errorf("got fingerprint %q, want %q", got.Fingerprint, strategy.Fingerprint(token))
		case got.TTL <= 0 || got.TTL > time.Minute.Milliseconds():
			t.Errorf("got ttl_ms %d, want in (0, 60000]", got.TTL)
		case h == nil:
			t.Fatalf("got no holder in\n%s", r.stdout)
		case h.Host != host || h.PID != os.Getpid() || h.Via != "acquire" || !strings.HasPrefix(h.By, "locksmith ") || h.Start.IsZero() || h.Age < 0:
			t.Errorf("got holder %+v, want host %q, pid %d (acquire's caller), via acquire, by locksmith, a start and an age", *h, host, os.Getpid())
		case got.Fence <= 0:
			t.Errorf("got fence %d, want a fencing token", got.Fence)
		case got.Metadata != "":
			t.Errorf("got raw metadata %q, want it parsed only", got.Metadata)
		}
		h := locksmith(t, []string{env}, "inspect", "job")
		for _, want := range []string{"held", got.Fingerprint, host, "acquire", "fence"} {
			if !strings.Contains(h.stdout, want) {
				t.Errorf("got %s\nwant %q in the table", h, want)
			}
		}
	})

	t.Run("held by a library client: its metadata raw", func(t *testing.T) {
		t.Parallel()
		env := url(t, "single")
		lk, err := locker(t, env).Obtain(ctx(t), "job", time.Minute, lock.WithMetadata("worker-7\x1b[2J"))
		if err != nil {
			t.Fatal(err)
		}
		got, r := inspectJSON(t, env, "job")
		if r.code != 0 || got.Metadata != "worker-7\x1b[2J" || got.Holder != nil || got.Fingerprint != strategy.Fingerprint(lk.Token()) {
			t.Errorf("got %s\nwant exit 0, metadata \"worker-7\\x1b[2J\", no holder, the client's fingerprint", r)
		}
		if h := locksmith(t, []string{env}, "inspect", "job"); !strings.Contains(h.stdout, `"worker-7\x1b[2J"`) {
			t.Errorf("got %s\nwant the metadata quoted, control characters escaped", h)
		}
	})

	t.Run("a queue with waiters", func(t *testing.T) {
		t.Parallel()
		env := url(t, "single")
		l := locker(t, env)
		held, err := l.Obtain(ctx(t), "job", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx(t))
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if lk, err := l.Obtain(wctx, "job", time.Minute, lock.WithRetry(lock.Linear(time.Second))); err == nil {
					_ = lk.Release(context.Background())
				}
			}()
		}
		defer wg.Wait()
		defer cancel()
		got := poll(t, func() (inspected, bool) {
			got, _ := inspectJSON(t, env, "job")
			return got, got.Waiters == 2
		})
		if !got.Held || got.Fingerprint != strategy.Fingerprint(held.Token()) {
			t.Errorf("got %+v, want held by the first client", got)
		}
		if h := locksmith(t, []string{env}, "inspect", "job"); !strings.Contains(h.stdout, "waiters") {
			t.Errorf("got %s\nwant a waiters row", h)
		}
	})

	t.Run("redlock with a node paused: its row has the error, and the verdict", func(t *testing.T) {
		t.Parallel()
		env, srvs := servers(t, "redlock", 3)
		token := everyNode(t, env, "job")
		srvs[1].Pause()
		t.Cleanup(srvs[1].Resume)
		got, r := inspectJSON(t, env, "job")
		if r.code != 0 || !got.Held || len(got.Nodes) != 3 {
			t.Fatalf("got %s\nwant exit 0, held, 3 nodes", r)
		}
		if !strings.HasPrefix(got.Verdict, "held on 2 of 3 nodes (quorum 2), minimum validity ") {
			t.Errorf("got verdict %q, want \"held on 2 of 3 nodes (quorum 2), minimum validity …\"", got.Verdict)
		}
		for i, n := range got.Nodes {
			ok := n.Node == srvs[i].Addr && n.Held == (i != 1) && (n.Error != "") == (i == 1) &&
				(n.Fingerprint == strategy.Fingerprint(token)) == (i != 1)
			if !ok {
				t.Errorf("got node %d %+v, want %s, held with the fingerprint unless paused, an error if paused", i, n, srvs[i].Addr)
			}
		}
		h := locksmith(t, []string{env}, "inspect", "job")
		for _, want := range []string{"NODE", srvs[0].Addr, srvs[1].Addr, srvs[2].Addr, "held on 2 of 3 nodes"} {
			if !strings.Contains(h.stdout, want) {
				t.Errorf("got %s\nwant %q in the table", h, want)
			}
		}
	})

	t.Run("legacy: the decoded timestamp, and whether a takeover is possible", func(t *testing.T) {
		t.Parallel()
		env, srvs := servers(t, "setnx-getset", 1)
		for _, tc := range []struct {
			name     string
			expiry   time.Time
			takeover bool
		}{
			{"future", time.Now().Add(time.Hour).Truncate(time.Second), false},
			{"past", time.Now().Add(-time.Hour).Truncate(time.Second), true},
		} {
			if _, err := srvs[0].Command(ctx(t), "SET", tc.name, strconv.FormatInt(tc.expiry.Unix(), 10)); err != nil {
				t.Fatal(err)
			}
			got, r := inspectJSON(t, env, tc.name)
			if r.code != 0 || !got.Held || got.Expiry == nil || !got.Expiry.Equal(tc.expiry) || got.Takeover == nil || *got.Takeover != tc.takeover {
				t.Errorf("%s: got %s\nwant exit 0, held, expiry %v, takeover %v", tc.name, r, tc.expiry, tc.takeover)
			}
			h := locksmith(t, []string{env}, "inspect", tc.name)
			want := map[bool]string{true: "possible now", false: "not yet"}[tc.takeover]
			if !strings.Contains(h.stdout, "expiry") || !strings.Contains(h.stdout, want) {
				t.Errorf("%s: got %s\nwant an expiry row and takeover %q", tc.name, h, want)
			}
		}
	})

	t.Run("a paused server: unavailable", func(t *testing.T) {
		t.Parallel()
		env, srvs := servers(t, "single", 1)
		srvs[0].Pause()
		t.Cleanup(srvs[0].Resume)
		if r := locksmith(t, []string{env}, "inspect", "job"); r.code != exitUnavailable {
			t.Errorf("got %s\nwant exit %d", r, exitUnavailable)
		}
	})

	t.Run("no output holds the token", func(t *testing.T) {
		t.Parallel()
		env, srvs := servers(t, "single", 1)
		_, token := acquire(t, env, "job")
		if v := get(t, srvs[0], "job"); !strings.HasPrefix(v, token) {
			t.Fatalf("got value %q in Redis, want it to start with the handle's token", v)
		}
		j := locksmith(t, []string{env}, "inspect", "--json", "job")
		parse(t, j)
		noSecret(t, token, j, locksmith(t, []string{env}, "-v", "inspect", "job"))
	})
}

// everyNode obtains the lock on name, under redlock, with a client of the
// test process, and returns its token once every node holds it: Obtain
// returns at a quorum, and the other nodes' writes land later.
func everyNode(t *testing.T, env, name string) (token string) {
	t.Helper()
	lk, err := locker(t, env).Obtain(ctx(t), name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, func() (inspected, bool) {
		got, _ := inspectJSON(t, env, name)
		return got, strings.HasPrefix(got.Verdict, "held on 3 of 3 nodes")
	})
	return lk.Token()
}

// poll calls f until it reports done, and returns its last value; it fails
// t when hang passes first.
func poll[T any](t *testing.T, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		v, done := f()
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("still not done after %v: last got %+v", hang, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
