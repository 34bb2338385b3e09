package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

const envPrefix = "LOCKSMITH_CONFIG_TEST_"

func fromURL(u string) func() error {
	return func() error { _, err := config.ParseURL(u); return err }
}

func fromJSON(j string) func() error {
	return func() error { var c config.Config; return json.Unmarshal([]byte(j), &c) }
}

func validating(c config.Config) func() error { return c.Validate }

func opening(c config.Config) func() error {
	return func() error {
		l, err := config.Open(c)
		if err == nil {
			l.Close()
		}
		return err
	}
}

// badCase is a bad configuration and the error it must get: an
// *lock.ArgumentError naming setting, whose reason contains reason.
type badCase struct {
	name    string
	load    func() error
	setting string
	reason  string
}

// TestBadConfigurations: each invalid setting gets an error that names it
// and says what is allowed.
func TestBadConfigurations(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	pki := redistest.NewPKI(t)
	tlsOn := func(tls config.TLS) config.Config {
		tls.Enabled = true
		return config.Config{Strategy: "single", Addrs: []string{"h:6379"}, TLS: tls}
	}
	for _, c := range []badCase{
		// The URL's shape.
		{"a URL without a scheme", fromURL("h1:6379"), "url", "want strategy://host:port"},
		{"a URL with a fragment", fromURL("single://h#x"), "url", "must not have a fragment"},
		{"a URL with an empty scheme", fromURL("://h"), "strategy", "is required; known: redlock, setnx-getset, "},
		{"an unknown strategy", fromURL("memcached://h"), "strategy", `unknown "memcached"; known: redlock, setnx-getset, `},
		{"an unknown driver", fromURL("single://h?driver=jedis"), "driver", `unknown "jedis"; known: goredis, redigo`},
		{"an unknown setting", fromURL("single://h?tll=3s"), `setting "tll"`, `unknown: did you mean "ttl"?`},
		{"an unknown setting like none", fromURL("single://h?colour=blue"), `setting "colour"`, `unknown: docs/config.md's "Every setting" lists them`},
		{"a URL without a server", fromURL("single:///0"), "addrs", "must list at least one server"},
		{"a setting of the URL itself in its query", fromURL("single://h?db=1"), "db", "goes in the URL itself, not its query"},
		{"a setting given twice", fromURL("single://h?ttl=1s&ttl=2s"), "ttl", "is given twice"},
		{"an empty value", fromURL("single://h?ttl="), "ttl", "is empty"},
		{"a bad %-escape in a value", fromURL("single://h?ttl=%zz"), "ttl", "invalid %-escape"},
		{"a bad %-escape in a name", fromURL("single://h?t%zz=1"), "url", "invalid %-escape"},
		{"a bad %-escape in the username", fromURL("single://a%zz@h"), "username", "invalid %-escape"},
		{"a password with an unescaped slash, unquoted", fromURL("single://u:6379/s3cret@h"), "url", "has '@' after the host: percent-encode"},
		{"a password with an unescaped question mark, unquoted", fromURL("single://u:123?s3cret@h"), "url", "has '@' after the host: percent-encode"},
		{"a bad %-escape in the password", fromURL("single://a:b%zz@h"), "password", "invalid %-escape"},
		{"the password placeholder", fromURL("single://a:xxxxx@h"), "password", "placeholder xxxxx"},

		// Servers and database.
		{"port 0", fromURL("single://h:0"), "addrs", "the port must be a number from 1 to 65535"},
		{"port 65536", fromURL("single://h:65536"), "addrs", "the port must be a number from 1 to 65535"},
		{"an empty port", fromURL("single://h:"), "addrs", "the port must be a number"},
		{"an IPv6 address without brackets", fromURL("single://::1"), "addrs", "IPv6 in brackets"},
		{"an IPv4 address in brackets", fromURL("single://[127.0.0.1]:6379"), "addrs", "want an IPv6 address in brackets"},
		{"a server listed twice", fromURL("redlock://h1,h2,h1:6379"), "addrs", "address 3 of 3: lists the server of address 1 again"},
		{"two servers for single", fromURL("single://h1,h2"), "addrs", "single locks on one server, got 2"},
		{"two servers for setnx-getset", fromURL("setnx-getset://h1,h2"), "addrs", "setnx-getset locks on one server, got 2"},
		{"no servers", validating(config.Config{Strategy: "single"}), "addrs", "must list at least one server"},
		{"a database that is not a number", fromURL("single://h/x"), "db", `want an integer, got "x"`},
		{"a negative database", fromURL("single://h/-1"), "db", "must be at least 0"},

		// TLS.
		{"tls not a boolean", fromURL("single://h?tls=yes"), "tls", `want true or false, got "yes"`},
		{"a CA with TLS off", fromURL("single://h?tls_ca_file=/ca.pem"), "tls_ca_file", "is set but TLS is off"},
		{"skip-verify with TLS off", fromURL("single://h?tls_insecure_skip_verify=true"), "tls_insecure_skip_verify", "is set but TLS is off"},
		{"a certificate without its key", fromURL("single://h?tls=true&tls_cert_file=/c.pem"), "tls_cert_file", "and tls_key_file go together"},
		{"a key without its certificate", fromURL("single://h?tls=true&tls_key_file=/k.pem"), "tls_cert_file", "and tls_key_file go together"},
		{"skip-verify with a CA", fromURL("single://h?tls=true&tls_insecure_skip_verify=true&tls_ca_file=/ca.pem"), "tls_insecure_skip_verify", "verifies nothing"},
		{"a server name that is not UTF-8", fromURL("single://h?tls=true&tls_server_name=%FF"), "tls_server_name", "must be valid UTF-8"},
		{"a CA file that does not exist", opening(tlsOn(config.TLS{CAFile: filepath.Join(dir, "missing.pem")})), "tls_ca_file", "cannot be read"},
		{"a CA file that holds no certificate", opening(tlsOn(config.TLS{CAFile: notPEM})), "tls_ca_file", "holds no PEM certificate"},
		{"a client key that does not exist", opening(tlsOn(config.TLS{CertFile: pki.ClientCert, KeyFile: filepath.Join(dir, "missing.key")})), "tls_key_file", "cannot be read"},
		{"a client key of another certificate", opening(tlsOn(config.TLS{CertFile: pki.ClientCert, KeyFile: pki.ServerKey})), "tls_cert_file", "with tls_key_file"},

		// Timeouts and pool.
		{"a negative dial timeout", fromURL("single://h?dial_timeout=-1s"), "dial_timeout", "must not be negative, got -1s"},
		{"a read timeout that is not a duration", fromURL("single://h?read_timeout=fast"), "read_timeout", `want a duration such as 30s, 500ms or 1m30s, got "fast"`},
		{"a write timeout without a unit", fromURL("single://h?write_timeout=5"), "write_timeout", `want a duration such as 30s, 500ms or 1m30s, got "5"`},
		{"a negative pool size", fromURL("single://h?pool_size=-1"), "pool_size", "must be at least 0, got -1"},
		{"a pool size that is not a number", fromURL("single://h?pool_size=many"), "pool_size", `want an integer, got "many"`},

		// Defaults of locks.
		{"a TTL under 1ms", fromURL("single://h?ttl=500us"), "ttl", "must be at least 1ms, got 500µs"},
		{"an unknown retry policy", fromURL("single://h?retry=sometimes"), "retry", "want none, linear:<interval> (such as linear:100ms) or exponential:<base>,<max>"},
		{"a linear retry of 0s", fromURL("single://h?retry=linear:0s"), "retry", `got "linear:0s"`},
		{"none with an argument", fromURL("single://h?retry=none:1s"), "retry", `got "none:1s"`},
		{"an exponential retry with base > max", fromURL("single://h?retry=exponential:1s,10ms"), "retry", "exponential needs 0 < base <= max"},
		{"an exponential retry without max", fromURL("single://h?retry=exponential:10ms"), "retry", "exponential needs 0 < base <= max"},
		{"max attempts without retry", fromURL("single://h?max_attempts=3"), "max_attempts", "retry is none: set retry too"},
		{"negative max attempts", fromURL("single://h?retry=linear:1s&max_attempts=-1"), "max_attempts", "must be at least 0"},
		{"an unknown way to wait", fromURL("single://h?wait=push"), "wait", `want one of notify, poll, got "push"`},
		{"otel not a boolean", fromURL("single://h?otel=maybe"), "otel", `want true or false, got "maybe"`},
		{"an unknown key policy", fromURL("single://h?otel=true&otel_keys=secret"), "otel_keys", `want one of hashed, omitted, raw, got "secret"`},
		{"a key policy with otel off", fromURL("single://h?otel_keys=raw"), "otel_keys", "is set but otel is off"},
		{"without_scripts not a boolean", fromURL("single://h?without_scripts=yes"), "without_scripts", `want true or false, got "yes"`},
		{"without_scripts as a JSON string", fromJSON(`{"without_scripts": "true"}`), "without_scripts", "want true or false"},
		{"a restart guard without scripts", fromURL("redlock://h1?ttl=1m&restart_guard=1m&without_scripts=true"), "restart_guard", "cannot be used with without_scripts"},
		{"a Go restart guard without scripts", validating(config.Config{Strategy: "redlock", Addrs: []string{"h"}, RestartGuard: time.Minute, WithoutScripts: true}), "restart_guard", "cannot be used with without_scripts"},

		// single.
		{"negative replicas", fromURL("single://h?replicas=-1"), "replicas", "must be at least 0, got -1"},
		{"replicas that is not a number", fromURL("single://h?replicas=two"), "replicas", `want an integer, got "two"`},
		{"a replica timeout without replicas", fromURL("single://h?replica_timeout=50ms"), "replica_timeout", "is set but replicas is 0: set replicas too"},
		{"a negative replica timeout", fromURL("single://h?replicas=1&replica_timeout=-1ms"), "replica_timeout", "must not be negative"},
		{"a negative fence TTL", fromURL("single://h?fence_ttl=-1s"), "fence_ttl", "must not be negative, got -1s (0: never expire; unset: 100 × the TTL)"},
		{"a fence TTL of -1ns", fromURL("single://h?fence_ttl=-1ns"), "fence_ttl", "must not be negative, got -1ns"},
		{"a negative Go fence TTL", validating(config.Config{Strategy: "single", Addrs: []string{"h"}, FenceTTL: -time.Second}), "fence_ttl", "must not be negative, got -1s"},
		{"a fence TTL that is not a duration", fromURL("single://h?fence_ttl=long"), "fence_ttl", "want a duration"},
		{"a fence TTL as a JSON number", fromJSON(`{"fence_ttl": 0}`), "fence_ttl", "want a JSON string"},
		// Deployments.
		{"an unknown topology", fromJSON(`{"strategy": "single", "addrs": ["h"], "topology": "ring"}`), "topology", `want one of standalone, sentinel, cluster, got "ring"`},
		{"the topology in the query", fromURL("single://h?topology=cluster"), "topology", "goes in the scheme: strategy+sentinel://"},
		{"sentinel without a master name", fromURL("single+sentinel://s1:26379"), "master_name", "is required with topology sentinel"},
		{"a master name without sentinel", fromURL("single://h?master_name=m"), "master_name", "is set but topology is not sentinel"},
		{"a sentinel password without sentinel", fromURL("single://h?sentinel_password=pw"), "sentinel_password", "is set but topology is not sentinel"},
		{"the sentinel password placeholder", fromURL("single+sentinel://s1?master_name=m&sentinel_password=xxxxx"), "sentinel_password", "placeholder xxxxx"},
		{"a database on a cluster", fromURL("single+cluster://h1:7000/1"), "db", "must be 0 with topology cluster"},
		{"a Unix socket with a topology", validating(config.Config{Strategy: "single", Topology: "cluster", Addrs: []string{"/run/redis.sock"}}), "addrs", "a cluster deployment is reached over TCP"},
		{"TLS over a Unix socket", fromURL("single+unix:///run/redis.sock?tls=true"), "tls", "is for TCP: address 1 of 1 is a Unix socket"},
		{"a Unix URL with a host", fromURL("single+unix://h/run/redis.sock"), "addrs", "has its path after the user information"},
		{"a Unix URL without a path", fromURL("single+unix://"), "addrs", "want the socket's path"},
		{"a relative socket path in Go", validating(config.Config{Strategy: "single", Addrs: []string{"run/redis.sock"}}), "addrs", "want host:port"},
		{"redigo and Sentinel", fromURL("single+sentinel://s1?master_name=m&driver=redigo"), "driver", "redigo cannot open a sentinel deployment, which topology names: it opens standalone; use goredis"},
		{"redigo and Cluster", fromURL("single+cluster://h1?driver=redigo"), "driver", "redigo cannot open a cluster deployment"},
		{"redigo and a Cluster node", fromJSON(`{"strategy": "redlock", "driver": "redigo", "nodes": ["redis://h1", "redis+cluster://h2"]}`), "driver", "redigo cannot open a cluster deployment, which nodes (node 2 of 2) names"},
		{"nodes for single", fromJSON(`{"strategy": "single", "nodes": ["redis://h1"]}`), "nodes", "single locks on one: set addrs"},
		{"nodes and addrs", fromJSON(`{"strategy": "redlock", "addrs": ["h1"], "nodes": ["redis://h2"]}`), "addrs", "is set with nodes"},
		{"nodes and a password", fromJSON(`{"strategy": "redlock", "password": "pw", "nodes": ["redis://h2"]}`), "password", "is set with nodes"},
		{"nodes and tls", fromJSON(`{"strategy": "redlock", "tls": true, "nodes": ["rediss://h2"]}`), "tls", "is set with nodes"},
		{"a TLS file without a TLS node", fromJSON(`{"strategy": "redlock", "tls_ca_file": "/ca.pem", "nodes": ["redis://h2"]}`), "tls_ca_file", "is set but TLS is off"},
		{"a node of an unknown scheme", fromJSON(`{"strategy": "redlock", "nodes": ["redis://h1", "http://h2"]}`), "nodes", "node 2 of 2: has an unknown scheme: want redis://host:port"},
		{"a node that is no URL, unquoted", fromJSON(`{"strategy": "redlock", "nodes": ["redis://u:s3cret@h1:port"]}`), "nodes", "node 1 of 1: is not a URL"},
		{"a node option locksmith does not take", fromJSON(`{"strategy": "redlock", "nodes": ["redis://h1?max_retries=3"]}`), "nodes", `has the option "max_retries", which locksmith does not take per node`},
		{"a node's invalid database", fromJSON(`{"strategy": "redlock", "nodes": ["redis://h1/x"]}`), "nodes", `node 1 of 1: invalid database number: "x"`},
		{"a sentinel node without a master name", fromJSON(`{"strategy": "redlock", "nodes": ["redis+sentinel://s1:26379"]}`), "nodes", "names no master: add master_name="},
		{"a node's password placeholder", fromJSON(`{"strategy": "redlock", "nodes": ["redis://u:xxxxx@h1"]}`), "nodes", "the password is the placeholder xxxxx"},
		{"a node listed twice", fromJSON(`{"strategy": "redlock", "nodes": ["redis://h1:6379", "redis://u:pw@h1/2"]}`), "nodes", "node 2 of 2: names the server of node 1 again"},
		{"a node's port out of range", fromJSON(`{"strategy": "redlock", "nodes": ["redis://h1:70000"]}`), "nodes", "the port must be a number from 1 to 65535"},
		{"a restart guard over a Cluster node", fromJSON(`{"strategy": "redlock", "restart_guard": "1m", "nodes": ["redis://h1", "redis+cluster://h2"]}`), "restart_guard", "node 2 is a Redis Cluster"},
		{"nodes as a JSON string", fromJSON(`{"strategy": "redlock", "nodes": "redis://h1"}`), "nodes", "want an array of URL strings"},

		{"a replica timeout not under the TTL", fromURL("single://h?replicas=1&ttl=1s&replica_timeout=1s"), "replica_timeout", "must be less than ttl: 1s is not less than 1s"},
		{"a replica timeout as a JSON number", fromJSON(`{"replicas": 1, "replica_timeout": 50}`), "replica_timeout", "want a JSON string"},

		// setnx-getset.
		{"an unknown format", fromURL("setnx-getset://h?format=ns"), "format", `want one of float, float-seconds, milliseconds, ms, s, seconds, got "ns"`},
		{"a negative safety TTL", fromURL("setnx-getset://h?safety_ttl=-1s"), "safety_ttl", "must not be negative"},
		{"a clock skew that is not a duration", fromURL("setnx-getset://h?clock_skew=x"), "clock_skew", "want a duration"},
		{"a safety TTL under the clock skew", fromURL("setnx-getset://h?safety_ttl=1s&clock_skew=2s"), "safety_ttl", "must cover clock_skew: 1s is less than 2s"},

		// redlock.
		{"a quorum under a majority", fromURL("redlock://h1,h2,h3?quorum=1"), "quorum", "must be a majority of the 3 nodes, from 2 to 3, got 1"},
		{"a quorum over N", fromURL("redlock://h1,h2,h3?quorum=4"), "quorum", "from 2 to 3, got 4"},
		{"a negative quorum", fromURL("redlock://h1,h2,h3?quorum=-1"), "quorum", "must be at least 0"},
		{"a drift factor of 0 written out", fromURL("redlock://h1?drift_factor=0"), "drift_factor", "must be more than 0 and less than 1, got 0 (unset: 0.01)"},
		{"a drift factor of 1", fromURL("redlock://h1?drift_factor=1"), "drift_factor", "must be more than 0 and less than 1, got 1"},
		{"a drift factor that is not a number", fromURL("redlock://h1?drift_factor=NaN"), "drift_factor", `want a number such as 0.01, got "NaN"`},
		{"a node timeout not under the TTL", fromURL("redlock://h1?node_timeout=30s"), "node_timeout", "must be less than ttl: 30s is not less than 30s"},
		{"a negative node timeout", fromURL("redlock://h1?node_timeout=-5ms"), "node_timeout", "must not be negative"},
		{"max extensions of 0 written out", fromURL("redlock://h1?max_extensions=0"), "max_extensions", "must be at least 1, got 0 (unset: no limit)"},
		{"a restart guard under the TTL", fromURL("redlock://h1?ttl=1m&restart_guard=30s"), "restart_guard", "must be at least ttl, the largest TTL in use: 30s is less than 1m0s"},

		// The Elector's.
		{"a lease under 30ms", fromURL("single://h?lease=29ms"), "lease", "must be at least 30ms, got 29ms"},
		{"a negative lease", fromURL("single://h?lease=-1s"), "lease", "must not be negative, got -1s"},
		{"a lease that is not a duration", fromURL("single://h?lease=long"), "lease", `want a duration such as 30s, 500ms or 1m30s, got "long"`},
		{"a lease as a JSON number", fromJSON(`{"lease": 15}`), "lease", "want a JSON string"},
		{"a Go lease under 30ms", validating(config.Config{Strategy: "single", Addrs: []string{"h"}, Lease: time.Millisecond}), "lease", "must be at least 30ms, got 1ms"},
		{"a stop grace of half the lease", fromURL("single://h?lease=10s&stop_grace=5s"), "stop_grace", "must be under half the lease, 5s, got 5s"},
		{"a stop grace of half the default lease", fromURL("single://h?stop_grace=7500ms"), "stop_grace", "must be under half the lease, 7.5s, got 7.5s"},
		{"a stop grace over the lease", fromJSON(`{"strategy": "single", "addrs": ["h"], "lease": "1s", "stop_grace": "2s"}`), "stop_grace", "must be under half the lease, 500ms, got 2s"},
		{"a negative stop grace", fromURL("single://h?stop_grace=-1ms"), "stop_grace", "must not be negative, got -1ms"},
		{"a Go stop grace of half the lease", validating(config.Config{Strategy: "single", Addrs: []string{"h"}, Lease: time.Second, StopGrace: 500 * time.Millisecond}), "stop_grace", "must be under half the lease, 500ms, got 500ms"},
		{"an interval under 1ms", fromURL("single://h?interval=500us"), "interval", "must be at least 1ms, got 500µs"},
		{"a negative interval", fromURL("single://h?interval=-1s"), "interval", "must not be negative, got -1s"},
		{"an interval as a JSON number", fromJSON(`{"interval": 1}`), "interval", "want a JSON string"},
		{"an identity that starts with 0x1e", fromURL("single://h?identity=%1Eweb-3"), "identity", "must not start with the byte 0x1e"},
		{"a Go identity that starts with 0x1e", validating(config.Config{Strategy: "single", Addrs: []string{"h"}, Identity: "\x1eweb-3"}), "identity", "must not start with the byte 0x1e"},
		{"an identity that is not UTF-8", fromURL("single://h?identity=%FF"), "identity", "must be valid UTF-8"},
		{"an empty identity", fromURL("single://h?identity="), "identity", "is empty"},
		{"an identity as a JSON number", fromJSON(`{"identity": 3}`), "identity", "want a JSON string"},

		// JSON.
		{"JSON that is not an object", fromJSON(`[1]`), "json", "want an object of settings"},
		{"an unknown JSON key", fromJSON(`{"strategy": "single", "addrs": ["h"], "tll": "1s"}`), `setting "tll"`, `unknown: did you mean "ttl"?`},
		{"a duration as a JSON number", fromJSON(`{"ttl": 30}`), "ttl", `want a JSON string (a duration such as "30s" is a string)`},
		{"a number as a JSON string", fromJSON(`{"db": "1"}`), "db", "want a JSON number"},
		{"a boolean as a JSON string", fromJSON(`{"tls": "true"}`), "tls", "want true or false"},
		{"addrs as a JSON string", fromJSON(`{"addrs": "h1:6379"}`), "addrs", `want an array of "host:port" strings`},
		{"two servers in one element", fromJSON(`{"addrs": ["h1,h2"]}`), "addrs", "one server each"},
		{"a JSON key given twice", fromJSON(`{"ttl": "1s", "ttl": "2s"}`), "ttl", "is given twice"},
		{"an empty JSON string", fromJSON(`{"driver": ""}`), "driver", "is empty"},
		{"JSON without a strategy", fromJSON(`{"addrs": ["h"]}`), "strategy", "is required"},
		{"JSON without servers", fromJSON(`{"strategy": "single"}`), "addrs", "must list at least one server"},

		// Go values.
		{"the zero Config", validating(config.Config{}), "strategy", "is required"},
		{"Params holding a setting", validating(config.Config{Strategy: "single", Addrs: []string{"h"}, Params: map[string]string{"ttl": "1s"}}),
			`Params["ttl"]`, "is a setting of its own"},
		{"Params holding an unknown name", validating(config.Config{Strategy: "single", Addrs: []string{"h"}, Params: map[string]string{"zone": "a"}}),
			`setting "zone"`, "unknown"},
		{"a Go drift factor of 2", validating(config.Config{Strategy: "redlock", Addrs: []string{"h"}, DriftFactor: 2}), "drift_factor", "got 2"},
	} {
		t.Run(c.name, func(t *testing.T) { checkBad(t, c) })
	}
}

