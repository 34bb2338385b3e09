// Package single implements the single-instance lock: SET key token NX PX ttl
// to acquire, and Lua compare-and-delete, compare-and-pexpire and
// compare-and-pttl scripts to release, refresh and read the TTL, so that no
// client ever deletes or extends a lock it does not own.
//
// It is safe as long as the Redis deployment it talks to does not lose
// writes: one server, or a Cluster (each key lives on one master). A failover
// to a replica that had not received the key can let a second client in; use
// the redlock strategy when that matters.
package single

import (
	"context"
	"strconv"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
)

// The scripts reply with a non-negative number when the key holds our value,
// noKey when it is gone and otherOwner when another value holds it. GET
// fails with WRONGTYPE on a key of another type, so a misused key gives a
// clear error instead of looking held.
const (
	noKey      = -2
	otherOwner = -3
)

var (
	// acquireScript: SET NX PX; if the key exists and already holds our
	// value (a retried attempt, or a token handed over with lock.WithToken),
	// reset its TTL.
	acquireScript = driver.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

	releaseScript = ownerScript(`redis.call('DEL', KEYS[1])`)
	refreshScript = ownerScript(`redis.call('PEXPIRE', KEYS[1], ARGV[2])`)
	ttlScript     = ownerScript(`redis.call('PTTL', KEYS[1])`)
)

// ownerScript returns the script that replies with action's result when the
// key holds our value (ARGV[1]), and with noKey or otherOwner otherwise.
func ownerScript(action string) *driver.Script {
	return driver.NewScript(`local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	return ` + action + `
elseif v then
	return ` + strconv.Itoa(otherOwner) + `
end
return ` + strconv.Itoa(noKey))
}

// Scripts returns the Lua scripts the strategy runs, for tests and for
// operators who preload them with SCRIPT LOAD.
func Scripts() []*driver.Script {
	return []*driver.Script{acquireScript, releaseScript, refreshScript, ttlScript}
}

// Strategy is the single-instance [lock.Strategy] over one [driver.Conn].
// The redlock strategy runs one per node.
type Strategy struct {
	conn driver.Conn
}

var _ lock.Strategy = (*Strategy)(nil)

// NewStrategy returns the Strategy over conn. Most callers want [New].
func NewStrategy(conn driver.Conn) (*Strategy, error) {
	if err := driver.Check(conn); err != nil {
		return nil, err
	}
	return &Strategy{conn: conn}, nil
}

// New returns a [lock.Locker] that locks keys on conn.
func New(conn driver.Conn) (lock.Locker, error) {
	s, err := NewStrategy(conn)
	if err != nil {
		return nil, err
	}
	return lock.New(s), nil
}

// Conn returns the driver connection.
func (s *Strategy) Conn() driver.Conn { return s.conn }

// Acquire implements [lock.Strategy].
func (s *Strategy) Acquire(ctx context.Context, key, value string, ttl time.Duration) (lock.Grant, error) {
	n, err := acquireScript.Int(ctx, s.conn, []string{key}, value, ttl.Milliseconds())
	switch {
	case err != nil:
		return lock.Grant{}, err
	case n == 0:
		return lock.Grant{}, lock.ErrNotObtained
	}
	return lock.Grant{}, nil
}

// Refresh implements [lock.Strategy].
func (s *Strategy) Refresh(ctx context.Context, key, value string, ttl time.Duration) (lock.Grant, error) {
	n, err := refreshScript.Int(ctx, s.conn, []string{key}, value, ttl.Milliseconds())
	return lock.Grant{}, owned(n, err)
}

// Release implements [lock.Strategy].
func (s *Strategy) Release(ctx context.Context, key, value string) error {
	return owned(releaseScript.Int(ctx, s.conn, []string{key}, value))
}

// TTL implements [lock.Strategy].
func (s *Strategy) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	ms, err := ttlScript.Int(ctx, s.conn, []string{key}, value)
	if err := owned(ms, err); err != nil {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, nil
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
