package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/drift"
)

// A setting is one field of Config, under one name in every form: the JSON
// key and the URL query parameter are the name, and the environment
// variable is the name upper-cased after a prefix. Its text form is what
// the URL and the environment carry; "" means unset, which is the zero
// value of the field and stands for the default.
type setting struct {
	name   string
	kind   kind                // how JSON writes the value
	part   urlPart             // where the URL carries it
	redact func(string) string // a secret's printed form (String, logs, JSON); nil for a setting that is no secret
	get    func(c *Config) string
	set    func(c *Config, text string) error // parses and checks text
	check  func(c *Config) error              // checks a set field of a Config built in Go
}

type kind int

const (
	kindString kind = iota
	kindNumber
	kindBool
	kindList
)

type urlPart int

const (
	inQuery urlPart = iota
	inScheme
	inUserinfo
	inHost
	inPath
)

// redacted stands for a secret wherever a Config is printed, as in net/url.
const redacted = "xxxxx"

// settings lists every setting, in the order String and MarshalJSON write
// them.
var settings = []setting{
	field("strategy", inScheme, func(c *Config) *string { return &c.Strategy }, parseText, formatText, knownStrategy),
	{name: "topology", part: inScheme,
		get: func(c *Config) string { return c.Topology },
		set: func(c *Config, s string) error {
			c.Topology = s
			if s == standalone {
				c.Topology = "" // the default, written out
			}
			return checkTopology(s)
		},
		check: func(c *Config) error { return checkTopology(c.Topology) }},
	field("username", inUserinfo, func(c *Config) *string { return &c.Username }, parseText, formatText, validText),
	secret("password", inUserinfo, func(c *Config) *string { return &c.Password }),
	{name: "addrs", kind: kindList, part: inHost,
		get: func(c *Config) string { return strings.Join(c.Addrs, ",") },
		set: func(c *Config, s string) (err error) {
			c.Addrs, err = parseAddrs(strings.Split(s, ","))
			return err
		},
		check: func(c *Config) error { _, err := parseAddrs(c.Addrs); return err }},
	field("db", inPath, func(c *Config) *int { return &c.DB }, parseInt, strconv.Itoa, atLeast(0, "")),
	field("master_name", inQuery, func(c *Config) *string { return &c.MasterName }, parseText, formatText, validText),
	field("sentinel_username", inQuery, func(c *Config) *string { return &c.SentinelUsername }, parseText, formatText, validText),
	secret("sentinel_password", inQuery, func(c *Config) *string { return &c.SentinelPassword }),
	{name: "nodes", kind: kindList, part: inQuery, redact: redactNodes,
		get: func(c *Config) string { return strings.Join(c.Nodes, ",") },
		set: func(c *Config, s string) error {
			c.Nodes = strings.Split(s, ",")
			_, err := parseNodes(c.Nodes)
			return err
		},
		check: func(c *Config) error { _, err := parseNodes(c.Nodes); return err }},
	field("driver", inQuery, func(c *Config) *string { return &c.Driver }, parseText, formatText, knownDriver),

	field("tls", inQuery, func(c *Config) *bool { return &c.TLS.Enabled }, parseBool, strconv.FormatBool, anyValue[bool]),
	field("tls_ca_file", inQuery, func(c *Config) *string { return &c.TLS.CAFile }, parseText, formatText, validText),
	field("tls_cert_file", inQuery, func(c *Config) *string { return &c.TLS.CertFile }, parseText, formatText, validText),
	field("tls_key_file", inQuery, func(c *Config) *string { return &c.TLS.KeyFile }, parseText, formatText, validText),
	field("tls_server_name", inQuery, func(c *Config) *string { return &c.TLS.ServerName }, parseText, formatText, validText),
	field("tls_insecure_skip_verify", inQuery, func(c *Config) *bool { return &c.TLS.InsecureSkipVerify }, parseBool, strconv.FormatBool, anyValue[bool]),

	duration("dial_timeout", func(c *Config) *time.Duration { return &c.DialTimeout }, 0),
	duration("read_timeout", func(c *Config) *time.Duration { return &c.ReadTimeout }, 0),
	duration("write_timeout", func(c *Config) *time.Duration { return &c.WriteTimeout }, 0),
	field("pool_size", inQuery, func(c *Config) *int { return &c.PoolSize }, parseInt, strconv.Itoa, atLeast(0, "")),

	duration("ttl", func(c *Config) *time.Duration { return &c.TTL }, time.Millisecond),
	field("retry", inQuery, func(c *Config) *string { return &c.Retry }, parseText, formatText, func(s string) error {
		_, err := parseRetry(s)
		return err
	}),
	field("max_attempts", inQuery, func(c *Config) *int { return &c.MaxAttempts }, parseInt, strconv.Itoa, atLeast(0, "")),
	field("wait", inQuery, func(c *Config) *string { return &c.Wait }, parseText, formatText, oneOf(waits)),
	field("without_scripts", inQuery, func(c *Config) *bool { return &c.WithoutScripts }, parseBool, strconv.FormatBool, anyValue[bool]),
	field("otel", inQuery, func(c *Config) *bool { return &c.OTel }, parseBool, strconv.FormatBool, anyValue[bool]),
	field("otel_keys", inQuery, func(c *Config) *string { return &c.OTelKeys }, parseText, formatText, oneOf(otelKeys)),

	field("format", inQuery, func(c *Config) *string { return &c.TimestampFormat }, parseText, formatText, oneOf(formats)),
	duration("safety_ttl", func(c *Config) *time.Duration { return &c.SafetyTTL }, 0),
	duration("clock_skew", func(c *Config) *time.Duration { return &c.ClockSkew }, 0),

	field("replicas", inQuery, func(c *Config) *int { return &c.Replicas }, parseInt, strconv.Itoa, atLeast(0, "")),
	duration("replica_timeout", func(c *Config) *time.Duration { return &c.ReplicaTimeout }, time.Millisecond),
	fenceTTL,

	field("quorum", inQuery, func(c *Config) *int { return &c.Quorum }, parseInt, strconv.Itoa, atLeast(0, "")),
	field("drift_factor", inQuery, func(c *Config) *float64 { return &c.DriftFactor }, parseFloat, formatFloat, func(f float64) error {
		if !(f > 0 && f < 1) {
			return fmt.Errorf("must be more than 0 and less than 1, got %v (unset: %v)", f, drift.DefaultFactor)
		}
		return nil
	}),
	duration("node_timeout", func(c *Config) *time.Duration { return &c.NodeTimeout }, 0),
	field("max_extensions", inQuery, func(c *Config) *int { return &c.MaxExtensions }, parseInt, strconv.Itoa, atLeast(1, "unset: no limit")),
	duration("restart_guard", func(c *Config) *time.Duration { return &c.RestartGuard }, 0),

	duration("lease", func(c *Config) *time.Duration { return &c.Lease }, 30*time.Millisecond),
	duration("stop_grace", func(c *Config) *time.Duration { return &c.StopGrace }, 0),
	duration("interval", func(c *Config) *time.Duration { return &c.Interval }, time.Millisecond),
	field("identity", inQuery, func(c *Config) *string { return &c.Identity }, parseText, formatText, checkIdentity),
}