func checkBad(t *testing.T, c badCase) {
	t.Helper()
	err := c.load()
	var ae *lock.ArgumentError
	if !errors.As(err, new(*lock.ArgumentError)) || !errors.As(err, &ae) {
		t.Fatalf("got %v, want an *lock.ArgumentError", err)
	}
	if ae.Name != c.setting || !strings.Contains(ae.Reason, c.reason) {
		t.Fatalf("got %s: %s; want %s: ...%s...", ae.Name, ae.Reason, c.setting, c.reason)
	}
}

// TestEnvironmentErrorsNameTheVariable: an error in a variable names it.
func TestEnvironmentErrorsNameTheVariable(t *testing.T) {
	for _, c := range []struct {
		name, variable, value, setting, reason string
	}{
		{"a bad variable", "TTL", "soon", envPrefix + "TTL", `want a duration`},
		{"replicas that is not a number", "REPLICAS", "x", envPrefix + "REPLICAS", `want an integer, got "x"`},
		{"without_scripts that is not a boolean", "WITHOUT_SCRIPTS", "on", envPrefix + "WITHOUT_SCRIPTS", `want true or false, got "on"`},
		{"a lease that is not a duration", "LEASE", "15", envPrefix + "LEASE", `want a duration such as 30s, 500ms or 1m30s, got "15"`},
		{"an interval under 1ms", "INTERVAL", "1us", envPrefix + "INTERVAL", "must be at least 1ms, got 1µs"},
		{"an identity that starts with 0x1e", "IDENTITY", "\x1eweb-3", envPrefix + "IDENTITY", "must not start with the byte 0x1e"},
		{"a bad URL", "URL", "single://h?ttl=soon", envPrefix + "URL: ttl", `want a duration`},
		{"a bad parameter of the URL", "URL", "single://h:99999", envPrefix + "URL: addrs", "the port must be"},
		{"nothing set", "UNRELATED", "1", "strategy", "is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envPrefix+c.variable, c.value)
			checkBad(t, badCase{load: func() error { _, err := config.FromEnv(envPrefix); return err }, setting: c.setting, reason: c.reason})
		})
	}
}

