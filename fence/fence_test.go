package fence_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/fence"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// ctx returns a context that ends with the test: a hang detector, not a
// timing assertion.
func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eachDriver runs f over every driver, each against a server of its own (a
// real one, or the embedded one without redis-server).
func eachDriver(t *testing.T, f func(t *testing.T, c driver.Conn)) {
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			addr, _ := redistest.Addr(t)
			f(t, d.Conn(t, addr))
		})
	}
}

// get returns the value of key, or "(none)".
func get(t *testing.T, c driver.Conn, key string) string {
	t.Helper()
	v, ok, err := c.Get(ctx(t), key)
	switch {
	case err != nil:
		t.Fatalf("GET %s = %v", key, err)
	case !ok:
		return "(none)"
	}
	return v
}

// fenceOf returns the fence stored beside key, or "(none)".
func fenceOf(t *testing.T, c driver.Conn, key string) string {
	t.Helper()
	k, err := fence.KeyOf(key)
	if err != nil {
		t.Fatal(err)
	}
	return get(t, c, k)
}

func TestSet(t *testing.T) {
	eachDriver(t, func(t *testing.T, c driver.Conn) {
		t.Run("a first write sets the value and the fence", func(t *testing.T) {
			if err := fence.Set(ctx(t), c, "first", "v", 5); err != nil {
				t.Fatalf("Set = %v, want nil", err)
			}
			if got := get(t, c, "first"); got != "v" {
				t.Errorf("value: got %q, want %q", got, "v")
			}
			if got := fenceOf(t, c, "first"); got != "5" {
				t.Errorf("fence: got %q, want %q", got, "5")
			}
		})
		t.Run("accepts increasing tokens", func(t *testing.T) {
			for _, token := range []int64{3, 4, 1 << 53, 1<<53 + 1, 1<<63 - 1} {
				v := strconv.FormatInt(token, 10)
				if err := fence.Set(ctx(t), c, "increasing", v, token); err != nil {
					t.Fatalf("Set with %d = %v, want nil", token, err)
				}
				if got := get(t, c, "increasing"); got != v {
					t.Errorf("value after %d: got %q, want %q", token, got, v)
				}
				if got := fenceOf(t, c, "increasing"); got != v {
					t.Errorf("fence after %d: got %q, want %q", token, got, v)
				}
			}
		})
		t.Run("accepts an equal token", func(t *testing.T) {
			for _, v := range []string{"once", "twice"} {
				if err := fence.Set(ctx(t), c, "equal", v, 9); err != nil {
					t.Fatalf("Set %q with 9 = %v, want nil", v, err)
				}
			}
			if got := get(t, c, "equal"); got != "twice" {
				t.Errorf("value: got %q, want %q", got, "twice")
			}
		})
		t.Run("refuses a lower token and writes nothing", func(t *testing.T) {
			if err := fence.Set(ctx(t), c, "lower", "new", 1_000_000_000_000); err != nil {
				t.Fatal(err)
			}
			err := fence.Set(ctx(t), c, "lower", "stale", 999_999_999_999) // fewer digits
			var stale *fence.StaleError
			if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStale) {
				t.Fatalf("Set with a lower token = %v, want a *StaleError matching ErrStale", err)
			}
			want := fence.StaleError{Key: "lower", Token: 999_999_999_999, Fence: 1_000_000_000_000}
			if *stale != want {
				t.Errorf("got %+v, want %+v", *stale, want)
			}
			if got := get(t, c, "lower"); got != "new" {
				t.Errorf("value: got %q, want %q", got, "new")
			}
			if got := fenceOf(t, c, "lower"); got != "1000000000000" {
				t.Errorf("fence: got %q, want %q", got, "1000000000000")
			}
		})
		t.Run("a fence key that holds no token is an error", func(t *testing.T) {
			k, _ := fence.KeyOf("garbled")
			if _, _, err := c.GetSet(ctx(t), k, "not a number"); err != nil {
				t.Fatal(err)
			}
			err := fence.Set(ctx(t), c, "garbled", "v", 1)
			if err == nil || !strings.Contains(err.Error(), "holds no fencing token") {
				t.Errorf("Set = %v, want an error saying the fence key holds no fencing token", err)
			}
			if got := get(t, c, "garbled"); got != "(none)" {
				t.Errorf("value: got %q, want none", got)
			}
		})
	})
}

