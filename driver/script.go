package driver

import (
	"context"
	"crypto/fips140"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
)

// Script is a Lua script that strategies run with [Script.Run] or
// [Script.Int], which send EVALSHA and fall back to EVAL, so that no driver
// repeats that.
//
// Its SHA-1, which EVALSHA names it by, is not computed when the script is
// made, since strategies make their scripts as package variables and a
// program must start in FIPS 140 mode (GODEBUG=fips140=only), where
// crypto/sha1 panics. Outside that mode, the first Run computes it. In
// FIPS 140 mode, the first Run asks the server for it with SCRIPT LOAD;
// where the client sends no command of its choice ([Commander]) or the
// server refuses SCRIPT LOAD (an ACL without +script|load), every Run sends
// EVAL, with the script's source.
type Script struct {
	src    string
	sha1   atomic.Pointer[string] // the SHA-1 in hex, once known
	noLoad atomic.Bool            // in FIPS 140 mode, SCRIPT LOAD failed: Run sends EVAL
}

// NewScript returns the script for src. It computes nothing.
func NewScript(src string) *Script {
	return &Script{src: src}
}

// fipsMode reports whether crypto/sha1 may not be used. It is a variable
// so that the tests run the FIPS 140 path in any mode.
var fipsMode = fips140.Enabled

// SHA1 returns the script's SHA-1 in hex, as SCRIPT LOAD reports it, or ""
// in FIPS 140 mode until a Run learnt it from a server. Run needs no more;
// SHA1 is for calling [Conn.EvalSha] directly, as the driver suite
// (conformance.RunDriver) does to check a driver's NOSCRIPT error.
func (s *Script) SHA1() string {
	if sha := s.sha1.Load(); sha != nil {
		return *sha
	}
	if fipsMode() {
		return ""
	}
	sum := sha1.Sum([]byte(s.src))
	sha := hex.EncodeToString(sum[:])
	s.sha1.Store(&sha) // callers that race store the same digest
	return sha
}

// digest returns the SHA-1 that Run sends EVALSHA with, or "" when Run
// must send EVAL: computed by SHA1, or, in FIPS 140 mode, learnt from c's
// server with SCRIPT LOAD, once.
func (s *Script) digest(ctx context.Context, c Conn) string {
	if sha := s.SHA1(); sha != "" || !fipsMode() || s.noLoad.Load() {
		return sha
	}
	reply, err := Do(ctx, c, "SCRIPT", "LOAD", s.src)
	if err != nil && ctx.Err() != nil {
		return "" // no answer: EVAL is tried within what is left of ctx
	}
	sha, ok := reply.(string)
	if err != nil || !ok || len(sha) != 40 {
		s.noLoad.Store(true)
		return ""
	}
	s.sha1.Store(&sha)
	return sha
}

// Run runs the script on c with EVALSHA and, if the server does not have it
// cached (NOSCRIPT), with EVAL, which also caches it. The reply is
// normalised: nil, int64, string (never []byte), or []any of those. Over
// a Conn marked [WithoutScripts], it sends nothing and returns an error.
func (s *Script) Run(ctx context.Context, c Conn, keys []string, args ...any) (any, error) {
	if ScriptsOff(c) {
		return nil, errOff
	}
	var reply any
	err := errNoScript
	if sha := s.digest(ctx, c); sha != "" {
		reply, err = c.EvalSha(ctx, sha, keys, args...)
	}
	if err != nil && isNoScript(err) {
		reply, err = c.Eval(ctx, s.src, keys, args...)
	}
	if err != nil {
		return nil, err
	}
	return normalize(reply), nil
}

// errNoScript stands for the NOSCRIPT error of a script whose SHA-1 is not
// known, so that Run sends EVAL.
var errNoScript = fmt.Errorf("NOSCRIPT the script's SHA-1 is not known")

// Int runs the script like Run and returns its integer reply.
func (s *Script) Int(ctx context.Context, c Conn, keys []string, args ...any) (int64, error) {
	reply, err := s.Run(ctx, c, keys, args...)
	if err != nil {
		return 0, err
	}
	n, ok := reply.(int64)
	if !ok {
		return 0, fmt.Errorf("script %.8s: got reply %T, want an integer", s.SHA1(), reply)
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
