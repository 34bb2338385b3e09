package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/locksmith-go/lock"
)

// The three text forms of a Config: the URL, the environment and JSON.

// ParseURL returns the Config of a URL of the form
//
//	strategy://[username[:password]@]host[:port][,host[:port]...][/db][?setting=value[&...]]
//
// such as redlock://h1:6379,h2:6379,h3:6379/0?driver=redigo&ttl=30s, or of
// one of go-redis's URLs of one server (redis://, rediss://, unix://), as
// the single strategy over it. The user information and the query are
// percent-encoded. The repository's docs/config.md ("The URL", "Standard
// Redis URLs") gives each part and the go-redis options it reads.
//
// It returns an *lock.ArgumentError naming the first invalid setting; its
// errors never quote the user information.
func ParseURL(rawURL string) (Config, error) {
	c, err := parseURL(rawURL)
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		return Config{}, err
	}
	return c, nil
}

func parseURL(raw string) (Config, error) {
	var c Config
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return c, invalid("url", errors.New("want strategy://host:port[,host:port...][/db][?setting=value&...]"))
	}
	if scheme == "" {
		return c, invalid("strategy", knownStrategy(""))
	}
	strategy, form := strings.ToLower(scheme), ""
	if _, ok := redisSchemes[strategy]; ok {
		return parseRedisURL(strategy, rest)
	}
	if i := strings.LastIndexByte(strategy, '+'); i >= 0 && slices.Contains([]string{sentinel, cluster, "unix"}, strategy[i+1:]) {
		strategy, form = strategy[:i], strategy[i+1:]
	}
	if err := setText(&c, "strategy", strategy); err != nil {
		return c, err
	}
	if form == sentinel || form == cluster {
		c.Topology = form
	}
	authority, path, query, err := splitURL(rest)
	if err != nil {
		return c, err
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		user, pass, _ := strings.Cut(authority[:i], ":")
		authority = authority[i+1:]
		for _, u := range []struct {
			name string
			text string
			dst  *string
		}{{"username", user, &c.Username}, {"password", pass, &c.Password}} {
			v, err := url.PathUnescape(u.text)
			if err != nil {
				return c, invalid(u.name, errors.New("has an invalid %-escape: percent-encode it"))
			}
			*u.dst = v
		}
		if err := checkPassword(c.Password); err != nil {
			return c, invalid("password", err)
		}
		if err := validText(c.Username); err != nil {
			return c, invalid("username", err)
		}
	}
	if form == "unix" { // strategy+unix://[user:pass@]/path/of/the.sock[?db=N]
		if authority != "" {
			return c, invalid("addrs", errors.New("a Unix socket's URL has its path after the user information: strategy+unix:///path/of/redis.sock"))
		}
		socket, err := url.PathUnescape("/" + path)
		if err != nil || path == "" {
			return c, invalid("addrs", errors.New("want the socket's path: strategy+unix:///path/of/redis.sock"))
		}
		authority, path = url.PathEscape(socket), ""
	}
	if authority != "" {
		addrs := strings.Split(authority, ",")
		for i, a := range addrs {
			var err error
			if addrs[i], err = url.PathUnescape(a); err != nil || strings.Contains(addrs[i], ",") {
				return c, invalid("addrs", fmt.Errorf("address %d of %d: has an invalid %%-escape", i+1, len(addrs)))
			}
		}
		if err := setText(&c, "addrs", strings.Join(addrs, ",")); err != nil {
			return c, err
		}
	}
	if path != "" {
		if err := setText(&c, "db", path); err != nil {
			return c, err
		}
	}
	seen := map[string]bool{}
	for kv := range strings.SplitSeq(query, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return c, invalid("url", errors.New("the query has a setting name with an invalid %-escape"))
		}
		switch s, ok := lookup(name); {
		case name == "topology":
			return c, invalid(name, errors.New("goes in the scheme: strategy+sentinel:// or strategy+cluster://"))
		case name == "db" && form == "unix":
		case ok && s.part != inQuery:
			return c, invalid(name, errors.New("goes in the URL itself, not its query: strategy://username:password@host:port/db"))
		}
		if seen[name] {
			return c, invalid(name, errors.New("is given twice"))
		}
		seen[name] = true
		value, err := url.QueryUnescape(v)
		if err != nil {
			return c, invalid(name, errValueEscape)
		}
		if err := setText(&c, name, value); err != nil {
			return c, err
		}
	}
	return c, nil
}