func TestRun(t *testing.T) {
	eachDriver(t, func(t *testing.T, c driver.Conn) {
		t.Run("the body sees its own KEYS and ARGV", func(t *testing.T) {
			const src = `return {#KEYS, KEYS[1], KEYS[2], #ARGV, ARGV[1], ARGV[2]}`
			got, err := fence.Run(ctx(t), c, "{run}:fenced", 3, src, []string{"{run}:a", "{run}:b"}, "x", 7)
			if err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			want := []any{int64(2), "{run}:a", "{run}:b", int64(2), "x", "7"}
			if g, ok := got.([]any); !ok || len(g) != len(want) || !equal(g, want) {
				t.Errorf("got %#v, want %#v", got, want)
			}
		})
		t.Run("the reply is normalised", func(t *testing.T) {
			for _, tc := range []struct {
				src  string
				want any
			}{
				{`return 42`, int64(42)},
				{`return 'text'`, "text"},
				{`return nil`, nil},
				{`return redis.status_reply('FINE')`, "FINE"},
			} {
				got, err := fence.Run(ctx(t), c, "{reply}:fenced", 3, tc.src, nil)
				if err != nil || got != tc.want {
					t.Errorf("Run(%q) = %#v, %v; want %#v, nil", tc.src, got, err, tc.want)
				}
			}
		})
		t.Run("the body's error comes back", func(t *testing.T) {
			for _, src := range []string{
				`return redis.error_reply('NOPE the body refused')`,
				`return redis.call('INCR', KEYS[1])`, // a string that is not an integer
			} {
				if _, _, err := c.GetSet(ctx(t), "{err}:text", "text"); err != nil {
					t.Fatal(err)
				}
				_, err := fence.Run(ctx(t), c, "{err}:fenced", 3, src, []string{"{err}:text"})
				if err == nil || errors.Is(err, fence.ErrStale) {
					t.Errorf("Run(%q) = %v, want the body's error", src, err)
				}
			}
			_, err := fence.Run(ctx(t), c, "{err}:fenced", 3, `return redis.error_reply('NOPE the body refused')`, nil)
			if err == nil || !strings.Contains(err.Error(), "NOPE the body refused") {
				t.Errorf("Run = %v, want the body's error text", err)
			}
		})
		t.Run("a lower token runs nothing", func(t *testing.T) {
			if _, err := fence.Run(ctx(t), c, "{stale}:fenced", 8, `return 1`, nil); err != nil {
				t.Fatal(err)
			}
			_, err := fence.Run(ctx(t), c, "{stale}:fenced", 7, `redis.call('SET', KEYS[1], 'ran') return 1`, []string{"{stale}:data"})
			var stale *fence.StaleError
			if !errors.As(err, &stale) || *stale != (fence.StaleError{Key: "{stale}:fenced", Token: 7, Fence: 8}) {
				t.Fatalf("Run with a lower token = %v, want *StaleError{Key: {stale}:fenced, Token: 7, Fence: 8}", err)
			}
			if got := get(t, c, "{stale}:data"); got != "(none)" {
				t.Errorf("the body ran: got %q, want no value", got)
			}
		})
	})
}

func equal(a, b []any) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// recorder is a Conn that records that it was called.
type recorder struct {
	driver.Conn // nil: every call of a method left out panics
	calls       int
}

func (r *recorder) EvalSha(context.Context, string, []string, ...any) (any, error) {
	r.calls++
	return nil, errors.New("NOSCRIPT")
}

func (r *recorder) Eval(context.Context, string, []string, ...any) (any, error) {
	r.calls++
	return nil, errors.New("ERR recorded")
}

