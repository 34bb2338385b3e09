package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// electorSettings are the Elector's settings, a value of each, and the
// field it sets.
var electorSettings = []struct {
	name, text, json string
	field            func(c config.Config) any
	want             any
}{
	{"lease", "10s", `"10s"`, func(c config.Config) any { return c.Lease }, 10 * time.Second},
	{"stop_grace", "2s", `"2s"`, func(c config.Config) any { return c.StopGrace }, 2 * time.Second},
	{"interval", "250ms", `"250ms"`, func(c config.Config) any { return c.Interval }, 250 * time.Millisecond},
	{"identity", "web-3 pid=12&x", `"web-3 pid=12&x"`, func(c config.Config) any { return c.Identity }, "web-3 pid=12&x"},
}

// TestElectorSettingsLoad: each of the Elector's settings loads from the
// URL, JSON and the environment into its field.
func TestElectorSettingsLoad(t *testing.T) {
	for _, s := range electorSettings {
		t.Run(s.name+" from the URL", func(t *testing.T) {
			c, err := config.ParseURL("single://h?" + s.name + "=" + url.QueryEscape(s.text))
			if err != nil {
				t.Fatalf("ParseURL: got %v, want nil", err)
			}
			if got := s.field(c); got != s.want {
				t.Fatalf("got %v, want %v", got, s.want)
			}
		})
		t.Run(s.name+" from JSON", func(t *testing.T) {
			var c config.Config
			if err := json.Unmarshal([]byte(`{"strategy": "single", "addrs": ["h"], "`+s.name+`": `+s.json+`}`), &c); err != nil {
				t.Fatalf("json.Unmarshal: got %v, want nil", err)
			}
			if got := s.field(c); got != s.want {
				t.Fatalf("got %v, want %v", got, s.want)
			}
		})
		t.Run(s.name+" from the environment", func(t *testing.T) {
			t.Setenv(envPrefix+"URL", "single://h")
			t.Setenv(envPrefix+strings.ToUpper(s.name), s.text)
			c, err := config.FromEnv(envPrefix)
			if err != nil {
				t.Fatalf("FromEnv: got %v, want nil", err)
			}
			if got := s.field(c); got != s.want {
				t.Fatalf("got %v, want %v", got, s.want)
			}
		})
	}
	t.Run("the four in one URL", func(t *testing.T) {
		c, err := config.ParseURL("single://h?lease=10s&stop_grace=2s&interval=250ms&identity=web-3")
		want := config.Config{Strategy: "single", Addrs: []string{"h:6379"}, Lease: 10 * time.Second, StopGrace: 2 * time.Second,
			Interval: 250 * time.Millisecond, Identity: "web-3"}
		if err != nil || !reflect.DeepEqual(c, want) {
			t.Fatalf("got %v, %v; want %v, nil", c, err, want)
		}
	})
	t.Run("String writes them in the query", func(t *testing.T) {
		c := config.Config{Strategy: "single", Addrs: []string{"h"}, TTL: time.Minute, Lease: 10 * time.Second, Identity: "web 3"}
		if got, want := c.String(), "single://h?ttl=1m0s&lease=10s&identity=web%203"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
	t.Run("Defaults leaves them unset", func(t *testing.T) {
		c := config.Config{Strategy: "single", Addrs: []string{"h"}}.Defaults()
		if c.Lease != 0 || c.StopGrace != 0 || c.Interval != 0 || c.Identity != "" {
			t.Fatalf("got lease %v, stop_grace %v, interval %v, identity %q; want them unset, elect's defaults",
				c.Lease, c.StopGrace, c.Interval, c.Identity)
		}
	})
}

// TestNewElector: NewElector builds an Elector with the configuration's
// settings, which campaigns and leads on a real server with them; the
// call's options come after them; a strategy that numbers no terms is
// refused as elect.New refuses it.
func TestNewElector(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := config.ParseURL("single://" + addr + "?lease=2s&stop_grace=500ms&interval=50ms&identity=web-3")
	if err != nil {
		t.Fatal(err)
	}
	l := open(t, c)
	e, err := config.NewElector(l, c, "{config}:leader")
	if err != nil {
		t.Fatalf("NewElector: got %v, want nil", err)
	}

	for _, a := range []struct {
		name      string
		got, want any
	}{
		{"the lease is the configured one", e.Lease(), 2 * time.Second},
		{"the stop grace is the configured one", e.StopGrace(), 500 * time.Millisecond},
		{"the identity is the configured one", e.Identity(), "web-3"},
		{"the key is the call's", e.Key(), "{config}:leader"},
	} {
		t.Run(a.name, func(t *testing.T) {
			if a.got != a.want {
				t.Fatalf("got %v, want %v", a.got, a.want)
			}
		})
	}

	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign: got %v, want a term", err)
	}
	leader, leaderErr := e.Leader(ctx)
	t.Run("it is elected", func(t *testing.T) {
		if err := e.IsLeader(ctx); err != nil {
			t.Fatalf("IsLeader: got %v, want nil", err)
		}
	})
	t.Run("its term carries the configured identity", func(t *testing.T) {
		if got := term.Identity(); got != "web-3" {
			t.Fatalf("got %q, want %q", got, "web-3")
		}
	})
	t.Run("Leader reads its term", func(t *testing.T) {
		if leaderErr != nil || leader.Term != term.Number() {
			t.Fatalf("got term %d, %v; want %d, nil", leader.Term, leaderErr, term.Number())
		}
	})
	t.Run("Leader reads the configured identity", func(t *testing.T) {
		if leader.Identity != "web-3" {
			t.Fatalf("got %q, want %q", leader.Identity, "web-3")
		}
	})
	t.Run("the leader's key has the configured lease", func(t *testing.T) {
		if leader.TTL <= 0 || leader.TTL > 2*time.Second {
			t.Fatalf("got a TTL of %v, want one in (0, 2s]", leader.TTL)
		}
	})
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}

	t.Run("Run leads as the configured identity, in a later term", func(t *testing.T) {
		var led *elect.Term
		rctx, stop := context.WithCancel(ctx)
		err := e.Run(rctx, func(ctx context.Context, t *elect.Term) error {
			led = t
			stop()
			return nil
		})
		switch {
		case !errors.Is(err, context.Canceled):
			t.Fatalf("Run: got %v, want context.Canceled", err)
		case led == nil:
			t.Fatal("got no term led, want one")
		case led.Identity() != "web-3" || led.Number() <= term.Number():
			t.Fatalf("got term %d of %q, want a term after %d of %q", led.Number(), led.Identity(), term.Number(), "web-3")
		}
	})

	t.Run("the call's options override the configuration's", func(t *testing.T) {
		e, err := config.NewElector(l, c, "{config}:leader", elect.WithIdentity("web-4"), elect.WithLease(3*time.Second))
		if err != nil {
			t.Fatalf("NewElector: got %v, want nil", err)
		}
		if e.Identity() != "web-4" || e.Lease() != 3*time.Second {
			t.Fatalf("got identity %q, lease %v; want %q, 3s", e.Identity(), e.Lease(), "web-4")
		}
	})
	t.Run("the configuration's other settings stay under the call's options", func(t *testing.T) {
		e, err := config.NewElector(l, c, "{config}:leader", elect.WithLease(3*time.Second))
		if err != nil {
			t.Fatalf("NewElector: got %v, want nil", err)
		}
		if e.StopGrace() != 500*time.Millisecond {
			t.Fatalf("got a stop grace of %v, want the configured 500ms", e.StopGrace())
		}
	})

	plain := config.Config{Strategy: "single", Addrs: []string{addr}}
	t.Run("the configured interval is the Elector's", func(t *testing.T) {
		c := plain
		c.Lease, c.Interval = 10*time.Second, 20*time.Millisecond
		e, err := config.NewElector(open(t, c), c, "{config}:interval")
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Interval(); got != 20*time.Millisecond {
			t.Errorf("got an interval of %v, want the configured 20ms (elect's default for a 10s lease would be 1s)", got)
		}
	})
	t.Run("unset settings are elect's defaults", func(t *testing.T) {
		e, err := config.NewElector(open(t, plain), plain, "{config}:defaults")
		if err != nil {
			t.Fatalf("NewElector: got %v, want nil", err)
		}
		if e.Lease() != 15*time.Second || e.StopGrace() != 3*time.Second || !strings.Contains(e.Identity(), " pid=") {
			t.Fatalf("got lease %v, stop grace %v, identity %q; want 15s, 3s, \"host pid=N\"", e.Lease(), e.StopGrace(), e.Identity())
		}
	})
	t.Run("the lease is not the TTL", func(t *testing.T) {
		c := plain
		c.TTL = time.Minute
		e, err := config.NewElector(open(t, c), c, "{config}:defaults")
		if err != nil {
			t.Fatalf("NewElector: got %v, want nil", err)
		}
		if e.Lease() != 15*time.Second {
			t.Fatalf("got a lease of %v with ttl=1m, want elect's default, 15s", e.Lease())
		}
	})
	t.Run("an invalid setting is named as the configuration names it", func(t *testing.T) {
		bad := plain
		bad.StopGrace = 10 * time.Second
		_, err := config.NewElector(l, bad, "{config}:leader")
		checkBad(t, badCase{load: func() error { return err }, setting: "stop_grace", reason: "must be under half the lease, 7.5s, got 10s"})
	})
	t.Run("an empty key is elect.New's error", func(t *testing.T) {
		_, err := config.NewElector(l, c, "")
		checkBad(t, badCase{load: func() error { return err }, setting: "key", reason: "must not be empty"})
	})

	for _, strategy := range []string{"redlock", "setnx-getset"} {
		t.Run("a "+strategy+" configuration is refused", func(t *testing.T) {
			c := config.Config{Strategy: strategy, Addrs: []string{addr}, Lease: 2 * time.Second, Identity: "web-3"}
			_, err := config.NewElector(open(t, c), c, "{config}:"+strategy)
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != "locker" || !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("got %v, want elect.New's *lock.ArgumentError named locker, matching errors.ErrUnsupported", err)
			}
		})
	}
}