// splitURL splits what follows a URL's "://" into its authority, path (without
// its leading '/') and query. It refuses a fragment, and an '@' after the
// host, which is likely user information with an unescaped '/' or '?'.
func splitURL(rest string) (authority, path, query string, err error) {
	if strings.Contains(rest, "#") {
		return "", "", "", invalid("url", errors.New("must not have a fragment (#...)"))
	}
	rest, query, _ = strings.Cut(rest, "?")
	authority, path, _ = strings.Cut(rest, "/")
	if name, _, _ := strings.Cut(query, "="); !strings.Contains(authority, "@") && strings.Contains(path+name, "@") {
		// Say so without quoting any of it, since it may hold the password.
		return "", "", "", invalid("url", errors.New("has '@' after the host: percent-encode '/', '?' and '#' in the user information, and '@' in values"))
	}
	return authority, path, query, nil
}

var (
	errEmpty       = errors.New("is empty: give a value, or leave the setting out")
	errValueEscape = errors.New("has an invalid %-escape: percent-encode the value")
)

// setText sets the setting or registered parameter called name from its
// text form, which must not be empty.
func setText(c *Config, name, text string) error {
	s, ok := lookup(name)
	switch {
	case !ok && !isParam(name):
		return unknownSetting(name)
	case text == "":
		return invalid(name, errEmpty)
	case !ok:
		if err := validText(text); err != nil {
			return invalid(name, err)
		}
		if c.Params == nil {
			c.Params = map[string]string{}
		}
		c.Params[name] = text
		return nil
	}
	if err := s.set(c, text); err != nil {
		return invalid(name, err)
	}
	return nil
}