// TestEnvironmentOverridesTheURL: the variables of single settings win
// over the URL's, and an empty variable is unset.
func TestEnvironmentOverridesTheURL(t *testing.T) {
	t.Setenv(envPrefix+"URL", "single://alice@h1:6379?ttl=10s&driver=redigo")
	t.Setenv(envPrefix+"PASSWORD", "from-a-secret-store")
	t.Setenv(envPrefix+"TTL", "20s")
	t.Setenv(envPrefix+"DRIVER", "")
	c, err := config.FromEnv(envPrefix)
	want := config.Config{Strategy: "single", Driver: "redigo", Addrs: []string{"h1:6379"}, Username: "alice", Password: "from-a-secret-store", TTL: 20 * time.Second}
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Fatalf("FromEnv = %v (password %q), %v; want %v (password %q)", c, c.Password, err, want, want.Password)
	}
}

// TestSecretsStayHidden: the password appears in no error, String, fmt
// verb, log/slog record or JSON, of a Config or of a Locker.
func TestSecretsStayHidden(t *testing.T) {
	const password = "Sup3r-secret-pw"
	addr, _ := redistest.Addr(t)
	good := config.Config{Strategy: "single", Addrs: []string{addr}, Username: "alice", Password: password}
	l := open(t, good)

	type wrapper struct {
		Lock config.Config
		Ptr  *config.Config
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("text", "config", good, "locker", l, "nested", wrapper{good, &good})
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("json", "config", good, "locker", l, "nested", wrapper{good, &good})
	marshalled, err := json.Marshal(wrapper{good, &good})
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	printed := map[string]string{
		"String":      good.String(),
		"fmt verbs":   fmt.Sprintf("%v %+v %#v %s %q %x %d", good, good, good, good, good, good, good),
		"fmt pointer": fmt.Sprintf("%v %+v %#v", &good, &good, &good),
		"fmt nested":  fmt.Sprintf("%v %+v %#v", wrapper{good, &good}, wrapper{good, &good}, wrapper{good, &good}),
		"Locker":      fmt.Sprintf("%v %+v %#v", l, l, l),
		"Defaults":    good.Defaults().String(),
		"log/slog":    logs.String(),
		"JSON":        string(marshalled),
	}

	badURL := "single://alice:" + password + "@" + addr + "?ttl=soon"
	badEnv := func() error {
		t.Setenv(envPrefix+"PASSWORD", password)
		t.Setenv(envPrefix+"ADDRS", addr)
		t.Setenv(envPrefix+"STRATEGY", "redlock")
		t.Setenv(envPrefix+"QUORUM", "7")
		_, err := config.FromEnv(envPrefix)
		return err
	}
	withBadCA := good
	withBadCA.TLS = config.TLS{Enabled: true, CAFile: filepath.Join(t.TempDir(), "missing.pem")}
	mistyped := good
	mistyped.Addrs = []string{"alice:" + password + "@" + addr}
	for name, load := range map[string]func() error{
		"ParseURL":             fromURL(badURL),
		"FromEnv":              badEnv,
		"UnmarshalJSON":        fromJSON(`{"strategy": "single", "addrs": ["h"], "password": "` + password + `", "ttl": "soon"}`),
		"Open":                 opening(withBadCA),
		"a mistyped address":   validating(mistyped),
		"a password as a port": fromURL("single://h:" + password),
	} {
		if err := load(); err == nil {
			t.Fatalf("%s: got no error, want one", name)
		} else {
			printed[name+" error"] = err.Error()
		}
	}
	for where, text := range printed {
		t.Run(where, func(t *testing.T) {
			if strings.Contains(text, password) {
				t.Fatalf("got %q, which shows the password", text)
			}
		})
	}
}

// TestFlippingTheStrategy: changing the strategy alone switches from
// setnx-getset to single, and the two exclude each other on a key, as the
// second phase of a migration needs.
func TestFlippingTheStrategy(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	legacy, err := config.ParseURL("setnx-getset://" + addr + "?format=ms&safety_ttl=1m")
	if err != nil {
		t.Fatal(err)
	}
	flipped := legacy
	flipped.Strategy = "single"
	for _, c := range []struct {
		name           string
		first, second  config.Config
		firstTimestamp bool
	}{
		{"setnx-getset holds, single waits", legacy, flipped, true},
		{"single holds, setnx-getset waits", flipped, legacy, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			lk, err := open(t, c.first).Obtain(ctx, "flip", time.Minute)
			if err != nil {
				t.Fatalf("Obtain: %v", err)
			}
			defer lk.Release(ctx)
			if _, err := strconv.ParseInt(lk.Token(), 10, 64); (err == nil) != c.firstTimestamp {
				t.Fatalf("the value %s is a timestamp: %v, want %v", c.first.Strategy, err == nil, c.firstTimestamp)
			}
			if _, err := open(t, c.second).Obtain(ctx, "flip", time.Minute); !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("Obtain by %s while %s holds = %v, want ErrNotObtained", c.second.Strategy, c.first.Strategy, err)
			}
		})
	}
}

