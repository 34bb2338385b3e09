// Package config builds a [lock.Locker] from configuration, so that the
// strategy, the driver and the servers change by editing configuration, not
// code. A fleet migrating off legacy locks flips one setting: the strategy.
//
//	cfg, err := config.ParseURL("redlock://h1:6379,h2:6379,h3:6379/0?ttl=30s")
//	...
//	locker, err := config.Open(cfg) // locker.Close closes the clients it opened
//	...
//	lk, err := locker.Obtain(ctx, "report:daily", 0) // 0: the configured TTL
//
// A [Config] comes from a URL ([ParseURL]; a standard redis://, rediss:// or
// unix:// URL means the single strategy over that server), from JSON (Config
// implements json.Marshaler and json.Unmarshaler), from environment
// variables ([FromEnv]), or from Go code: the same settings under the same
// names. [Open] checks it, opens the clients it names, and returns a
// [*Locker], which closes them on Close. An invalid setting gets an
// [*lock.ArgumentError] that names it, and the password never appears in
// errors or output. The package links go-redis only: the redigo and rueidis
// drivers and the otel setting need a blank import of config/redigoconfig,
// config/rueidisconfig or config/otelconfig; [RegisterStrategy] and
// [RegisterDriver] add others. [NewElector] builds a leader election
// (package elect) over the Locker, with the configuration's lease,
// stop_grace, interval and identity.
//
// The repository's docs/config.md lists every setting, rule and deployment,
// and docs/extending.md shows how to register a strategy or driver.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locksmith-go/lock"
)

// Defaults of the settings whose default is not the zero value, which the
// fields' doc comments state.
const (
	defaultTTL          = 30 * time.Second
	defaultDialTimeout  = 5 * time.Second
	defaultReadTimeout  = 3 * time.Second
	defaultWriteTimeout = 3 * time.Second
	// defaultLease is elect's default lease (elect.WithLease), which the
	// stop grace is checked against when Lease is unset.
	defaultLease = 15 * time.Second
	// defaultReplicaTimeout is long for a healthy replica, whose
	// acknowledgement comes back in about a round trip, and short enough
	// that an acquisition fails fast when none can give it.
	defaultReplicaTimeout = 100 * time.Millisecond
)

// FenceForever is the FenceTTL of fencing counters that never expire,
// single.WithFenceTTL(0): "0" in a URL, the environment or JSON, where an
// absent fence_ttl is the default.
const FenceForever time.Duration = -1

