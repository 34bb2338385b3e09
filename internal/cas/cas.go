// Package cas holds the compare-and-act scripts that strategies share: each
// acts on a key only while it holds the caller's value, atomically, and
// tells "gone" from "held by another value". GET fails with WRONGTYPE on a
// key of another type, so a misused key gives a clear error. A call whose
// pooled connection turns out dead is sent once more (see call.run).
// [Plain] runs the same operations without scripts, for servers that
// forbid them.
package cas

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/strategy"
)

// The scripts reply with a non-negative number when the key holds our value,
// noKey when it is gone and otherOwner when another value holds it.
const (
	noKey      = -2
	otherOwner = -3
)

// ownerScript returns the script that runs body when the key holds our
// value (ARGV[1]), and replies with noKey or otherOwner otherwise.
func ownerScript(body string) *driver.Script { return scriptIf(`v == ARGV[1]`, body) }

// scriptIf returns the script that runs body when ours, a Lua condition on
// the key's value v, holds, and replies with noKey or otherOwner otherwise.
func scriptIf(ours, body string) *driver.Script {
	return driver.NewScript(`local v = redis.call('GET', KEYS[1])
if ` + ours + ` then
	` + body + `
elseif v then
	return ` + strconv.Itoa(otherOwner) + `
end
return ` + strconv.Itoa(noKey))
}

// takeBody: SET NX PX; if the key exists and already holds our value (a
// retried attempt, or a lock handed over with lock.WithToken), reset its
// TTL. It leaves in ours whether the lock is ours.
const takeBody = `local ours = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if not ours and redis.call('GET', KEYS[1]) == ARGV[1] then
	ours = redis.call('PEXPIRE', KEYS[1], ARGV[2]) == 1
end
`

// acquireBody replies 1 when the lock is ours and 0 when another owner holds
// it.
const acquireBody = takeBody + `if ours then
	return 1
end
return 0`

// fenceLib is the Lua of nextFence, which increments the fencing counter
// key and returns its new value. A counter that does not exist (new, or
// lost with a restart of a server without persistence) starts from the
// server's clock in microseconds, so that tokens keep increasing across
// such restarts as long as the clock does not step back. The counter never
// expires.
const fenceLib = `local function nextFence(key)
	if redis.call('EXISTS', key) == 0 then
		local t = redis.call('TIME')
		redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])))
	end
	return redis.call('INCR', key)
end
`

// restarting is the reply of the guarded acquire on a node in quarantine.
const restarting = -4

// guard returns the Lua that starts a guarded acquire: it replies with
// refusal, a Lua expression, on a node that has not been up for quarantine
// ms, and goes on otherwise. The key named by record holds the server time,
// in ms, when a client first found the node without it, that is, since it
// last started empty. record and quarantine are Lua expressions.
func guard(record, quarantine, refusal string) string {
	return `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local since = tonumber(redis.call('GET', ` + record + `))
if not since then
	since = now
	redis.call('SET', ` + record + `, now)
end
if now - since < tonumber(` + quarantine + `) then
	return ` + refusal + `
end
`
}

var (
	acquireScript = driver.NewScript(acquireBody)

	// guardedScript runs acquireBody only on a node that has been up for
	// ARGV[3] ms (see guard), by the record in KEYS[2].
	guardedScript = driver.NewScript(guard(`KEYS[2]`, `ARGV[3]`, strconv.Itoa(restarting)) + acquireBody)

	// fencedScript is acquireBody that, when the lock is ours, increments
	// the counter KEYS[2] and replies with its new value, the fencing token
	// (see fenceLib).
	fencedScript = driver.NewScript(fenceLib + takeBody + `if not ours then
	return 0
end
return nextFence(KEYS[2])`)

	delScript     = ownerScript(`return redis.call('DEL', KEYS[1])`)
	pexpireScript = ownerScript(`return redis.call('PEXPIRE', KEYS[1], ARGV[2])`)
	pttlScript    = ownerScript(`return redis.call('PTTL', KEYS[1])`)
	// setScript replaces our value with ARGV[2], expiring after ARGV[3] ms
	// when that is positive, and never otherwise. A key that already holds
	// ARGV[2] is taken as ours: the same set was applied before and only
	// its reply was lost (a timeout, or run sending it twice), and it gets
	// the expiry again. Had another client written that very value, it took
	// over our lock, expired, with the very timestamp we were writing, in
	// the same second or millisecond: the ambiguity of legacy locks whose
	// values are timestamps, which Acquire already has (see
	// docs/design/setnx-getset.md).
	setScript = scriptIf(`v == ARGV[1] or v == ARGV[2]`, `if tonumber(ARGV[3]) > 0 then
		redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	else
		redis.call('SET', KEYS[1], ARGV[2])
	end
	return 1`)
)

// ErrRestarting is a guarded acquisition's error on a node that started
// empty too recently.
var ErrRestarting = errors.New("the node restarted empty less than the restart guard ago")