// secret is a text setting that is never printed: String, logs and JSON
// show it as xxxxx, and errors never quote it.
func secret(name string, part urlPart, p func(*Config) *string) setting {
	return setting{name: name, part: part, redact: func(string) string { return redacted },
		get:   func(c *Config) string { return *p(c) },
		set:   func(c *Config, s string) error { *p(c) = s; return checkPassword(s) },
		check: func(c *Config) error { return checkPassword(*p(c)) }}
}

// lookup returns the setting called name.
func lookup(name string) (setting, bool) {
	i := slices.IndexFunc(settings, func(s setting) bool { return s.name == name })
	if i < 0 {
		return setting{}, false
	}
	return settings[i], true
}

// field is a setting whose text parses into a value of type T, which rule
// checks. The zero value is unset, so rule sees it only when it is written
// out ("0", "false"): a rule that refuses zero makes an explicit zero an
// error rather than a silent default.
func field[T comparable](name string, part urlPart, p func(*Config) *T,
	parse func(string) (T, error), format func(T) string, rule func(T) error) setting {
	var zero T
	k := kindString
	switch any(zero).(type) {
	case int, float64:
		k = kindNumber
	case bool:
		k = kindBool
	}
	return setting{name: name, kind: k, part: part,
		get: func(c *Config) string {
			if v := *p(c); v != zero {
				return format(v)
			}
			return ""
		},
		set: func(c *Config, s string) error {
			v, err := parse(s)
			if err != nil {
				return err
			}
			if err := rule(v); err != nil {
				return err
			}
			*p(c) = v
			return nil
		},
		check: func(c *Config) error {
			if v := *p(c); v != zero {
				return rule(v)
			}
			return nil
		},
	}
}