// Config describes a Locker: the strategy, the driver and servers it runs
// over, and the defaults of its locks. The zero value of a field means its
// default. Each field is a setting named in snake case (tls_ca_file for
// TLS.CAFile; format for TimestampFormat); docs/config.md's "Every
// setting" lists every setting with its names in the three forms.
//
// Print a Config freely: String, every fmt verb, log/slog and MarshalJSON
// show the password as xxxxx.
type Config struct {
	// Strategy is the lock algorithm: single, setnx-getset, redlock, or a
	// registered name. Required.
	Strategy string
	// Driver is the client library: goredis (the default); redigo or
	// rueidis, which a program enables with a blank import of
	// config/redigoconfig or config/rueidisconfig; or a registered name.
	Driver string
	// Topology is how the servers of Addrs are deployed: standalone (the
	// default: each is a server), sentinel (they are Redis Sentinels,
	// which name the master called MasterName and replace it on failover)
	// or cluster (they are seed nodes of one Redis Cluster). A Sentinel or
	// Cluster deployment is one server to a strategy.
	Topology string
	// Addrs are the servers, as host:port (the port defaults to 6379; an
	// IPv6 host goes in brackets), or the absolute path of a Unix socket;
	// or the Sentinels, or the seed nodes of a Cluster. single and
	// setnx-getset lock on one server; redlock on one per address.
	// Required, unless Nodes lists redlock's nodes.
	Addrs []string
	// DB is the database number.
	DB int
	// Username and Password authenticate to the servers (Redis ACLs; a
	// password alone authenticates as the default user). The password is
	// a secret.
	Username, Password string
	// MasterName is the name under which the Sentinels monitor the
	// master. Required with Topology sentinel.
	MasterName string
	// SentinelUsername and SentinelPassword authenticate to the Sentinels,
	// where they require it (Username and Password authenticate to the
	// master). The password is a secret.
	SentinelUsername, SentinelPassword string
	// Nodes are redlock's nodes, one URL each, where they differ from one
	// another: each a standalone server, a Sentinel-monitored master or a
	// Redis Cluster, with its own credentials, as go-redis reads them:
	// redis://user:pass@host:port/db, rediss:// (TLS, with the TLS
	// settings' files), unix:///path?db=N,
	// redis+sentinel://host:port?master_name=name&addr=host2:port (the
	// user information authenticates to the Sentinels, username= and
	// password= to the master) and redis+cluster://host:port?addr=host2:port.
	// Passwords in them are secrets. Nodes replaces Addrs and the settings
	// of the servers (Topology, DB, Username, Password, MasterName,
	// Sentinel*, TLS.Enabled), which each node's URL carries.
	Nodes []string
	// TLS configures TLS. It is off by default.
	TLS TLS
	// DialTimeout, ReadTimeout and WriteTimeout bound connecting, reading
	// a reply and writing a command. A context's deadline bounds each call
	// too. The defaults are 5s, 3s and 3s. (The rueidis driver maps them,
	// and PoolSize, onto its own options: see config/rueidisconfig.)
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// PoolSize is the most connections a client keeps to each server. The
	// default is 10 per CPU (GOMAXPROCS), go-redis's default.
	PoolSize int

	// TTL is the default TTL of locks, which [Config.Defaults] fills in, and
	// which an Obtain, ObtainMany or lock.Do whose ttl is 0 uses (a ttl
	// other than 0 wins). The default is 30s.
	TTL time.Duration
	// Retry is the default retry policy of Obtain: none (the default),
	// linear:<interval> or exponential:<base>,<max>, as lock.Linear and
	// lock.Exponential. An Obtain's own lock.WithRetry overrides it.
	Retry string
	// MaxAttempts caps the attempts of one Obtain under Retry, as
	// lock.LimitAttempts. The default is no cap: the context ends the wait.
	MaxAttempts int
	// Wait is how Obtain waits while the lock is held: notify (the
	// default: a release wakes the waiters, in turn, where the strategy
	// and driver support it) or poll (lock.WithPolling: each waiter tries
	// again when its retry policy's delay has passed). It applies to
	// every Obtain that waits: under Retry, or under the call's own
	// lock.WithRetry.
	Wait string
	// WithoutScripts marks every connection to the servers
	// driver.WithoutScripts, for servers that forbid scripts: an ACL
	// without @scripting, a proxy, a managed service. The built-in
	// strategies then send no script (EVAL, EVALSHA, FCALL, SCRIPT), but
	// the servers' conditional commands where they have them, and
	// transactions where not; single's waiters poll, in no particular
	// order. A registered strategy that runs a script over such a
	// connection gets an error that says scripts are off, and redlock's
	// restart_guard, whose acquisition is a script, is refused. The
	// default is off: scripts.
	WithoutScripts bool
	// OTel wraps the Locker with OpenTelemetry instrumentation (package
	// lockotel), with the global providers. A program enables it with a
	// blank import of config/otelconfig.
	OTel bool
	// OTelKeys is how spans record keys: omitted (the default), hashed or
	// raw, as lockotel.WithKeys.
	OTelKeys string

	// TimestampFormat is setnx-getset's format: seconds or s (the
	// default), milliseconds or ms, float-seconds or float.
	TimestampFormat string
	// SafetyTTL is setnx-getset's safety TTL past the timestamp, as
	// setnxgetset.WithSafetyTTL. The default is none. It must cover
	// ClockSkew.
	SafetyTTL time.Duration
	// ClockSkew is setnx-getset's allowance for clock skew across the
	// fleet, as setnxgetset.WithClockSkew. The default is 0.
	ClockSkew time.Duration

	// Replicas is how many replicas must acknowledge (WAIT) each
	// acquisition and refresh of single, as single.WithReplicas. The
	// default, 0, waits for none.
	Replicas int
	// ReplicaTimeout is how long single waits for Replicas, less than TTL;
	// it needs Replicas. The default is 100ms.
	ReplicaTimeout time.Duration
	// FenceTTL is how long single's fencing counter lives after its last
	// fenced acquisition, as single.WithFenceTTL. The default, 0, is 100 ×
	// the TTL of that acquisition; [FenceForever], "0" in the text forms,
	// keeps every counter for ever.
	FenceTTL time.Duration

	// Quorum is how many redlock nodes must grant a lock: a majority or
	// more. The default is N/2+1.
	Quorum int
	// DriftFactor is redlock's clock-drift factor, more than 0 and less
	// than 1. The default is 0.01.
	DriftFactor float64
	// NodeTimeout is how long one redlock node may take, less than TTL.
	// The default is derived from each call's TTL (5% of it, from 500ms to
	// 1s, and at most half of it).
	NodeTimeout time.Duration
	// MaxExtensions caps how many times a redlock lock may be refreshed.
	// The default is no limit.
	MaxExtensions int
	// RestartGuard enforces redlock's delayed-restart rule from the
	// clients, as redlock.WithRestartGuard: at least TTL. The default is
	// off.
	RestartGuard time.Duration

	// Lease, StopGrace, Interval and Identity are the settings of the
	// Elector that [NewElector] builds (package elect); Open does not read
	// them. Each is elect's option of that name, and its zero value
	// elect's default.
	//
	// Lease is the leader's lease, as elect.WithLease: at least 30ms. The
	// default is elect's, 15s, whatever TTL is: TTL is the default of
	// locks, and a leader's lease is how long a crashed leader goes
	// unreplaced.
	Lease time.Duration
	// StopGrace is how long before the lease could pass on the leader's
	// work is told to stop, as elect.WithStopGrace: under half the lease
	// (Lease, or its default). The default is a fifth of the lease.
	StopGrace time.Duration
	// Interval is how often a candidate that heard no release tries
	// again, and an observer reads the leader, as elect.WithInterval: at
	// least 1ms. The default is a tenth of the lease, at most 1s. It is
	// not Retry, which is Obtain's.
	Interval time.Duration
	// Identity is the candidate's identity, which the leader's key
	// carries, as elect.WithIdentity: it must not start with the byte
	// 0x1e. The default is the host name and the process id, "host
	// pid=123".
	Identity string

	// Params carries the settings of registered strategies and drivers,
	// by the names they declared.
	Params map[string]string
}