// A call is a script with its keys and arguments.
type call struct {
	script *driver.Script
	keys   []string
	args   []any
}

// run runs the call on conn. A call that fails because its connection was
// dead (neterr.Dead) is sent once more, on another connection, while ctx
// lasts: a pool can hand out a connection that the server closed while it
// sat idle, for example across a restart, and the error would then be a
// bare EOF rather than the answer of the live server.
//
// Every call is safe to send twice, even if the first one was applied and
// only its reply lost. An acquisition finds the key holding our value and
// resets its TTL; a fenced one increments the counter once more, and fencing
// tokens only need to increase. A deletion finds the key gone and reports
// ErrExpired; a PEXPIRE resets the same TTL; a PTTL only reads. A Set finds
// the key holding next, and succeeds (see setScript).
func (c call) run(ctx context.Context, conn driver.Conn) (int64, error) {
	return resend(ctx, func() (int64, error) { return c.script.Int(ctx, conn, c.keys, c.args...) })
}

// Call is a call built once, with its keys and arguments, for a strategy
// that sends it to several connections (Redlock sends one to each node;
// drivers must not modify keys and arguments, see driver.Conn.EvalSha).
// Its Run returns what the function that built it documents.
type Call struct {
	call
	reply func(int64, error) error // acquired or owned
	// op is what RunPlain runs, from the fields below.
	op op
	// An acquisition that starts with a SET builds its script's call only
	// when the SET is refused: on a free key, the SET's arguments are all
	// it allocates.
	start      Start
	key, value string
	ttl        time.Duration
	hint       hint // a delete's wake-up message, if any
}

// op is the operation a Call runs without scripts (see RunPlain).
type op uint8

const (
	opNone    op = iota // none: the guarded acquire has no form without scripts
	opAcquire           // Plain.Acquire
	opDelete            // Plain.Delete, then the hint, if any
	opPExpire           // Plain.PExpire
)

// hint is a message published after a delete without scripts
// (DeleteHintingCall): its command (PUBLISH or SPUBLISH), channel and
// payload. The zero hint publishes nothing.
type hint struct{ command, channel, payload string }

// Start says how an acquisition starts.
type Start int

// The ways an acquisition starts.
const (
	// ByScript runs the acquire script alone: a retry, which likely finds
	// the key held.
	ByScript Start = iota
	// BySet sends a bare SET key value NX PX ttl, the cheapest command for a
	// free key, and the script only when the SET is refused (the key
	// exists: held by another value, by ours, handed over or set by an
	// attempt whose reply was lost, or of another type), which tells those
	// cases apart as it does alone, so the answers, the errors (WRONGTYPE)
	// and the idempotence of a retry stay the script's.
	BySet
	// BySetOnly sends the bare SET alone, and takes a refusal for
	// ErrNotObtained: only for a value that cannot be on the server yet (a
	// fresh token) and an attempt that another follows, whose script
	// reports a key of another type. A SET whose connection was dead is
	// still followed by the script, which finds our value if it landed.
	BySetOnly
)

// StartOf returns how the attempt r starts: ByScript for a retry;
// BySetOnly for a first attempt with a fresh token that another attempt
// follows (a contended one then costs one command, not two); BySet for
// any other first attempt.
func StartOf(r strategy.Request) Start {
	switch {
	case r.Retry:
		return ByScript
	case r.Again && !r.CallerToken:
		return BySetOnly
	}
	return BySet
}

// Run sends the call on conn. An acquisition starts as its Start says. A
// SET whose connection was dead (it may have been applied) is followed by
// the script, which finds our value if it was.
func (c Call) Run(ctx context.Context, conn driver.Conn) error {
	if c.start != ByScript {
		ok, err := conn.SetNX(ctx, c.key, c.value, c.ttl)
		switch {
		case err == nil && ok:
			return nil
		case err != nil && !(neterr.Dead(err) && ctx.Err() == nil):
			return err
		case err == nil && c.start == BySetOnly:
			return strategy.ErrNotObtained
		}
		c.call = acquireScriptCall(c.key, c.value, c.ttl)
	}
	return c.reply(c.run(ctx, conn))
}

// RunPlain sends the call without scripts, over p, as the [Plain]
// operation of the same name does. A call that has no form without
// scripts (the guarded acquire) returns an error that matches
// errors.ErrUnsupported.
func (c Call) RunPlain(ctx context.Context, p *Plain) error {
	switch c.op {
	case opAcquire:
		return p.Acquire(ctx, c.key, c.value, c.ttl, c.start)
	case opPExpire:
		return p.PExpire(ctx, c.key, c.value, c.ttl)
	case opDelete:
		if err := p.Delete(ctx, c.key, c.value); err != nil || c.hint.command == "" {
			return err
		}
		_, _ = driver.Do(ctx, p.conn, c.hint.command, c.hint.channel, c.hint.payload) // best effort, as the script's
		return nil
	}
	return fmt.Errorf("lock: this call has no form without scripts: %w", errors.ErrUnsupported)
}