// TestLockerDefaults: the Locker's default TTL and retry policy.
func TestLockerDefaults(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	base := config.Config{Strategy: "single", Addrs: []string{addr}}

	t.Run("TTL is 30s by default", func(t *testing.T) {
		if got := base.Defaults().TTL; got != 30*time.Second {
			t.Fatalf("Defaults().TTL = %v, want 30s", got)
		}
	})
	t.Run("TTL is the configured one", func(t *testing.T) {
		c := base
		c.TTL = 45 * time.Second
		if got := c.Defaults().TTL; got != 45*time.Second {
			t.Fatalf("Defaults().TTL = %v, want 45s", got)
		}
	})

	held, err := open(t, base).Obtain(ctx, "defaults:held", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	attempts := func(t *testing.T, c config.Config, opts ...lock.Option) int {
		n := 0
		count := lock.WithHooks(&lock.Hooks{Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
			n++
			return next(ctx)
		}})
		if _, err := open(t, c).Obtain(ctx, "defaults:held", time.Minute, append(opts, count)...); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("Obtain of a held key = %v, want ErrNotObtained", err)
		}
		return n
	}
	retrying := base
	retrying.Retry, retrying.MaxAttempts = "linear:1ms", 3
	for _, c := range []struct {
		name string
		c    config.Config
		opts []lock.Option
		want int
	}{
		{"no retry by default", base, nil, 1},
		{"the configured retry policy and max attempts", retrying, nil, 3},
		{"a call's own retry policy wins", retrying, []lock.Option{lock.WithRetry(lock.NoRetry())}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := attempts(t, c.c, c.opts...); got != c.want {
				t.Fatalf("attempts = %d, want %d", got, c.want)
			}
		})
	}

	t.Run("ObtainMany gets the defaults", func(t *testing.T) {
		n := 0
		count := lock.WithHooks(&lock.Hooks{Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
			n++
			return next(ctx)
		}})
		// One key, once duplicates are removed: every strategy takes it.
		if _, err := open(t, retrying).ObtainMany(ctx, []string{"defaults:held", "defaults:held"}, time.Minute, count); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("ObtainMany of a held key = %v, want ErrNotObtained", err)
		}
		if n != 3 {
			t.Fatalf("attempts = %d, want 3 (the configured max attempts)", n)
		}
	})
	t.Run("fence_ttl gives the fencing counter its lifetime", func(t *testing.T) {
		rdb := redistest.GoRedis(t, addr, 3)
		for _, c := range []struct {
			name string
			ttl  time.Duration
			min  time.Duration // the least and most PTTL wanted, in (min, max]; -1: none
			max  time.Duration
		}{
			{"unset: 100 × the TTL", 0, 0, 100 * time.Minute},
			{"10m", 10 * time.Minute, 0, 10 * time.Minute},
			{"FenceForever", config.FenceForever, -1, -1},
		} {
			t.Run(c.name, func(t *testing.T) {
				cfg := base
				cfg.FenceTTL = c.ttl
				key := "defaults:fence:" + strings.ReplaceAll(c.name, " ", "")
				lk, err := open(t, cfg).Obtain(ctx, key, time.Minute, lock.WithFencing())
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Release(ctx)
				f, _ := single.FenceKey(key)
				defer rdb.Del(ctx, f)
				got, err := rdb.PTTL(ctx, f).Result()
				switch {
				case err != nil:
					t.Fatal(err)
				case c.max < 0 && got != -1:
					t.Errorf("PTTL of the counter = %v, want -1 (none)", got)
				case c.max >= 0 && (got <= c.min || got > c.max):
					t.Errorf("PTTL of the counter = %v, want in (%v, %v]", got, c.min, c.max)
				}
			})
		}
	})
	t.Run("Defaults returns a copy", func(t *testing.T) {
		c := base.Defaults()
		c.Addrs[0] = "changed:1"
		if got := base.Addrs[0]; got != addr {
			t.Fatalf("Addrs[0] after changing the copy Defaults returned = %q, want %q", got, addr)
		}
	})
	t.Run("Obtain and ObtainMany after Close are ErrClosed", func(t *testing.T) {
		l := open(t, base)
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := l.Obtain(ctx, "closed", time.Second); !errors.Is(err, lock.ErrClosed) {
			t.Fatalf("Obtain after Close = %v, want ErrClosed", err)
		}
		if _, err := l.ObtainMany(ctx, []string{"closed:a", "closed:b"}, time.Second); !errors.Is(err, lock.ErrClosed) {
			t.Fatalf("ObtainMany after Close = %v, want ErrClosed", err)
		}
	})
	t.Run("Close twice returns nil", func(t *testing.T) {
		l := open(t, base)
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close = %v, want nil", err)
		}
	})
}