// TestNewElectorOTel: with otel, NewElector installs the registered
// election instrumentation, with otel_keys, outside the call's hooks;
// without otel, or with none registered, it installs none.
func TestNewElectorOTel(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		keys  []string // the otel_keys the registered hooks were built with
		calls []string // the Campaign hooks called, outermost first
	)
	wrapper := func(name string) *elect.Hooks {
		return &elect.Hooks{Campaign: func(ctx context.Context, e *elect.Elector, next func(context.Context) (*elect.Term, error)) (*elect.Term, error) {
			calls = append(calls, name)
			return next(ctx)
		}}
	}
	campaign := func(t *testing.T, c config.Config, hooks func(string) *elect.Hooks) {
		t.Helper()
		defer config.SetOTelElector(hooks)()
		keys, calls = nil, nil
		e, err := config.NewElector(open(t, c), c, "{config}:otel", elect.WithHooks(wrapper("call")))
		if err != nil {
			t.Fatalf("NewElector: got %v, want nil", err)
		}
		term, err := e.Campaign(ctx)
		if err != nil {
			t.Fatalf("Campaign: got %v, want a term", err)
		}
		_ = term.Resign(ctx)
	}
	registered := func(k string) *elect.Hooks { keys = append(keys, k); return wrapper("otel") }
	on := config.Config{Strategy: "single", Addrs: []string{addr}, OTel: true, OTelKeys: "hashed", Lease: time.Second}

	t.Run("otel=true installs the registered hooks outside the call's", func(t *testing.T) {
		campaign(t, on, registered)
		if want := []string{"otel", "call"}; !reflect.DeepEqual(calls, want) {
			t.Fatalf("got Campaign hooks %v, want %v", calls, want)
		}
	})
	t.Run("the registered hooks get otel_keys", func(t *testing.T) {
		campaign(t, on, registered)
		if want := []string{"hashed"}; !reflect.DeepEqual(keys, want) {
			t.Fatalf("got keys %q, want %q", keys, want)
		}
	})
	t.Run("otel=false installs none", func(t *testing.T) {
		off := on
		off.OTel, off.OTelKeys = false, ""
		campaign(t, off, registered)
		if want := []string{"call"}; !reflect.DeepEqual(calls, want) || len(keys) != 0 {
			t.Fatalf("got Campaign hooks %v, keys %q; want %v, none", calls, keys, want)
		}
	})
	t.Run("otel=true with none registered builds the Elector without", func(t *testing.T) {
		campaign(t, on, nil)
		if want := []string{"call"}; !reflect.DeepEqual(calls, want) {
			t.Fatalf("got Campaign hooks %v, want %v", calls, want)
		}
	})
	t.Run("RegisterOTelElector panics with nil", func(t *testing.T) {
		defer func() {
			if got, want := recover(), "config: RegisterOTelElector called twice, or with nil"; got != want {
				t.Fatalf("got panic %v, want %q", got, want)
			}
		}()
		config.RegisterOTelElector(nil)
	})
}