// TLS configures TLS for every client of a Config.
type TLS struct {
	// Enabled turns TLS on. The other fields need it.
	Enabled bool
	// CAFile is a PEM file of the certificate authorities that sign the
	// servers' certificates. The default is the system's roots.
	CAFile string
	// CertFile and KeyFile are PEM files of a client certificate and its
	// key, for servers that require one (tls-auth-clients). Set both or
	// neither.
	CertFile, KeyFile string
	// ServerName is the name that the servers' certificates must carry.
	// The default is each server's host.
	ServerName string
	// InsecureSkipVerify accepts any certificate, which lets anyone in the
	// path read and change the traffic, the password included. UNSAFE: for
	// tests only.
	InsecureSkipVerify bool
}

// Validate checks every setting, and returns an *lock.ArgumentError that
// names the first invalid one and says what is allowed. [Open], [ParseURL],
// [FromEnv] and UnmarshalJSON call it.
func (c Config) Validate() error {
	for _, s := range settings {
		if s.check == nil {
			continue
		}
		if err := s.check(&c); err != nil {
			return invalid(s.name, err)
		}
	}
	switch {
	case c.Strategy == "":
		return invalid("strategy", knownStrategy(""))
	case len(c.Addrs) == 0 && len(c.Nodes) == 0:
		return invalid("addrs", fmt.Errorf("must list at least one server, as host:port"))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Params)) {
		if _, builtin := lookup(name); builtin {
			return invalid(fmt.Sprintf("Params[%q]", name), errors.New("is a setting of its own: set its Config field"))
		}
		if !isParam(name) {
			return unknownSetting(name)
		}
		if err := validText(c.Params[name]); err != nil {
			return invalid(name, err)
		}
	}
	for _, r := range rules {
		if name, err := r(c); err != nil {
			return invalid(name, err)
		}
	}
	if err := c.checkServers(); err != nil {
		return err
	}
	if check := strategyOf(c).Check; check != nil {
		if err := check(c); err != nil {
			return err
		}
	}
	if check := driverOf(c).Check; check != nil {
		return check(c)
	}
	return nil
}