// TestOTel: otel=true instruments the Locker with the global providers.
func TestOTel(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	spans := func(t *testing.T, c config.Config) []sdktrace.ReadOnlySpan {
		before := len(rec.Ended())
		lk, err := open(t, c).Obtain(ctx, "otel:key", time.Second)
		if err != nil {
			t.Fatalf("Obtain: %v", err)
		}
		_ = lk.Release(ctx)
		return rec.Ended()[before:]
	}
	base := config.Config{Strategy: "single", Addrs: []string{addr}}
	t.Run("off by default", func(t *testing.T) {
		if got := spans(t, base); len(got) != 0 {
			t.Fatalf("spans = %d, want 0", len(got))
		}
	})
	t.Run("otel=true records spans, without keys", func(t *testing.T) {
		c := base
		c.OTel = true
		got := spans(t, c)
		if len(got) != 3 || got[0].Name() != "lock.obtain" || got[1].Name() != "lock.release" || got[2].Name() != "lock.hold" {
			t.Fatalf("spans = %v, want lock.obtain, lock.release and lock.hold", got)
		}
		for _, kv := range got[0].Attributes() {
			if strings.Contains(kv.Value.Emit(), "otel:key") {
				t.Fatalf("span attribute %s = %s, want no key", kv.Key, kv.Value.Emit())
			}
		}
	})
	t.Run("otel_keys=raw records keys", func(t *testing.T) {
		c := base
		c.OTel, c.OTelKeys = true, "raw"
		got := spans(t, c)
		if len(got) == 0 || !hasAttribute(got[0], "locksmith.lock.key", "otel:key") {
			t.Fatalf("spans = %v, want lock.obtain with locksmith.lock.key=otel:key", got)
		}
	})
}

