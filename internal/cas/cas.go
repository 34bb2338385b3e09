// Package cas holds the compare-and-act scripts that strategies share: each
// acts on a key only while it holds the caller's value, atomically, and
// tells "gone" from "held by another value". GET fails with WRONGTYPE on a
// key of another type, so a misused key gives a clear error.
package cas

import (
	"context"
	"strconv"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
)

// The scripts reply with a non-negative number when the key holds our value,
// noKey when it is gone and otherOwner when another value holds it.
const (
	noKey      = -2
	otherOwner = -3
)

// ownerScript returns the script that runs body when the key holds our
// value (ARGV[1]), and replies with noKey or otherOwner otherwise.
func ownerScript(body string) *driver.Script {
	return driver.NewScript(`local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	` + body + `
elseif v then
	return ` + strconv.Itoa(otherOwner) + `
end
return ` + strconv.Itoa(noKey))
}

var (
	delScript     = ownerScript(`return redis.call('DEL', KEYS[1])`)
	pexpireScript = ownerScript(`return redis.call('PEXPIRE', KEYS[1], ARGV[2])`)
	pttlScript    = ownerScript(`return redis.call('PTTL', KEYS[1])`)
	// setScript replaces our value with ARGV[2], expiring after ARGV[3] ms
	// when that is positive, and never otherwise.
	setScript = ownerScript(`if tonumber(ARGV[3]) > 0 then
		redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	else
		redis.call('SET', KEYS[1], ARGV[2])
	end
	return 1`)
)

// Scripts returns the package's scripts, for the SCRIPT LOAD test.
func Scripts() []*driver.Script {
	return []*driver.Script{delScript, pexpireScript, pttlScript, setScript}
}

// Delete deletes key if it holds value.
func Delete(ctx context.Context, c driver.Conn, key, value string) error {
	return owned(delScript.Int(ctx, c, []string{key}, value))
}

// PExpire sets key's TTL if it holds value.
func PExpire(ctx context.Context, c driver.Conn, key, value string, ttl time.Duration) error {
	return owned(pexpireScript.Int(ctx, c, []string{key}, value, ttl.Milliseconds()))
}

// PTTL returns key's TTL if it holds value; it is negative when the key has
// no expiry.
func PTTL(ctx context.Context, c driver.Conn, key, value string) (time.Duration, error) {
	ms, err := pttlScript.Int(ctx, c, []string{key}, value)
	if err := owned(ms, err); err != nil {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Set replaces value with next if key holds value, expiring after ttl (no
// expiry when ttl is 0).
func Set(ctx context.Context, c driver.Conn, key, value, next string, ttl time.Duration) error {
	return owned(setScript.Int(ctx, c, []string{key}, value, next, ttl.Milliseconds()))
}

// owned turns a script reply into nil, ErrExpired, ErrTaken or err.
func owned(n int64, err error) error {
	switch {
	case err != nil:
		return err
	case n == noKey:
		return lock.ErrExpired
	case n == otherOwner:
		return lock.ErrTaken
	}
	return nil
}
