// Package fence makes a resource on Redis refuse the writes of a stale lock
// holder.
//
// A fencing token (lock.WithFencing, then lock.Lock.Fence) grows with every
// new holder of a lock, but it protects nothing until the resource compares
// it. [Set] and [Run] do that for data kept in Redis: each write carries the
// writer's token, and goes through only if the token is at least the one
// stored beside the data (the fence), which it then becomes. A holder that
// paused past its lease, and wakes up to write after the next holder did,
// gets an error matching [ErrStale] and writes nothing:
//
//	lk, err := locker.Obtain(ctx, "orders:42", 30*time.Second, lock.WithFencing())
//	...
//	token, _ := lk.Fence()
//	err = fence.Set(ctx, conn, "orders:42", "paid", token)
//
// The data may live on any server: on the lock's own, or on another Redis,
// over any [driver.Conn]. Where the data is on the lock's server, a write
// guarded by the lock itself (lock.Lock.Guard), which checks that the lock
// is still held, needs no token and no fence key; a fence is for the data
// elsewhere, or for writers that may not hold the lock's connection. Data
// that is not in Redis checks the token the same way: a SQL UPDATE with
// WHERE fence <= token, or an HTTP precondition (see the examples, and the
// repository's docs/safety.md, "Protecting the resource").
//
// A fence protects the data only against writers that go through it, and
// only from the new holder's first fenced write on: until then, a stale
// holder's write is accepted. Its key never expires; keep it as long as
// the data. Fences need scripts (EVALSHA, EVAL): a server that refuses them
// refuses the writes, with its own error.
package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

// ErrStale means that a write carried a fencing token lower than the fence
// stored beside the data: a newer holder of the lock has written since.
// Nothing was written. A [*StaleError] matches it.
var ErrStale = errors.New("fence: stale fencing token")

// StaleError reports a write refused because its token is lower than the
// fence. It matches [ErrStale]; get it with errors.As.
type StaleError struct {
	// Key is the key the write was for: Set's key, or Run's fenceKey.
	Key string
	// Token is the write's fencing token.
	Token int64
	// Fence is the fence stored beside the data: the largest token
	// written with so far, larger than Token.
	Fence int64
}

// Error returns "fence: <Key>: stale fencing token <Token>, below the fence
// <Fence>".
func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: %s: stale fencing token %d, below the fence %d", e.Key, e.Token, e.Fence)
}

// Is reports whether target is [ErrStale].
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// suffix ends the name of a fence key (see KeyOf). It is not ":fence", the
// suffix of the lock's own counter (single.FenceKey), so that a data key
// named as a lock never shares its counter.
const suffix = "fenced"

// KeyOf returns the key where [Set] stores key's fence, in key's Redis
// Cluster hash slot so that one script updates both: key + ":fenced" when
// key has a hash tag ({...} with something inside), "{" + key + "}:fenced"
// otherwise. A key with no hash tag that contains '}' has no such name:
// KeyOf refuses it with a *lock.ArgumentError (the type
// [strategy.ArgumentError]); give the key a hash tag.
func KeyOf(key string) (string, error) {
	if key == "" {
		return "", &strategy.ArgumentError{Name: "key", Reason: "must not be empty"}
	}
	name, ok := cas.Companion(key, suffix)
	if !ok {
		return "", &strategy.ArgumentError{Name: "key", Reason: "a fence needs a key in the key's Cluster hash slot, " +
			"and a key with '}' but no hash tag has none that can be named: give it a hash tag, such as {orders}:42"}
	}
	return name, nil
}

// setBody is the body of Set's script: it sets KEYS[1] to ARGV[1].
const setBody = `redis.call('SET', KEYS[1], ARGV[1])`

// Set sets key to value, as SET key value (with no expiry) does, if token
// is at least the fence stored at [KeyOf](key), and stores token there,
// in one script. Equal tokens are accepted: one holder may write several
// times. A lower token writes nothing, and Set returns a [*StaleError]
// that matches [ErrStale].
//
// An empty key, a token that is not positive and a nil or invalid conn
// (see [driver.Check]) are refused with a *lock.ArgumentError (the type
// [strategy.ArgumentError]) naming the argument, before anything is sent.
// Errors of Redis (such as an ACL's NOPERM) come back wrapped, with the
// server's text.
func Set(ctx context.Context, c driver.Conn, key, value string, token int64) error {
	if err := check(c, "key", key, token); err != nil {
		return err
	}
	fenceKey, err := KeyOf(key)
	if err != nil {
		return err
	}
	_, err = run(ctx, c, key, fenceKey, token, setBody, []string{key}, value)
	return err
}