func hasAttribute(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) && kv.Value.Emit() == value {
			return true
		}
	}
	return false
}

// Registered by TestRegistry: a strategy and a driver of a third party.
const (
	thirdStrategy = "test-third"
	thirdDriver   = "test-third-driver"
)

// thirdParty records what the registered strategy and driver were given.
var thirdParty struct {
	configs   []config.Config
	conns     [][]driver.Conn
	endpoints []config.Endpoint
	closed    int
	failAfter int // the driver fails once it has opened this many (0: never)
}

type countingCloser struct{ io.Closer }

func (c countingCloser) Close() error { thirdParty.closed++; return c.Closer.Close() }

func init() {
	config.RegisterStrategy(thirdStrategy, config.Strategy{
		Params: []string{"third_level"},
		Check: func(c config.Config) error {
			if v := c.Params["third_level"]; v != "" && v != "high" && v != "low" {
				return &lock.ArgumentError{Name: "third_level", Reason: "want high or low"}
			}
			return nil
		},
		Nodes: true,
		New: func(c config.Config, conns []driver.Conn) (*lock.Locker, error) {
			thirdParty.configs, thirdParty.conns = append(thirdParty.configs, c), append(thirdParty.conns, conns)
			return lock.New(nil), nil // never used to lock
		},
	})
	config.RegisterDriver(thirdDriver, config.Driver{
		Params: []string{"third_zone"},
		Open: func(e config.Endpoint) (driver.Conn, io.Closer, error) {
			if thirdParty.failAfter != 0 && len(thirdParty.endpoints) == thirdParty.failAfter {
				return nil, nil, errors.New("third driver: cannot open")
			}
			thirdParty.endpoints = append(thirdParty.endpoints, e)
			client := redis.NewClient(&redis.Options{Network: e.Network, Addr: e.Addrs[0], ContextTimeoutEnabled: true})
			return goredis.New(client), countingCloser{client}, nil
		},
	})
}

