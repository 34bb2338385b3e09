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
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
)

// Scripts returns the Lua scripts the strategy runs, for tests and for
// operators who preload them with SCRIPT LOAD.
func Scripts() []*driver.Script { return cas.Scripts() }

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

// String returns the strategy's name, "single".
func (s *Strategy) String() string { return "single" }

// Addr returns the server's address, where the driver knows it.
func (s *Strategy) Addr() string { return driver.Addr(s.conn) }

// Acquire implements [lock.Strategy].
func (s *Strategy) Acquire(ctx context.Context, r lock.Request) (lock.Grant, error) {
	return lock.Grant{}, cas.Acquire(ctx, s.conn, r.Key, r.Value(), r.TTL)
}

// Refresh implements [lock.Strategy].
func (s *Strategy) Refresh(ctx context.Context, key, value string, ttl time.Duration) (lock.Grant, error) {
	return lock.Grant{}, cas.PExpire(ctx, s.conn, key, value, ttl)
}

// Release implements [lock.Strategy].
func (s *Strategy) Release(ctx context.Context, key, value string) error {
	return cas.Delete(ctx, s.conn, key, value)
}

// TTL implements [lock.Strategy].
func (s *Strategy) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	return cas.PTTL(ctx, s.conn, key, value)
}
