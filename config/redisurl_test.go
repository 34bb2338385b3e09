package config_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestRedisURLForms: each of go-redis's URLs of one server is the single
// strategy over that server.
func TestRedisURLForms(t *testing.T) {
	single := func(addr string) config.Config { return config.Config{Strategy: "single", Addrs: []string{addr}} }
	with := func(c config.Config, f func(*config.Config)) config.Config { f(&c); return c }
	for _, tc := range []struct {
		url  string
		want config.Config
	}{
		{"redis://10.0.0.1:6380", single("10.0.0.1:6380")},
		{"redis://h", single("h:6379")},
		{"redis://[::1]:7000", single("[::1]:7000")},
		{"REDIS://h/", single("h:6379")},
		{"redis://h:6379/5", with(single("h:6379"), func(c *config.Config) { c.DB = 5 })},
		{"redis://alice:p%40ss@h:6379/2", with(single("h:6379"), func(c *config.Config) { c.Username, c.Password, c.DB = "alice", "p@ss", 2 })},
		{"redis://:pw@h", with(single("h:6379"), func(c *config.Config) { c.Password = "pw" })},
		{"redis://alice@h", with(single("h:6379"), func(c *config.Config) { c.Username = "alice" })},
		{"rediss://h:6380", with(single("h:6380"), func(c *config.Config) { c.TLS.Enabled = true })},
		{"rediss://alice:pw@h/1", with(single("h:6379"), func(c *config.Config) { c.TLS.Enabled, c.Username, c.Password, c.DB = true, "alice", "pw", 1 })},
		{"unix:///run/redis.sock", single("/run/redis.sock")},
		{"unix:///run/redis.sock?db=3", with(single("/run/redis.sock"), func(c *config.Config) { c.DB = 3 })},
		{"unix://alice:pw@/run/redis%20a.sock?db=1", with(single("/run/redis a.sock"), func(c *config.Config) { c.Username, c.Password, c.DB = "alice", "pw", 1 })},
		{"redis://h?driver=redigo&ttl=10s&replicas=1", with(single("h:6379"), func(c *config.Config) { c.Driver, c.TTL, c.Replicas = "redigo", 10*time.Second, 1 })},
		{"rediss://h?tls_server_name=redis.internal", with(single("h:6379"), func(c *config.Config) { c.TLS.Enabled, c.TLS.ServerName = true, "redis.internal" })},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := config.ParseURL(tc.url)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
}

// TestRedisURLOptions: each option of go-redis's URLs that names a setting
// sets it.
func TestRedisURLOptions(t *testing.T) {
	for _, tc := range []struct {
		query string
		got   func(config.Config) any
		want  any
	}{
		{"db=4", func(c config.Config) any { return c.DB }, 4},
		{"dial_timeout=2s", func(c config.Config) any { return c.DialTimeout }, 2 * time.Second},
		{"dial_timeout=3", func(c config.Config) any { return c.DialTimeout }, 3 * time.Second},
		{"read_timeout=500ms", func(c config.Config) any { return c.ReadTimeout }, 500 * time.Millisecond},
		{"read_timeout=1", func(c config.Config) any { return c.ReadTimeout }, time.Second},
		{"write_timeout=1.5s", func(c config.Config) any { return c.WriteTimeout }, 1500 * time.Millisecond},
		{"write_timeout=2", func(c config.Config) any { return c.WriteTimeout }, 2 * time.Second},
		{"pool_size=32", func(c config.Config) any { return c.PoolSize }, 32},
		{"skip_verify=true", func(c config.Config) any { return c.TLS.InsecureSkipVerify }, true},
		{"skip_verify=false", func(c config.Config) any { return c.TLS.InsecureSkipVerify }, false},
	} {
		t.Run(tc.query, func(t *testing.T) {
			c, err := config.ParseURL("rediss://h?" + tc.query)
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if got := tc.got(c); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("db in a unix URL's query", func(t *testing.T) {
		c, err := config.ParseURL("unix:///run/redis.sock?db=2")
		if err != nil || c.DB != 2 {
			t.Errorf("got DB %d, %v; want 2", c.DB, err)
		}
	})
}

// TestRedisURLRefusals: go-redis's options that name no setting, and a
// setting given twice, are refused by name.
func TestRedisURLRefusals(t *testing.T) {
	for _, c := range []badCase{
		{"go-redis's max_retries", fromURL("redis://h?max_retries=2"), `option "max_retries"`, "is not a locksmith setting"},
		{"go-redis's protocol", fromURL("redis://h?protocol=3"), `option "protocol"`, "takes db, dial_timeout"},
		{"go-redis's pool_timeout", fromURL("rediss://h?pool_timeout=1s"), `option "pool_timeout"`, "is not a locksmith setting"},
		{"go-redis's client_name, in a unix URL", fromURL("unix:///r.sock?client_name=x"), `option "client_name"`, "is not a locksmith setting"},
		{"an unknown option", fromURL("redis://h?tll=1s"), `option "tll"`, `is not a locksmith setting: of go-redis's options, a redis://, rediss:// or unix:// URL takes db, dial_timeout, read_timeout, write_timeout, pool_size and skip_verify (tls_insecure_skip_verify): did you mean "ttl"?`},
		{"an unknown option like none", fromURL("redis://h?colour=blue"), `option "colour"`, `docs/config.md's "Every setting" lists locksmith's`},
		{"the db in the path and the query", fromURL("redis://h/1?db=2"), "db", "sets db, which the path sets too"},
		{"db twice", fromURL("redis://h?db=1&db=2"), "db", "is given twice"},
		{"db twice in a unix URL", fromURL("unix:///r.sock?db=1&db=2"), "db", "is given twice"},
		{"skip_verify and tls_insecure_skip_verify", fromURL("rediss://h?skip_verify=true&tls_insecure_skip_verify=true"), "tls_insecure_skip_verify", "which skip_verify sets too"},
		{"tls with rediss://", fromURL("rediss://h?tls=true"), "tls", "which the scheme rediss:// sets too"},
		{"skip_verify without TLS", fromURL("redis://h?skip_verify=true"), "tls_insecure_skip_verify", "TLS is off"},
		{"a timeout of zero, go-redis's none", fromURL("redis://h?read_timeout=0"), "read_timeout", "go-redis reads zero or less as no timeout"},
		{"a negative timeout", fromURL("redis://h?dial_timeout=-1s"), "dial_timeout", "must be more than 0"},
		{"a db that is no number", fromURL("redis://h?db=x"), "db", `want an integer, got "x"`},
		{"a db with a bad escape", fromURL("redis://h?db=%zz"), "db", "invalid %-escape"},
		{"the password in the query", fromURL("redis://h?password=pw"), "password", "goes in the URL itself"},
		{"two servers", fromURL("redis://h1,h2"), "addrs", "single locks on one server"},
		{"no server", fromURL("redis://"), "addrs", "must list at least one server"},
		{"a unix URL with a host", fromURL("unix://h/run/redis.sock"), "addrs", "has its path after the user information"},
		{"a fragment", fromURL("redis://h?tls_ca_file=/a#b"), "url", "must not have a fragment"},
		{"an unescaped '/' in the password", fromURL("redis://u:p/w@h?db=1"), "url", "has '@' after the host"},
	} {
		t.Run(c.name, func(t *testing.T) { checkBad(t, c) })
	}
}

// TestRedisURLString: a Config read from a go-redis URL prints as a
// single:// URL, without its password, which ParseURL reads back.
func TestRedisURLString(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://alice:s3cret-Pw@h:6380/2?dial_timeout=3", "single://alice:xxxxx@h:6380/2?dial_timeout=3s"},
		{"rediss://h?skip_verify=1", "single://h:6379?tls=true&tls_insecure_skip_verify=true"},
		{"unix://:s3cret-Pw@/run/redis.sock?db=1", "single+unix://:xxxxx@/run/redis.sock?db=1"},
		{"unix:///run/a%40b.sock", "single+unix:///run/a%40b.sock"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			c, err := config.ParseURL(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			again, err := config.ParseURL(strings.Replace(c.String(), "xxxxx", c.Password, 1))
			if err != nil || !reflect.DeepEqual(again, c) {
				t.Errorf("got %v, %v read back; want %v", again, err, c)
			}
		})
	}
}

// TestRedisURLFromEnv: the URL variable takes a go-redis URL, and its
// errors name the variable.
func TestRedisURLFromEnv(t *testing.T) {
	t.Run("a redis:// URL", func(t *testing.T) {
		t.Setenv(envPrefix+"URL", "redis://h:6380/1")
		c, err := config.FromEnv(envPrefix)
		if want := (config.Config{Strategy: "single", Addrs: []string{"h:6380"}, DB: 1}); err != nil || !reflect.DeepEqual(c, want) {
			t.Errorf("got %v, %v; want %v", c, err, want)
		}
	})
	t.Run("a refused option", func(t *testing.T) {
		t.Setenv(envPrefix+"URL", "redis://h?max_retries=2")
		checkBad(t, badCase{load: func() error { _, err := config.FromEnv(envPrefix); return err },
			setting: envPrefix + `URL: option "max_retries"`, reason: "is not a locksmith setting"})
	})
}

// TestRegisterRedisSchemes: a strategy may not take the name of a scheme
// that ParseURL reads as go-redis's.
func TestRegisterRedisSchemes(t *testing.T) {
	for _, name := range []string{"redis", "rediss", "unix"} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "go-redis") {
					t.Errorf("got panic %v, want one that names go-redis's URLs", r)
				}
			}()
			config.RegisterStrategy(name, config.Strategy{New: nilNew})
		})
	}
}

// TestRedisURLOpens: a Locker opened from a redis:// URL obtains and
// releases a lock on that server.
func TestRedisURLOpens(t *testing.T) {
	addr, _ := redistest.Addr(t)
	c, err := config.ParseURL("redis://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	l := open(t, c)
	ctx := context.Background()
	lk, err := l.Obtain(ctx, "redis-url", time.Minute)
	if err != nil {
		t.Fatalf("Obtain: got %v, want a lock", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Errorf("Release: got %v, want nil", err)
	}
}