// TestRegistry: strategies and drivers of third parties, by name.
func TestRegistry(t *testing.T) {
	reset := func() {
		thirdParty.configs, thirdParty.conns, thirdParty.endpoints, thirdParty.closed, thirdParty.failAfter = nil, nil, nil, 0, 0
	}

	t.Run("the built-in names are known", func(t *testing.T) {
		for _, want := range []string{"redlock", "setnx-getset", "single"} {
			if got := config.Strategies(); !slices.Contains(got, want) {
				t.Errorf("Strategies() = %v, want %s among them", got, want)
			}
		}
		for _, want := range []string{"goredis", "redigo"} {
			if got := config.Drivers(); !slices.Contains(got, want) {
				t.Errorf("Drivers() = %v, want %s among them", got, want)
			}
		}
	})
	t.Run("an unknown name lists the registered ones too", func(t *testing.T) {
		checkBad(t, badCase{load: fromURL("nope://h"), setting: "strategy", reason: thirdStrategy})
		checkBad(t, badCase{load: fromURL("single://h?driver=nope"), setting: "driver", reason: thirdDriver})
	})
	t.Run("without_scripts marks every connection they get", func(t *testing.T) {
		for _, without := range []bool{false, true} {
			reset()
			l, err := config.Open(config.Config{Strategy: thirdStrategy, Driver: thirdDriver, Addrs: []string{"h1", "h2"}, WithoutScripts: without})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.Close()
			for i, c := range thirdParty.conns[0] {
				if got := driver.ScriptsOff(c); got != without {
					t.Errorf("with without_scripts=%v, conn %d: got ScriptsOff %v, want %v", without, i, got, without)
				}
			}
		}
	})
	t.Run("their parameters load from every form", func(t *testing.T) {
		want := map[string]string{"third_level": "high", "third_zone": "eu-1"}
		fromURL, err := config.ParseURL(thirdStrategy + "://h?driver=" + thirdDriver + "&third_level=high&third_zone=eu-1")
		if err != nil || !reflect.DeepEqual(fromURL.Params, want) {
			t.Fatalf("ParseURL: Params = %v, %v; want %v", fromURL.Params, err, want)
		}
		var fromJSON config.Config
		err = json.Unmarshal([]byte(`{"strategy": "`+thirdStrategy+`", "addrs": ["h"], "driver": "`+thirdDriver+`", "third_level": "high", "third_zone": "eu-1"}`), &fromJSON)
		if err != nil || !reflect.DeepEqual(fromJSON, fromURL) {
			t.Fatalf("UnmarshalJSON = %v, %v; want %v", fromJSON, err, fromURL)
		}
		t.Setenv(envPrefix+"URL", thirdStrategy+"://h?driver="+thirdDriver)
		t.Setenv(envPrefix+"THIRD_LEVEL", "high")
		t.Setenv(envPrefix+"THIRD_ZONE", "eu-1")
		if fromEnv, err := config.FromEnv(envPrefix); err != nil || !reflect.DeepEqual(fromEnv, fromURL) {
			t.Fatalf("FromEnv = %v, %v; want %v", fromEnv, err, fromURL)
		}
		if got, want := fromURL.String(), thirdStrategy+"://h:6379?driver="+thirdDriver+"&third_level=high&third_zone=eu-1"; got != want {
			t.Fatalf("String() = %q, want %q", got, want)
		}
	})
	t.Run("their Check runs on loading", func(t *testing.T) {
		checkBad(t, badCase{load: fromURL(thirdStrategy + "://h?third_level=max"), setting: "third_level", reason: "want high or low"})
	})
	t.Run("Open hands them the Config and endpoints with defaults, and Close closes the clients", func(t *testing.T) {
		reset()
		addr, _ := redistest.Addr(t)
		l, err := config.Open(config.Config{Strategy: thirdStrategy, Driver: thirdDriver, Addrs: []string{addr},
			TLS: config.TLS{Enabled: true, InsecureSkipVerify: true}, Params: map[string]string{"third_zone": "eu-1"}})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if len(thirdParty.configs) != 1 || thirdParty.configs[0].Params["third_zone"] != "eu-1" {
			t.Fatalf("the strategy got %v, want one Config with third_zone=eu-1", thirdParty.configs)
		}
		e := thirdParty.endpoints[0]
		host := strings.Split(addr, ":")[0]
		if e.Addrs[0] != addr || e.Config.DialTimeout != 5*time.Second || e.Config.ReadTimeout != 3*time.Second ||
			e.Config.WriteTimeout != 3*time.Second || e.Config.PoolSize <= 0 || e.TLS == nil || e.TLS.ServerName != host {
			t.Fatalf("the driver got %+v (TLS %v), want %s with the defaults and TLS for %s", e, e.TLS, addr, host)
		}
		if err := l.Close(); err != nil || thirdParty.closed != 1 {
			t.Fatalf("Close = %v, closing %d clients; want nil, 1", err, thirdParty.closed)
		}
	})
	t.Run("when building fails, Open closes what it opened", func(t *testing.T) {
		reset()
		thirdParty.failAfter = 2
		_, err := config.Open(config.Config{Strategy: thirdStrategy, Driver: thirdDriver, Addrs: []string{"h1", "h2", "h3"}})
		if err == nil || !strings.Contains(err.Error(), "cannot open") || thirdParty.closed != 2 {
			t.Fatalf("Open = %v, closing %d clients; want the driver's error, 2", err, thirdParty.closed)
		}
	})
	for _, c := range []struct {
		name     string
		register func()
		want     string
	}{
		{"a strategy registered twice", func() { config.RegisterStrategy("single", config.Strategy{New: nilNew}) }, `RegisterStrategy called twice for "single"`},
		{"a driver registered twice", func() { config.RegisterDriver("redigo", config.Driver{Open: nilOpen}) }, `RegisterDriver called twice for "redigo"`},
		{"a name that is no URL scheme", func() { config.RegisterStrategy("My_Lock", config.Strategy{New: nilNew}) }, `invalid name "My_Lock"`},
		{"a strategy without New", func() { config.RegisterStrategy("test-no-new", config.Strategy{}) }, "nil function"},
		{"a driver without Open", func() { config.RegisterDriver("test-no-open", config.Driver{}) }, "nil function"},
		{"a parameter named as a setting", func() {
			config.RegisterStrategy("test-ttl", config.Strategy{New: nilNew, Params: []string{"ttl"}})
		}, `parameter "ttl" is a built-in setting`},
		{"a parameter of another", func() {
			config.RegisterDriver("test-zone", config.Driver{Open: nilOpen, Params: []string{"third_zone"}})
		}, `parameter "third_zone" belongs to driver ` + thirdDriver},
		{"a parameter named url", func() {
			config.RegisterDriver("test-url", config.Driver{Open: nilOpen, Params: []string{"url"}})
		}, `parameter "url" is a built-in setting`},
		{"an invalid parameter name", func() {
			config.RegisterDriver("test-upper", config.Driver{Open: nilOpen, Params: []string{"Zone"}})
		}, `invalid parameter "Zone"`},
	} {
		t.Run(c.name+" panics", func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); !strings.Contains(got, c.want) {
					t.Fatalf("panic = %q, want %q", got, c.want)
				}
			}()
			c.register()
		})
	}
}

func nilNew(config.Config, []driver.Conn) (*lock.Locker, error) { return nil, nil }
func nilOpen(config.Endpoint) (driver.Conn, io.Closer, error)   { return nil, nil, nil }

// TestFileErrorsMatchTheirCause: a TLS file that cannot be read gives an
// error that also matches the file system's.
func TestFileErrorsMatchTheirCause(t *testing.T) {
	err := opening(config.Config{Strategy: "single", Addrs: []string{"h"}, TLS: config.TLS{Enabled: true, CAFile: filepath.Join(t.TempDir(), "missing")}})()
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, new(*lock.ArgumentError)) {
		t.Fatalf("got %v, want an error matching fs.ErrNotExist and an *lock.ArgumentError", err)
	}
}