// checkServers checks the servers against the strategy, which may lock on
// one or several, and the driver, which may not open every deployment.
func (c Config) checkServers() error {
	eps := c.endpoints()
	switch {
	case !strategyOf(c).Nodes && len(c.Nodes) > 0:
		return invalid("nodes", fmt.Errorf("lists the nodes of a strategy that locks on several servers, such as redlock: %s locks on one: set addrs", c.Strategy))
	case !strategyOf(c).Nodes && len(eps) != 1:
		return invalid("addrs", fmt.Errorf("%s locks on one server, got %d: list several only for redlock", c.Strategy, len(eps)))
	}
	topologies := append([]string{standalone}, driverOf(c).Topologies...)
	for i, e := range eps {
		if !slices.Contains(topologies, e.Topology) {
			where := "topology"
			if len(c.Nodes) > 0 {
				where = fmt.Sprintf("nodes (node %d of %d)", i+1, len(eps))
			}
			return invalid("driver", fmt.Errorf("%s cannot open a %s deployment, which %s names: it opens %s; use goredis", c.driver(), e.Topology, where, strings.Join(topologies, ", ")))
		}
	}
	return nil
}

// rules check settings against each other; each returns the setting it
// blames.
var rules = []func(c Config) (string, error){
	func(c Config) (string, error) {
		if len(c.Nodes) == 0 {
			return "", nil
		}
		for _, name := range []string{"topology", "addrs", "db", "username", "password", "master_name", "sentinel_username", "sentinel_password", "tls"} {
			if s, _ := lookup(name); s.get(&c) != "" {
				return name, fmt.Errorf("is set with nodes, whose URLs each carry their own: set one or the other")
			}
		}
		return "", nil
	},
	func(c Config) (string, error) {
		sentinelOnly := []struct{ name, value string }{{"master_name", c.MasterName}, {"sentinel_username", c.SentinelUsername}, {"sentinel_password", c.SentinelPassword}}
		switch {
		case c.Topology == sentinel && c.MasterName == "":
			return "master_name", fmt.Errorf("is required with topology sentinel: the name under which the Sentinels monitor the master")
		case c.Topology == cluster && c.DB != 0:
			return "db", fmt.Errorf("must be 0 with topology cluster: a Redis Cluster has database 0 only")
		case c.Topology != sentinel:
			for _, s := range sentinelOnly {
				if s.value != "" {
					return s.name, fmt.Errorf("is set but topology is not sentinel: set topology to sentinel too")
				}
			}
		}
		for i, a := range c.Addrs {
			switch {
			case isSocket(a) && c.deployment() != standalone:
				return "addrs", fmt.Errorf("address %d of %d: a %s deployment is reached over TCP: want host:port", i+1, len(c.Addrs), c.Topology)
			case isSocket(a) && c.TLS.Enabled:
				return "tls", fmt.Errorf("is for TCP: address %d of %d is a Unix socket", i+1, len(c.Addrs))
			}
		}
		return "", nil
	},
	func(c Config) (string, error) {
		t := c.TLS
		tlsNode := slices.ContainsFunc(c.endpoints(), func(e Endpoint) bool { return e.TLS != nil })
		for _, s := range []struct {
			name string
			set  bool
		}{
			{"tls_ca_file", t.CAFile != ""}, {"tls_cert_file", t.CertFile != ""}, {"tls_key_file", t.KeyFile != ""},
			{"tls_server_name", t.ServerName != ""}, {"tls_insecure_skip_verify", t.InsecureSkipVerify},
		} {
			if s.set && !tlsNode {
				return s.name, fmt.Errorf("is set but TLS is off: set tls to true too (or, with nodes, use rediss:// nodes)")
			}
		}
		switch {
		case (t.CertFile == "") != (t.KeyFile == ""):
			return "tls_cert_file", fmt.Errorf("and tls_key_file go together: set both or neither")
		case t.InsecureSkipVerify && (t.CAFile != "" || t.ServerName != ""):
			return "tls_insecure_skip_verify", fmt.Errorf("verifies nothing, so tls_ca_file and tls_server_name would be ignored: set one or the other")
		}
		return "", nil
	},
	func(c Config) (string, error) {
		if p, _ := parseRetry(c.Retry); p == nil && c.MaxAttempts != 0 {
			return "max_attempts", fmt.Errorf("caps the attempts of a retry policy, and retry is none: set retry too")
		}
		return "", nil
	},
	func(c Config) (string, error) {
		switch ttl := c.ttl(); {
		case c.ReplicaTimeout != 0 && c.Replicas == 0:
			return "replica_timeout", fmt.Errorf("is set but replicas is 0: set replicas too")
		case c.ReplicaTimeout >= ttl:
			return "replica_timeout", fmt.Errorf("must be less than ttl: %v is not less than %v", c.ReplicaTimeout, ttl)
		}
		return "", nil
	},
	func(c Config) (string, error) {
		switch {
		case c.OTelKeys != "" && !c.OTel:
			return "otel_keys", fmt.Errorf("is set but otel is off: set otel to true too")
		case c.OTel && otelOf() == nil:
			return "otel", fmt.Errorf("needs the OpenTelemetry instrumentation linked into this program: import _ %q", "github.com/locksmith-go/lock/config/otelconfig")
		}
		return "", nil
	},
	func(c Config) (string, error) {
		if lease := c.lease(); c.StopGrace >= lease/2 {
			return "stop_grace", fmt.Errorf("must be under half the lease, %v, got %v", lease/2, c.StopGrace)
		}
		return "", nil
	},
}

