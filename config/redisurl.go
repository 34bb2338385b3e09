package config

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locksmith-go/lock"
)

// The URLs of one server that go-redis reads, and redis-cli, redis-py and
// managed Redis consoles hand out: ParseURL reads them as the single
// strategy over that server.

// redisSchemes maps each scheme of go-redis's URLs of one server to the
// scheme of locksmith's URL that it stands for.
var redisSchemes = map[string]string{"redis": "single", "rediss": "single", "unix": "single+unix"}

// goRedisOptions maps the options of go-redis's URLs that name a locksmith
// setting to that setting. go-redis's other options (max_retries,
// pool_timeout, ...) name no setting, and are refused.
var goRedisOptions = map[string]string{
	"db":            "db",
	"dial_timeout":  "dial_timeout",
	"read_timeout":  "read_timeout",
	"write_timeout": "write_timeout",
	"pool_size":     "pool_size",
	"skip_verify":   "tls_insecure_skip_verify",
}

// parseRedisURL reads a URL of go-redis, whose scheme is redis, rediss or
// unix, as the single strategy's URL that it stands for:
// redis://[user:pass@]host[:port][/db] as single://[user:pass@]host[:port][/db],
// rediss:// as the same with tls=true, and unix://[user:pass@]/path?db=N
// as single+unix://[user:pass@]/path?db=N. The query takes locksmith's
// settings and the options of goRedisOptions, each once.
func parseRedisURL(scheme, rest string) (Config, error) {
	authority, path, query, err := splitURL(rest)
	if err != nil {
		return Config{}, err
	}
	seen := map[string]string{} // setting → what in the URL set it
	if scheme == "rediss" {
		seen["tls"] = "the scheme rediss://"
	}
	if path != "" && scheme != "unix" {
		seen["db"] = "the path"
	}
	kept, db, err := goRedisQuery(scheme, query, seen)
	if err != nil {
		return Config{}, err
	}
	if db != "" { // the path names none
		path = db
	}
	if scheme == "rediss" {
		kept = append(kept, "tls=true")
	}
	return parseURL(redisSchemes[scheme] + "://" + authority + "/" + path + "?" + strings.Join(kept, "&"))
}

// goRedisQuery returns the query of a go-redis URL as locksmith's URL takes
// it: each option under its setting's name, and its value in locksmith's
// form; but the db of a TCP server, which it returns to go in the path.
// seen holds the settings that the rest of the URL sets.
func goRedisQuery(scheme, query string, seen map[string]string) (kept []string, db string, err error) {
	for kv := range strings.SplitSeq(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		switch {
		case kv == "":
			continue
		case err != nil:
			kept = append(kept, kv) // parseURL names the bad escape
			continue
		}
		s, err := goRedisSetting(name)
		if err != nil {
			return nil, "", err
		}
		switch prev, ok := seen[s]; {
		case ok && prev == name:
			return nil, "", invalid(name, errors.New("is given twice"))
		case ok:
			return nil, "", invalid(name, fmt.Errorf("sets %s, which %s sets too: give it once", s, prev))
		}
		seen[s] = name
		value, err := url.QueryUnescape(v)
		switch {
		case err != nil:
			return nil, "", invalid(name, errValueEscape)
		case s == "db" && scheme != "unix":
			if _, err := parseInt(value); err != nil {
				return nil, "", invalid(name, err)
			}
			db = value
			continue
		case s == "dial_timeout" || s == "read_timeout" || s == "write_timeout":
			if value, err = goRedisTimeout(value); err != nil {
				return nil, "", invalid(name, err)
			}
		}
		kept = append(kept, s+"="+url.QueryEscape(value))
	}
	return kept, db, nil
}

// goRedisSetting returns the setting that an option of a go-redis URL's
// query sets: a setting of locksmith's, or one of goRedisOptions.
func goRedisSetting(name string) (string, error) {
	if s, ok := goRedisOptions[name]; ok {
		return s, nil
	}
	if _, ok := lookup(name); ok || isParam(name) {
		return name, nil
	}
	reason := "is not a locksmith setting: of go-redis's options, a redis://, rediss:// or unix:// URL takes db, dial_timeout, read_timeout, write_timeout, pool_size and skip_verify (tls_insecure_skip_verify)"
	if s, ok := closest(name, append(knownSettings(), slices.Sorted(maps.Keys(goRedisOptions))...)); ok {
		reason += fmt.Sprintf(": did you mean %q?", s)
	} else {
		reason += `; docs/config.md's "Every setting" lists locksmith's`
	}
	return "", &lock.ArgumentError{Name: fmt.Sprintf("option %q", name), Reason: reason}
}

// goRedisTimeout returns a timeout of a go-redis URL in locksmith's form.
// go-redis reads a plain number as seconds, and zero or less as no
// timeout, which locksmith has not.
func goRedisTimeout(v string) (string, error) {
	if n, err := strconv.Atoi(v); err == nil {
		v = strconv.Itoa(n) + "s"
	}
	if d, err := time.ParseDuration(v); err == nil && d <= 0 {
		return "", fmt.Errorf("must be more than 0, got %v: go-redis reads zero or less as no timeout, which locksmith does not offer; leave it out for the default", d)
	}
	return v, nil
}