// FromEnv returns the Config of environment variables whose names are the
// setting names upper-cased after prefix: with prefix LOCKSMITH_, the
// variables LOCKSMITH_STRATEGY, LOCKSMITH_ADDRS (comma-separated),
// LOCKSMITH_PASSWORD, LOCKSMITH_TTL and so on, and LOCKSMITH_URL for a URL
// as ParseURL reads, whose settings the other variables override (keep the
// password out of the URL and in LOCKSMITH_PASSWORD, from a secret store).
// An empty variable is unset. Errors name the variable.
//
// A variable with the prefix whose name is a misspelling of a setting's
// (one or two letters off, such as LOCKSMITH_TLL for LOCKSMITH_TTL) is an
// error that names both. The other variables that name no setting are
// ignored, since the environment is shared: the locksmith CLI gives its
// commands LOCKSMITH_LOCK, LOCKSMITH_FENCE and others, and a program or
// its tests may have variables of their own under the prefix.
func FromEnv(prefix string) (Config, error) {
	if err := misspelt(prefix); err != nil {
		return Config{}, err
	}
	var c Config
	if raw := os.Getenv(prefix + "URL"); raw != "" {
		var err error
		if c, err = parseURL(raw); err != nil {
			return Config{}, rename(err, func(name string) string { return prefix + "URL: " + name })
		}
	}
	for _, name := range knownSettings() {
		env := prefix + strings.ToUpper(name)
		if v := os.Getenv(env); v != "" {
			if err := setText(&c, name, v); err != nil {
				return Config{}, rename(err, func(string) string { return env })
			}
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// misspelt returns the error of the first variable with prefix, by name,
// whose name is not a setting's but a misspelling of one (see closest).
func misspelt(prefix string) error {
	known := append(knownSettings(), "url")
	var names []string
	for _, kv := range os.Environ() {
		env, v, _ := strings.Cut(kv, "=")
		name, ok := strings.CutPrefix(env, prefix)
		if ok && v != "" && !(slices.Contains(known, strings.ToLower(name)) && name == strings.ToUpper(name)) {
			names = append(names, env)
		}
	}
	slices.Sort(names)
	for _, env := range names {
		if s, ok := closest(strings.ToLower(strings.TrimPrefix(env, prefix)), known); ok {
			return &lock.ArgumentError{Name: env, Reason: fmt.Sprintf("is not a setting: did you mean %s%s?", prefix, strings.ToUpper(s))}
		}
	}
	return nil
}

// rename names the source of an invalid setting: the variable it came from.
func rename(err error, source func(setting string) string) error {
	var ae *lock.ArgumentError
	if errors.As(err, &ae) {
		return &lock.ArgumentError{Name: source(ae.Name), Reason: ae.Reason}
	}
	return err
}

// MarshalJSON writes the settings that are set, by name, in the order of
// docs/config.md's settings table, then the registered parameters; the
// password as xxxxx. Durations are strings such as "30s", numbers and
// booleans are JSON's, addrs is an array.
func (c Config) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	write := func(name string, v any) error {
		sep := ","
		if b.Len() == 0 {
			sep = "{"
		}
		k, _ := json.Marshal(name)
		val, err := json.Marshal(v)
		fmt.Fprintf(&b, "%s%s:%s", sep, k, val)
		return err
	}
	for _, s := range settings {
		text := s.get(&c)
		var v any = text
		switch {
		case text == "":
			continue
		case s.redact != nil:
			text = s.redact(text)
			v = text
		}
		switch s.kind {
		case kindNumber:
			v = json.Number(text)
		case kindBool:
			v = text == "true"
		case kindList:
			v = strings.Split(text, ",")
		}
		if err := write(s.name, v); err != nil {
			return nil, invalid(s.name, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Params)) {
		_ = write(name, c.Params[name])
	}
	if b.Len() == 0 {
		return []byte("{}"), nil
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a JSON object of settings, as MarshalJSON writes, and
// checks it as Validate does. A null value is unset; an unknown or repeated
// name is an error.
func (c *Config) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	notObject := invalid("json", errors.New("want an object of settings, such as {\"strategy\": \"single\", \"addrs\": [\"host:6379\"]}"))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return notObject
	}
	var n Config
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		name, _ := tok.(string)
		var raw json.RawMessage
		if err != nil || dec.Decode(&raw) != nil {
			return notObject
		}
		if seen[name] {
			return invalid(name, errors.New("is given twice"))
		}
		seen[name] = true
		text, err := jsonText(name, raw)
		if err != nil {
			return err
		}
		if text == "" {
			continue // null
		}
		if err := setText(&n, name, text); err != nil {
			return err
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return notObject
	}
	if err := n.Validate(); err != nil {
		return err
	}
	*c = n
	return nil
}

// jsonText returns the text form of a JSON value of the setting or
// parameter called name, or "" for null.
func jsonText(name string, raw json.RawMessage) (string, error) {
	s, known := lookup(name)
	if !known && !isParam(name) {
		return "", unknownSetting(name)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&v) // raw is one valid value
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		if s.kind == kindString || !known {
			if v == "" {
				return "", invalid(name, errEmpty)
			}
			return v, nil
		}
	case json.Number:
		if s.kind == kindNumber || !known {
			return v.String(), nil
		}
	case bool:
		if s.kind == kindBool || !known {
			return fmt.Sprint(v), nil
		}
	case []any:
		if s.kind == kindList {
			items := make([]string, len(v))
			for i, a := range v {
				if items[i], _ = a.(string); items[i] == "" || strings.Contains(items[i], ",") {
					return "", invalid(name, errors.New("want "+jsonKind(s)+", one server each, without commas"))
				}
			}
			return strings.Join(items, ","), nil
		}
	}
	return "", invalid(name, errors.New("want "+jsonKind(s)))
}

func jsonKind(s setting) string {
	switch {
	case s.name == "nodes":
		return "an array of URL strings"
	case s.kind == kindList:
		return "an array of \"host:port\" strings"
	}
	return jsonKinds[s.kind]
}

var jsonKinds = map[kind]string{
	kindString: "a JSON string (a duration such as \"30s\" is a string)",
	kindNumber: "a JSON number",
	kindBool:   "true or false",
}