// resend returns send's result, sending once more when its connection was
// dead, while ctx lasts (see call.run).
func resend[T any](ctx context.Context, send func() (T, error)) (T, error) {
	r, err := send()
	if err != nil && neterr.Dead(err) && ctx.Err() == nil {
		r, err = send()
	}
	return r, err
}

// Acquire sets key to value for ttl if it is free (or already holds value),
// starting as start says. It returns strategy.ErrNotObtained when another
// value holds it.
func Acquire(ctx context.Context, c driver.Conn, key, value string, ttl time.Duration, start Start) error {
	return AcquireCall(key, value, ttl, start).Run(ctx, c)
}

// AcquireCall is [Acquire], built once.
func AcquireCall(key, value string, ttl time.Duration, start Start) Call {
	c := Call{reply: acquired, op: opAcquire, start: start, key: key, value: value, ttl: ttl}
	if start == ByScript {
		c.call = acquireScriptCall(key, value, ttl)
	}
	return c
}

// acquireScriptCall is the acquire script's call.
func acquireScriptCall(key, value string, ttl time.Duration) call {
	return call{acquireScript, []string{key}, []any{value, ttl.Milliseconds()}}
}

// AcquireGuardedCall is an Acquire call for a node that has been up, by
// guardKey's record, for at least quarantine; on a younger node it returns
// ErrRestarting.
func AcquireGuardedCall(key, guardKey, value string, ttl, quarantine time.Duration) Call {
	return Call{call: call{guardedScript, []string{key, guardKey}, []any{value, ttl.Milliseconds(), quarantine.Milliseconds()}}, reply: acquired}
}

// AcquireFenced is Acquire that also increments the counter at fenceKey, in
// the same script, and returns its new value: the fencing token. On a
// Cluster, fenceKey must be in key's hash slot.
func AcquireFenced(ctx context.Context, c driver.Conn, key, fenceKey, value string, ttl time.Duration) (int64, error) {
	n, err := call{fencedScript, []string{key, fenceKey}, []any{value, ttl.Milliseconds()}}.run(ctx, c)
	if err := acquired(n, err); err != nil {
		return 0, err
	}
	return n, nil
}

// acquired turns an acquire script's reply into nil, ErrRestarting,
// ErrNotObtained or err.
func acquired(n int64, err error) error {
	switch {
	case err != nil:
		return err
	case n == restarting:
		return ErrRestarting
	case n == 0:
		return strategy.ErrNotObtained
	}
	return nil
}

// Delete deletes key if it holds value.
func Delete(ctx context.Context, c driver.Conn, key, value string) error {
	return DeleteCall(key, value).Run(ctx, c)
}

// DeleteCall is [Delete], built once.
func DeleteCall(key, value string) Call {
	return Call{call: call{delScript, []string{key}, []any{value}}, reply: owned, op: opDelete, key: key, value: value}
}

// PExpire sets key's TTL if it holds value.
func PExpire(ctx context.Context, c driver.Conn, key, value string, ttl time.Duration) error {
	return PExpireCall(key, value, ttl).Run(ctx, c)
}

// PExpireCall is [PExpire], built once.
func PExpireCall(key, value string, ttl time.Duration) Call {
	return Call{call: call{pexpireScript, []string{key}, []any{value, ttl.Milliseconds()}}, reply: owned, op: opPExpire, key: key, value: value, ttl: ttl}
}

// PTTL returns key's TTL if it holds value; it is negative when the key has
// no expiry.
func PTTL(ctx context.Context, c driver.Conn, key, value string) (time.Duration, error) {
	ms, err := call{pttlScript, []string{key}, []any{value}}.run(ctx, c)
	if err := owned(ms, err); err != nil {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Set replaces value with next if key holds value, expiring after ttl (no
// expiry when ttl is 0).
func Set(ctx context.Context, c driver.Conn, key, value, next string, ttl time.Duration) error {
	return owned(call{setScript, []string{key}, []any{value, next, ttl.Milliseconds()}}.run(ctx, c))
}

// owned turns a script reply into nil, ErrExpired, ErrTaken or err.
func owned(n int64, err error) error {
	switch {
	case err != nil:
		return err
	case n == noKey:
		return strategy.ErrExpired
	case n == otherOwner:
		return strategy.ErrTaken
	}
	return nil
}

// CheckConn returns driver.Check's complaint about c, the argument name, as
// an *strategy.ArgumentError: the driver's own, which names its client and
// the option to change, or one named name.
func CheckConn(name string, c driver.Conn) error {
	err := driver.Check(c)
	var ae *strategy.ArgumentError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	}
	return &strategy.ArgumentError{Name: name, Reason: err.Error()}
}