func TestArguments(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conn  driver.Conn
		key   string
		token int64
		want  string // the ArgumentError's Name
	}{
		{"nil conn", nil, "k", 1, "conn"},
		{"typed nil conn", (*goredis.Conn)(nil), "k", 1, "conn"},
		{"empty key", &recorder{}, "", 1, "key"},
		{"zero token", &recorder{}, "k", 0, "token"},
		{"negative token", &recorder{}, "k", -1, "token"},
		{"key with '}' but no hash tag", &recorder{}, "a}b", 1, "key"},
	} {
		t.Run("Set/"+tc.name, func(t *testing.T) {
			err := fence.Set(ctx(t), tc.conn, tc.key, "v", tc.token)
			var arg *lock.ArgumentError
			if !errors.As(err, &arg) || arg.Name != tc.want {
				t.Errorf("got %v, want a *lock.ArgumentError named %q", err, tc.want)
			}
			if r, ok := tc.conn.(*recorder); ok && r.calls != 0 {
				t.Errorf("got %d calls, want none", r.calls)
			}
		})
	}
	for _, tc := range []struct {
		name     string
		fenceKey string
		token    int64
		src      string
		want     string
	}{
		{"empty fenceKey", "", 1, "return 1", "fenceKey"},
		{"zero token", "f", 0, "return 1", "token"},
		{"empty src", "f", 1, "", "src"},
	} {
		t.Run("Run/"+tc.name, func(t *testing.T) {
			r := &recorder{}
			_, err := fence.Run(ctx(t), r, tc.fenceKey, tc.token, tc.src, nil)
			var arg *lock.ArgumentError
			if !errors.As(err, &arg) || arg.Name != tc.want {
				t.Errorf("got %v, want a *lock.ArgumentError named %q", err, tc.want)
			}
			if r.calls != 0 {
				t.Errorf("got %d calls, want none", r.calls)
			}
		})
	}
	t.Run("Run/nil conn", func(t *testing.T) {
		_, err := fence.Run(ctx(t), nil, "f", 1, "return 1", nil)
		var arg *lock.ArgumentError
		if !errors.As(err, &arg) || arg.Name != "conn" {
			t.Errorf("got %v, want a *lock.ArgumentError named conn", err)
		}
	})
}

func TestKeyOf(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"orders:42", "{orders:42}:fenced"},
		{"{user:7}:cart", "{user:7}:cart:fenced"},
	} {
		if got, err := fence.KeyOf(tc.key); got != tc.want || err != nil {
			t.Errorf("KeyOf(%q) = %q, %v; want %q, nil", tc.key, got, err, tc.want)
		}
	}
	t.Run("differs from the lock's counter", func(t *testing.T) {
		for _, key := range []string{"orders:42", "{user:7}:cart"} {
			counter, err := single.FenceKey(key)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := fence.KeyOf(key); got == counter {
				t.Errorf("KeyOf(%q) = %q, want another key than the lock's counter %q", key, got, counter)
			}
		}
	})
	for _, key := range []string{"a}b", "{}:x", ""} { // "{}" is no hash tag: it is empty
		t.Run("refuses "+strconv.Quote(key), func(t *testing.T) {
			_, err := fence.KeyOf(key)
			var arg *lock.ArgumentError
			if !errors.As(err, &arg) || arg.Name != "key" {
				t.Errorf("got %v, want a *lock.ArgumentError named key", err)
			}
		})
	}
}

