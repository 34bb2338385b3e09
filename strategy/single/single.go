// Package single implements the single-instance lock. It runs Lua scripts
// (EVALSHA, falling back to EVAL): SET key token NX PX ttl to acquire (or,
// when the key already holds our token, PEXPIRE), and compare-and-delete,
// compare-and-pexpire and compare-and-pttl to release, refresh and read the
// TTL, so that no client ever deletes or extends a lock it does not own.
//
// The lock's local validity (Lock.ValidUntil) allows for clock drift
// between the client and the server, as the Redis documentation asks: it
// ends TTL × 1% + 2ms early, so that it comes before the server's expiry
// even when the server's clock runs a little fast. A TTL that this allowance
// uses up (about 2.02ms or less) is refused with an *strategy.ArgumentError,
// before anything is written.
//
// With lock.WithFencing, the acquisition also increments, in the same
// script, a counter at [FenceKey] and returns its value as the lock's
// fencing token: larger for every new holder, across releases, expiries and
// crashed holders. The counter never expires.
//
// It is safe as long as the Redis deployment it talks to does not lose
// writes: one server, or a Cluster (each key lives on one master). A failover
// to a replica that had not received the key can let a second client in; use
// the redlock strategy when that matters.
package single

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

// Scripts returns the Lua scripts the strategy runs, for tests and for
// operators who preload them with SCRIPT LOAD.
func Scripts() []*driver.Script { return cas.Scripts() }

// Strategy is the single-instance [strategy.Strategy] over one [driver.Conn].
// The redlock strategy runs one per node.
type Strategy struct {
	conn driver.Conn
}

var _ strategy.Strategy = (*Strategy)(nil)

// NewStrategy returns the Strategy over conn. Most callers want [New].
func NewStrategy(conn driver.Conn) (*Strategy, error) {
	if err := cas.CheckConn("conn", conn); err != nil {
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

// String returns the strategy's name, "single".
func (s *Strategy) String() string { return "single" }

// Addr returns the server's address, where the driver knows it.
func (s *Strategy) Addr() string { return driver.Addr(s.conn) }

// DefaultDriftFactor is the clock-drift factor of the Redis documentation:
// the strategy's drift allowance is Drift(ttl, DefaultDriftFactor).
const DefaultDriftFactor = 0.01

// Drift returns the Redis documentation's allowance for clock drift between
// client and servers over ttl: ttl × factor + 2ms. The local validity of a
// lock ends that much before its TTL. The redlock strategy uses it too.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + 2*time.Millisecond
}

func drift(ttl time.Duration) time.Duration { return Drift(ttl, DefaultDriftFactor) }

// checkTTL refuses a TTL that the drift allowance uses up: the lock would
// be handed back with its ValidUntil already passed.
func checkTTL(ttl time.Duration) error {
	if d := drift(ttl); ttl <= d {
		return &strategy.ArgumentError{Name: "ttl", Reason: fmt.Sprintf("must be more than the allowance for clock drift, "+
			"TTL × %v%% + 2ms (%v for %v), which ValidUntil ends before the TTL: use 3ms or more", DefaultDriftFactor*100, d, ttl)}
	}
	return nil
}

// Acquire implements [strategy.Strategy]. It refuses a TTL that the drift
// allowance uses up with an [*strategy.ArgumentError].
func (s *Strategy) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	if err := checkTTL(r.TTL); err != nil {
		return strategy.Grant{Undone: true}, err
	}
	if !r.Fencing {
		return strategy.Grant{Drift: drift(r.TTL)}, cas.Acquire(ctx, s.conn, r.Key, r.Value(), r.TTL)
	}
	fenceKey, err := FenceKey(r.Key)
	if err != nil {
		return strategy.Grant{Undone: true}, err
	}
	n, err := cas.AcquireFenced(ctx, s.conn, r.Key, fenceKey, r.Value(), r.TTL)
	return strategy.Grant{Fence: n, Drift: drift(r.TTL)}, err
}

// FenceKey returns the key of the counter that issues the fencing tokens of
// key (see lock.WithFencing). It is in key's Redis Cluster hash slot, so
// that one script can update both: key + ":fence" when key has a hash tag
// ({...} with something inside), "{" + key + "}:fence" otherwise. A key
// with no hash tag that contains '}' has no such name: FenceKey refuses it
// with an *strategy.ArgumentError; give the key a hash tag.
func FenceKey(key string) (string, error) {
	switch {
	case hasHashTag(key):
		return key + ":fence", nil
	case strings.Contains(key, "}"):
		return "", &strategy.ArgumentError{Name: "key", Reason: "fencing needs a counter key in the key's Cluster hash slot, " +
			"and a key with '}' but no hash tag has none that can be named: give it a hash tag, such as {orders}:42"}
	}
	return "{" + key + "}:fence", nil
}

// hasHashTag reports whether Redis Cluster hashes only part of key: from the
// first '{' to the first '}' after it, when that part is not empty.
func hasHashTag(key string) bool {
	open := strings.IndexByte(key, '{')
	return open >= 0 && strings.IndexByte(key[open+1:], '}') > 0
}

// Refresh implements [strategy.Strategy]. It refuses a TTL that the drift
// allowance uses up, as Acquire does.
func (s *Strategy) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	if err := checkTTL(ttl); err != nil {
		return strategy.Grant{}, err
	}
	return strategy.Grant{Drift: drift(ttl)}, cas.PExpire(ctx, s.conn, key, value, ttl)
}

// Release implements [strategy.Strategy].
func (s *Strategy) Release(ctx context.Context, key, value string) error {
	return cas.Delete(ctx, s.conn, key, value)
}

// TTL implements [strategy.Strategy].
func (s *Strategy) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	return cas.PTTL(ctx, s.conn, key, value)
}