// fenceTTL is the setting of Config.FenceTTL, a duration whose text "0"
// is FenceForever: the zero value is unset, as for every setting, and
// stands for the default.
var fenceTTL = setting{name: "fence_ttl", part: inQuery,
	get: func(c *Config) string {
		switch c.FenceTTL {
		case 0:
			return ""
		case FenceForever:
			return "0"
		}
		return c.FenceTTL.String()
	},
	set: func(c *Config, s string) error {
		d, err := parseDuration(s)
		switch {
		case err != nil:
			return err
		case d < 0:
			return negativeFenceTTL(d)
		case d == 0:
			d = FenceForever
		}
		c.FenceTTL = d
		return nil
	},
	check: func(c *Config) error {
		if d := c.FenceTTL; d < 0 && d != FenceForever {
			return negativeFenceTTL(d)
		}
		return nil
	},
}

// negativeFenceTTL is the error of a negative fence_ttl.
func negativeFenceTTL(d time.Duration) error {
	return fmt.Errorf("must not be negative, got %v (0: never expire; unset: 100 × the TTL)", d)
}

// duration is a setting of at least min, or zero (unset).
func duration(name string, p func(*Config) *time.Duration, min time.Duration) setting {
	return field(name, inQuery, p, parseDuration, time.Duration.String, func(d time.Duration) error {
		switch {
		case d < 0:
			return fmt.Errorf("must not be negative, got %v", d)
		case d < min && d != 0:
			return fmt.Errorf("must be at least %v, got %v", min, d)
		}
		return nil
	})
}

func parseText(s string) (string, error) { return s, nil }

func parseInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("want an integer, got %q", s)
	}
	return n, nil
}
func formatText(s string) string { return s }
func anyValue[T any](T) error    { return nil }

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 30s, 500ms or 1m30s, got %q", s)
	}
	return d, nil
}

func parseBool(s string) (bool, error) {
	switch s {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("want true or false, got %q", s)
}

func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("want a number such as 0.01, got %q", s)
	}
	return f, nil
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// atLeast is the rule of an integer setting; note says what unset means
// when an explicit zero is refused.
func atLeast(min int, note string) func(int) error {
	return func(n int) error {
		if n < min {
			if note != "" {
				return fmt.Errorf("must be at least %d, got %d (%s)", min, n, note)
			}
			return fmt.Errorf("must be at least %d, got %d", min, n)
		}
		return nil
	}
}

// oneOf is the rule of a setting with named values: the keys of names.
func oneOf[V any](names map[string]V) func(string) error {
	return func(s string) error {
		if _, ok := names[s]; !ok {
			return fmt.Errorf("want one of %s, got %q", strings.Join(slices.Sorted(maps.Keys(names)), ", "), s)
		}
		return nil
	}
}

func checkPassword(s string) error {
	if s == redacted {
		return errors.New("is the placeholder " + redacted + " that printed configurations show instead of a password: give the real one")
	}
	return validText(s)
}

