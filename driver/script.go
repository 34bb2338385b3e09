package driver

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// Script is a Lua script whose SHA-1 is computed once, when it is created.
// Strategies run it with [Script.Run] or [Script.Int], which fall back from
// EVALSHA to EVAL, so that no driver repeats that.
type Script struct {
	src, sha1 string
}

// NewScript returns the script for src.
func NewScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, sha1: hex.EncodeToString(sum[:])}
}

// SHA1 returns the script's SHA-1 in hex, as SCRIPT LOAD reports it. Run
// needs no more; SHA1 is for calling [Conn.EvalSha] directly, as the
// driver suite (conformance.RunDriver) does to check a driver's NOSCRIPT
// error.
func (s *Script) SHA1() string { return s.sha1 }

// Run runs the script on c with EVALSHA and, if the server does not have it
// cached (NOSCRIPT), with EVAL, which also caches it. The reply is
// normalised: nil, int64, string (never []byte), or []any of those.
func (s *Script) Run(ctx context.Context, c Conn, keys []string, args ...any) (any, error) {
	reply, err := c.EvalSha(ctx, s.sha1, keys, args...)
	if err != nil && isNoScript(err) {
		reply, err = c.Eval(ctx, s.src, keys, args...)
	}
	if err != nil {
		return nil, err
	}
	return normalize(reply), nil
}

// Int runs the script like Run and returns its integer reply.
func (s *Script) Int(ctx context.Context, c Conn, keys []string, args ...any) (int64, error) {
	reply, err := s.Run(ctx, c, keys, args...)
	if err != nil {
		return 0, err
	}
	n, ok := reply.(int64)
	if !ok {
		return 0, fmt.Errorf("script %.8s: got reply %T, want an integer", s.sha1, reply)
	}
	return n, nil
}

// isNoScript reports whether err is the server's NOSCRIPT error, as
// [Conn.EvalSha] must return it.
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// normalize returns a script's reply as Run documents it: a []byte as a
// string, an int as an int64, in arrays too.
func normalize(v any) any {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case int:
		return int64(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}
