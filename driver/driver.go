// Package driver defines the interface that Redis client adapters implement.
//
// Application code only passes a driver (driver/goredis, driver/redigo or
// driver/rueidis) to a strategy's constructor. Driver authors implement
// [Conn], a small command surface (SET NX, GET, GETSET, EVALSHA and EVAL,
// PTTL, DEL), and check it with conformance.RunDriver; the repository's
// docs/extending.md guide shows how. What the adapters would otherwise
// repeat lives here, once: script hashing and the EVALSHA-then-EVAL
// fallback ([Script]), reply normalisation, [FromPTTL], [NotNil], and the
// check that strategy constructors run ([Check]). Optional capabilities,
// such as [Addresser], [Commander] and [Validator], are separate
// interfaces found by type assertion: adding one never breaks a driver.
package driver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Conn is a connection to one Redis deployment (a server, a Sentinel-managed
// master, or a Cluster). Implementations must be safe for concurrent use,
// must honour ctx's deadline and cancellation on every call, and must return
// the client's own errors unwrapped (the strategies wrap them). An error
// reply of the server must come as an error whose text is the reply's,
// starting with its code ("NOPERM this user has no permissions …"), as the
// clients return them (rueidis leaves out the generic code ERR, which its
// error type tells): that is how the lock package tells a reply that no
// retry can change from a timeout (see conformance.RunDriver).
//
// Nil replies are normalised: a missing key gives ok == false and a nil
// error, never the client's "nil" error.
type Conn interface {
	// SetNX sets key to value if key does not exist, expiring after ttl:
	// SET key value NX PX ttl, or SET key value NX (no expiry) when ttl is 0.
	// It reports whether the key was set. It never sends the SETNX command,
	// so that INFO commandstats' cmdstat_setnx counts legacy clients only.
	SetNX(ctx context.Context, key, value string, ttl time.Duration) (ok bool, err error)
	// Get returns the value of key; ok is false if key does not exist.
	Get(ctx context.Context, key string) (value string, ok bool, err error)
	// GetSet sets key to value and returns the old value; ok is false if
	// key did not exist.
	GetSet(ctx context.Context, key, value string) (old string, ok bool, err error)
	// Del deletes key and reports whether it existed.
	Del(ctx context.Context, key string) (ok bool, err error)
	// PTTL returns the remaining time to live of key; ok is false if key
	// does not exist, and ttl is negative if it has no expiry.
	PTTL(ctx context.Context, key string) (ttl time.Duration, ok bool, err error)
	// EvalSha runs EVALSHA sha1 with keys and args and returns the reply as
	// the client decoded it, with a nil reply as (nil, nil). It must return
	// the server's NOSCRIPT error as an error whose text starts with
	// "NOSCRIPT". It must not modify keys or args, which callers may share
	// between connections. Use [Script.Run] rather than calling it
	// directly.
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error)
	// Eval runs EVAL src with keys and args, replying as EvalSha does.
	Eval(ctx context.Context, src string, keys []string, args ...any) (any, error)
}

// Addresser is an optional interface of a [Conn] that knows the address of
// the server it talks to, for error messages and telemetry.
type Addresser interface {
	// Addr returns the server's host:port, several joined by commas, or
	// "" when it is not known (a Sentinel-managed master moves).
	Addr() string
}

// Commander is an optional interface of a [Conn] that sends any command.
// The strategies send through it every command that is neither a script
// nor one of Conn's own: those of the script-free mode (the conditional
// commands, and WATCH, MULTI and EXEC over a pinned Conn, see [Pinner],
// which a [Pipeliner] may send in one round trip), the wake-up message
// (PUBLISH or SPUBLISH) that follows a release without scripts, WAIT for
// the replicas' acknowledgement, and Redlock's INFO server, which reads a
// node's run id without scripts. Tools that read a server's state (INFO,
// CLIENT LIST, SCAN), such as the locksmith CLI's check-legacy, use it
// too.
type Commander interface {
	// Do sends the command args[0] (a string) with the arguments args[1:],
	// and returns the reply as the client decoded it, with a nil reply as
	// (nil, nil). Use the package's [Do], which normalises the reply.
	Do(ctx context.Context, args ...any) (any, error)
}

// Do sends a command through c and returns its reply normalised as
// [Script.Run]'s: nil, int64, string, or []any of those. It returns an error
// matching errors.ErrUnsupported when c does not implement [Commander].
func Do(ctx context.Context, c Conn, args ...any) (any, error) {
	cmd, ok := c.(Commander)
	if !ok {
		return nil, fmt.Errorf("driver: %T sends no commands of its choice: %w", c, errors.ErrUnsupported)
	}
	if len(args) == 0 {
		return nil, errors.New("driver: Do: no command")
	}
	if _, ok := args[0].(string); !ok {
		return nil, fmt.Errorf("driver: Do: got command %T, want a string", args[0])
	}
	reply, err := cmd.Do(ctx, args...)
	if err != nil {
		return nil, err
	}
	return normalize(reply), nil
}

// Addr returns c's address if it implements [Addresser], and "" otherwise.
// The strategies and config name a server with it, in errors and telemetry,
// and Redlock tells its nodes apart by it.
func Addr(c Conn) string {
	if a, ok := c.(Addresser); ok {
		return a.Addr()
	}
	return ""
}

// FromPTTL turns a PTTL reply in milliseconds (-2 for a missing key, -1 for
// a key with no expiry) into the results of [Conn.PTTL]. Every driver's
// PTTL needs this translation; it lives here once, for the drivers of this
// module and for yours.
func FromPTTL(ms int64) (ttl time.Duration, ok bool) {
	switch ms {
	case -2:
		return 0, false
	case -1:
		return -1, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// Validator is an optional interface of a [Conn] that can tell, when it is
// made, that it could not keep the contract of Conn: its client is nil, or
// is configured to ignore the context's deadline. [Check], which every
// strategy constructor calls, reports it.
type Validator interface {
	// Validate returns nil, or an error that says what is wrong with the
	// client and which option to change. Such a Conn returns that error
	// from its other methods too, without talking to Redis.
	Validate() error
}

// Check returns why c cannot be used, or nil: c is nil, a typed nil pointer
// such as (*goredis.Conn)(nil), or a [Validator] whose Validate fails (its
// error is returned as it is). Strategy constructors call it, and report
// its error as an argument error of theirs.
func Check(c Conn) error {
	if err := NotNil(c); err != nil {
		return err
	}
	if v, ok := c.(Validator); ok {
		return v.Validate()
	}
	return nil
}

// NotNil returns an error saying "must not be nil" if v is nil, or a nil
// pointer, func, map, slice or channel in an interface, such as a
// (*redis.Client)(nil). [Check] uses it on a Conn; a driver's constructor
// (this module's and yours) uses it on the client it wraps, which a
// comparison with nil misses when the client is a nil pointer in an
// interface.
func NotNil(v any) error {
	if v == nil {
		return errors.New("must not be nil")
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.UnsafePointer:
		if rv.IsNil() {
			return fmt.Errorf("must not be a nil %T", v)
		}
	}
	return nil
}