// TestCluster: the fence is in its key's hash slot, so that Set works on a
// Cluster, and Run too with keys in its fence key's slot.
func TestCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	c := goredis.New(redistest.GoRedisCluster(t, cluster.Addrs()))
	for _, key := range []string{"orders:42", "{user:7}:cart", "a", "b", "c"} {
		t.Run("Set/"+key, func(t *testing.T) {
			k, _ := fence.KeyOf(key)
			if got, want := cluster.KeySlot(t, k), cluster.KeySlot(t, key); got != want {
				t.Errorf("KeyOf(%q) = %q in slot %d, want the key's slot %d", key, k, got, want)
			}
			if err := fence.Set(ctx(t), c, key, "v", 2); err != nil {
				t.Fatalf("Set = %v, want nil", err)
			}
			if err := fence.Set(ctx(t), c, key, "stale", 1); !errors.Is(err, fence.ErrStale) {
				t.Errorf("Set with a lower token = %v, want ErrStale", err)
			}
		})
	}
	t.Run("Run", func(t *testing.T) {
		k, _ := fence.KeyOf("{order:9}:items")
		got, err := fence.Run(ctx(t), c, k, 4, `redis.call('SET', KEYS[1], ARGV[1]) return redis.call('SET', KEYS[2], ARGV[2])`,
			[]string{"{order:9}:items", "{order:9}:total"}, "3", "30")
		if err != nil || got != "OK" {
			t.Fatalf("Run = %v, %v; want OK, nil", got, err)
		}
		if v := get(t, c, "{order:9}:total"); v != "30" {
			t.Errorf("{order:9}:total: got %q, want %q", v, "30")
		}
	})
}

// aclConns returns a Conn of every driver, as user, whom srv allows acl and
// nothing else.
func aclConns(t *testing.T, srv *redistest.Server, user string, acl ...string) map[string]driver.Conn {
	t.Helper()
	setuser := append([]string{"ACL", "SETUSER", user, "reset", "on", ">secret"}, acl...)
	if _, err := srv.Command(ctx(t), setuser...); err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: "secret", ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	pool := &redigoredis.Pool{DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
		return redigoredis.DialContext(ctx, "tcp", srv.Addr, redigoredis.DialUsername(user), redigoredis.DialPassword("secret"))
	}}
	t.Cleanup(func() { _ = pool.Close() })
	return map[string]driver.Conn{
		"goredis": goredis.New(client),
		"redigo":  redigo.New(pool),
		"rueidis": rueidisdriver.New(redistest.RueidisClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr}, Username: user, Password: "secret"})),
	}
}

// TestScriptsRefused: a server whose ACL denies scripts refuses the write
// with its NOPERM error, which comes back; nothing is written.
func TestScriptsRefused(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	admin := redistest.Drivers()[0].Conn(t, srv.Addr)
	for name, c := range aclConns(t, srv, "noscripts", "~*", "+@all", "-@scripting") {
		t.Run(name, func(t *testing.T) {
			key := "refused:" + name
			err := fence.Set(ctx(t), c, key, "v", 1)
			if err == nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Fatalf("Set = %v, want the server's NOPERM error", err)
			}
			if got := get(t, admin, key); got != "(none)" {
				t.Errorf("value: got %q, want none", got)
			}
			if got := fenceOf(t, admin, key); got != "(none)" {
				t.Errorf("fence: got %q, want none", got)
			}
		})
	}
}

// TestRace: two writers with tokens 5 and 7 race; once 7 wrote, 5 is
// refused, so the value and the fence end as 7's.
func TestRace(t *testing.T) {
	eachDriver(t, func(t *testing.T, c driver.Conn) {
		const writes = 200
		var wg sync.WaitGroup
		errs := make(chan error, 2*writes)
		for _, token := range []int64{5, 7} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := strconv.FormatInt(token, 10)
				for range writes {
					err := fence.Set(context.Background(), c, "raced", v, token)
					var stale *fence.StaleError
					switch {
					case err == nil:
					case token == 5 && errors.As(err, &stale) && stale.Fence == 7:
					default:
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("Set = %v, want nil for 7, nil or a *StaleError with Fence 7 for 5", err)
		}
		if got := get(t, c, "raced"); got != "7" {
			t.Errorf("value: got %q, want %q", got, "7")
		}
		if got := fenceOf(t, c, "raced"); got != "7" {
			t.Errorf("fence: got %q, want %q", got, "7")
		}
	})
}