// checkIdentity is the rule of an Elector's identity, which the leader's
// key carries as its metadata (lock.WithMetadata).
func checkIdentity(s string) error {
	if strings.HasPrefix(s, "\x1e") {
		return errors.New("must not start with the byte 0x1e, which opens the stamp before it in the key's value")
	}
	return validText(s)
}

// validText is the rule of free text, which JSON must carry unchanged.
func validText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("must be valid UTF-8")
	}
	return nil
}

// parseAddrs checks each address and returns them as host:port, with the
// default port where one names none, or as the absolute path of a Unix
// socket. Errors never quote an address: a
// mistyped one may carry credentials.
func parseAddrs(addrs []string) ([]string, error) {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		hp, err := parseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("address %d of %d: %w", i+1, len(addrs), err)
		}
		if j := slices.Index(out[:i], hp); j >= 0 {
			return nil, fmt.Errorf("address %d of %d: lists the server of address %d again: each server must be listed once", i+1, len(addrs), j+1)
		}
		out[i] = hp
	}
	return out, nil
}

func parseAddr(a string) (string, error) {
	if isSocket(a) {
		if err := validText(a); err != nil || strings.ContainsAny(a, ",\x00") || strings.HasSuffix(a, "/") {
			return "", errors.New("want the absolute path of a Unix socket, without commas")
		}
		return a, nil
	}
	host, port := a, ""
	if rest, ok := strings.CutPrefix(a, "["); ok { // [IPv6]:port
		var after string
		host, after, ok = strings.Cut(rest, "]")
		if ip := net.ParseIP(host); !ok || ip == nil || ip.To4() != nil {
			return "", errors.New("want an IPv6 address in brackets, such as [::1]:6379")
		}
		if after != "" {
			if port, ok = strings.CutPrefix(after, ":"); !ok {
				return "", errors.New("want host:port")
			}
		}
	} else {
		host, port, _ = strings.Cut(a, ":")
		if !validHost(host) {
			return "", errors.New("want host:port, where host is a name or an IP address (IPv6 in brackets)")
		}
	}
	switch {
	case port == "" && !strings.HasSuffix(a, ":"):
		port = "6379"
	case !validPort(port):
		return "", errors.New("the port must be a number from 1 to 65535")
	}
	return net.JoinHostPort(host, port), nil
}

// isSocket reports whether an address is the path of a Unix socket.
func isSocket(addr string) bool { return strings.HasPrefix(addr, "/") }

func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, r := range h {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '-', r == '_':
		default:
			return false
		}
	}
	return true
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 || strings.TrimLeft(p, "0123456789") != "" {
		return false
	}
	n, _ := strconv.Atoi(p)
	return n >= 1 && n <= 65535
}

// parseRetry turns the retry setting into a policy: "" or none (nil: the
// Locker's default, one attempt), linear:<interval>, or
// exponential:<base>,<max>.
func parseRetry(s string) (lock.RetryPolicy, error) {
	kind, args, _ := strings.Cut(s, ":")
	bad := fmt.Errorf("want none, linear:<interval> (such as linear:100ms) or exponential:<base>,<max> (such as exponential:10ms,1s), got %q", s)
	switch kind {
	case "", "none":
		if args != "" || strings.Contains(s, ":") {
			return nil, bad
		}
		return nil, nil
	case "linear":
		d, err := time.ParseDuration(args)
		if err != nil || d <= 0 {
			return nil, bad
		}
		return lock.Linear(d), nil
	case "exponential":
		b, m, ok := strings.Cut(args, ",")
		base, err1 := time.ParseDuration(b)
		max, err2 := time.ParseDuration(m)
		if !ok || err1 != nil || err2 != nil || base <= 0 || max < base {
			return nil, fmt.Errorf("%w; exponential needs 0 < base <= max", bad)
		}
		return lock.Exponential(base, max), nil
	}
	return nil, bad
}