// ttl returns the default TTL.
func (c Config) ttl() time.Duration { return cmp.Or(c.TTL, defaultTTL) }

// lease returns the Elector's lease.
func (c Config) lease() time.Duration { return cmp.Or(c.Lease, defaultLease) }

// String returns the Config as a URL, with the password as xxxxx. It is a
// URL that ParseURL reads back, but for the password.
func (c Config) String() string { return c.url(false) }

// Format writes String for every verb, so that no verb prints the password:
// %#v would print the fields. log/slog's handlers print a Config with it,
// or with MarshalJSON.
func (c Config) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// url writes the Config as a URL, with the password if reveal is set.
func (c Config) url(reveal bool) string {
	var b strings.Builder
	b.WriteString(c.Strategy)
	socket := c.deployment() == standalone && len(c.Addrs) == 1 && isSocket(c.Addrs[0])
	switch {
	case c.deployment() != standalone:
		b.WriteString("+" + c.Topology)
	case socket:
		b.WriteString("+unix")
	}
	b.WriteString("://")
	switch {
	case c.Password != "":
		pw := redacted
		if reveal {
			pw = c.Password
		}
		b.WriteString(url.UserPassword(c.Username, pw).String() + "@")
	case c.Username != "":
		b.WriteString(url.User(c.Username).String() + "@")
	}
	sep := "?"
	param := func(name, value string) {
		if value != "" {
			b.WriteString(sep + name + "=" + queryEscape(value))
			sep = "&"
		}
	}
	switch {
	case socket:
		b.WriteString(escapeAt((&url.URL{Path: c.Addrs[0]}).EscapedPath()))
		if c.DB != 0 {
			param("db", strconv.Itoa(c.DB))
		}
	default:
		for i, a := range c.Addrs {
			if i > 0 {
				b.WriteByte(',')
			}
			if isSocket(a) {
				a = escapeAt(url.PathEscape(a))
			}
			b.WriteString(a)
		}
		if c.DB != 0 {
			fmt.Fprintf(&b, "/%d", c.DB)
		}
	}
	for _, s := range settings {
		if s.part != inQuery {
			continue
		}
		v := s.get(&c)
		if s.redact != nil && v != "" && !reveal {
			v = s.redact(v)
		}
		param(s.name, v)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Params)) {
		param(name, c.Params[name])
	}
	return b.String()
}