// Run runs the Lua body src atomically with the fence's check: if token is
// at least the fence stored at fenceKey, it stores token there, then runs
// src and returns its reply, normalised as [driver.Script.Run] does (nil,
// int64, string, or []any of those). Otherwise it runs nothing, and returns
// a [*StaleError] (whose Key is fenceKey) that matches [ErrStale].
//
// src is the body of a Lua function whose parameters are KEYS and ARGV: it
// sees keys and args there, as a script of its own would, and neither the
// fence key nor the token. The fence key is declared to the server as a
// key of the script too, the first, so that servers that check a script's
// keys (a Cluster, Dragonfly) accept it: on a Cluster, keys must be in
// fenceKey's hash slot, and [KeyOf] names a fence key in a key's. An error
// reply of src, returned (redis.error_reply) or raised, comes back as an
// error. A src that fails leaves the fence at token, and what it wrote
// before it failed: Redis does not roll a script back.
//
// The script of each src is made once, and kept for the life of the
// process: src should be a constant, not built per call.
//
// Run refuses the arguments that [Set] refuses, an empty fenceKey or src
// among them, with a *lock.ArgumentError.
func Run(ctx context.Context, c driver.Conn, fenceKey string, token int64, src string, keys []string, args ...any) (any, error) {
	if err := check(c, "fenceKey", fenceKey, token); err != nil {
		return nil, err
	}
	if src == "" {
		return nil, &strategy.ArgumentError{Name: "src", Reason: "must not be empty"}
	}
	return run(ctx, c, fenceKey, fenceKey, token, src, keys, args...)
}

// check checks the arguments that Set and Run share: the Conn, the key
// named name, and the token.
func check(c driver.Conn, name, key string, token int64) error {
	if err := driver.Check(c); err != nil {
		return &strategy.ArgumentError{Name: "conn", Reason: err.Error()}
	}
	if key == "" {
		return &strategy.ArgumentError{Name: name, Reason: "must not be empty"}
	}
	if token <= 0 {
		return &strategy.ArgumentError{Name: "token", Reason: fmt.Sprintf("must be positive, as lock.Lock.Fence returns it, got %d", token)}
	}
	return nil
}

// wrapper is the Lua around a body: it checks the token (ARGV[1]) against
// the fence (KEYS[1]), as decimal strings so that every int64 compares
// exactly, stores it, and calls the body with the other keys and
// arguments. Its reply is {0, fence} when the token is stale, and {1,
// reply} otherwise, or the body's error reply itself.
const wrapper = `local function body(KEYS, ARGV)
%s
end
local fence = redis.call('GET', KEYS[1])
local token = ARGV[1]
if fence then
  if not string.match(fence, '^[1-9]%%d*$') or #fence > 19 then
    return redis.error_reply('ERR fence: ' .. KEYS[1] .. ' holds no fencing token')
  end
  if #token < #fence or (#token == #fence and token < fence) then
    return {0, fence}
  end
end
redis.call('SET', KEYS[1], token)
local keys, args = {}, {}
for i = 2, #KEYS do keys[i - 1] = KEYS[i] end
for i = 2, #ARGV do args[i - 1] = ARGV[i] end
local reply = body(keys, args)
if type(reply) == 'table' and reply.err then
  return reply
end
return {1, reply}
`

// scripts holds the script of each body, by its source, so that its SHA-1
// is computed once.
var scripts sync.Map // string → *driver.Script

// scriptOf returns the script of src, made once.
func scriptOf(src string) *driver.Script {
	if s, ok := scripts.Load(src); ok {
		return s.(*driver.Script)
	}
	s, _ := scripts.LoadOrStore(src, driver.NewScript(fmt.Sprintf(wrapper, src)))
	return s.(*driver.Script)
}

// run runs src behind the fence at fenceKey; name is the key that a
// StaleError and the other errors name.
func run(ctx context.Context, c driver.Conn, name, fenceKey string, token int64, src string, keys []string, args ...any) (any, error) {
	all := make([]string, 0, len(keys)+1)
	all = append(append(all, fenceKey), keys...)
	argv := make([]any, 0, len(args)+1)
	argv = append(append(argv, strconv.FormatInt(token, 10)), args...)
	reply, err := scriptOf(src).Run(ctx, c, all, argv...)
	if err != nil {
		return nil, fmt.Errorf("fence: %s: %w", name, err)
	}
	r, ok := reply.([]any)
	if !ok || len(r) == 0 {
		return nil, fmt.Errorf("fence: %s: got reply %v, want an array", name, reply)
	}
	switch r[0] {
	case int64(0):
		if len(r) == 2 {
			if s, ok := r[1].(string); ok {
				if f, err := strconv.ParseInt(s, 10, 64); err == nil {
					return nil, &StaleError{Key: name, Token: token, Fence: f}
				}
			}
		}
	case int64(1):
		if len(r) == 1 {
			return nil, nil // the body returned nil
		}
		return r[1], nil
	}
	return nil, fmt.Errorf("fence: %s: got reply %v, want 0 and the fence, or 1 and the body's", name, reply)
}