// escapeAt percent-encodes the '@' of an escaped socket path, which
// ParseURL would read as the end of user information.
func escapeAt(path string) string { return strings.ReplaceAll(path, "@", "%40") }

// clone returns a copy of c that shares no slice or map with it.
func (c Config) clone() Config {
	c.Addrs = slices.Clone(c.Addrs)
	c.Params = maps.Clone(c.Params)
	return c
}

// invalid names the setting that err is about.
func invalid(name string, err error) error {
	return &lock.ArgumentError{Name: name, Reason: err.Error()}
}

// unknownSetting is the error of a setting called name that there is not,
// which names the setting it is likely a misspelling of.
func unknownSetting(name string) error {
	reason := `unknown: docs/config.md's "Every setting" lists them`
	if s, ok := closest(name, knownSettings()); ok {
		reason = fmt.Sprintf("unknown: did you mean %q?", s)
	}
	return &lock.ArgumentError{Name: fmt.Sprintf("setting %q", name), Reason: reason}
}

// closest returns the name of names nearest to name, if name is near
// enough to be a misspelling of it: at most one edit (a letter added,
// left out, replaced, or two swapped) away for a name of up to four
// letters, two for a longer one. Of names as near, it prefers the one
// with the fewest letters that name lacks or has alone: "tll" is "ttl",
// not "tls".
func closest(name string, names []string) (string, bool) {
	best, dist, odd := "", 3, 0
	if len(name) <= 4 {
		dist = 2
	}
	for _, n := range names {
		d, o := edits(name, n), oddLetters(name, n)
		if d < dist || d == dist && o < odd {
			best, dist, odd = n, d, o
		}
	}
	return best, best != ""
}

// oddLetters counts the letters that are in a or in b, not both.
func oddLetters(a, b string) int {
	n := 0
	for _, r := range a + b {
		if !strings.ContainsRune(a, r) || !strings.ContainsRune(b, r) {
			n++
		}
	}
	return n
}

// edits returns the edit distance of a and b, counting a swap of two
// adjacent letters as one edit (optimal string alignment).
func edits(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// knownSettings lists the names of the settings and of the registered
// parameters.
func knownSettings() []string {
	names := paramNames()
	for _, s := range settings {
		names = append(names, s.name)
	}
	slices.Sort(names)
	return names
}

// queryEscape percent-encodes what a query value cannot hold as it is,
// leaving it readable: paths, durations and lists stay as they are.
func queryEscape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-._~:/,@!$'()*;", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
