// Package setnxgetset implements the legacy lock of the Redis SETNX
// documentation ("Design pattern: Locking with SETNX"), wire-compatible with
// the legacy clients that still lock that way, so that a fleet can move off
// them one service at a time. New code that needs no legacy peer should use
// the single or redlock strategy. Its directory is strategy/setnx-getset:
//
//	import setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
//
//	locker, err := setnxgetset.New(goredis.New(client), setnxgetset.WithSafetyTTL(time.Minute))
//
// The lock's value is its expiry timestamp, in the fleet's [Format], and
// legacy clients judge expiry by their own wall clocks, so the algorithm
// assumes the fleet's clocks agree to within [WithClockSkew]. The value is
// no secret token: metadata, caller-chosen tokens and lock.WithFencing are
// refused with an *strategy.ArgumentError, and so is a lock of several keys
// (lock.Locker.ObtainMany). A release wakes the waiters best effort, with
// no queue. GETSET is deprecated since Redis 6.2 but still served.
//
// The repository's docs/strategies.md, section "setnx-getset: the legacy
// lock", gives the algorithm, the formats, what it adds to the legacy lock
// and what it sends without scripts; docs/migration.md shows how a fleet
// moves, and docs/design/setnx-getset.md gives each rule and its reason.
package setnxgetset

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/strategy"
)

// ErrNotTimestamp means the key holds a value that is not a timestamp of the
// configured format: a non-legacy owner holds it, and it is never stolen.
// Obtain's error matches it together with strategy.ErrNotObtained.
var ErrNotTimestamp = errors.New("setnxgetset: the key holds a value that is not a timestamp of this format, so it is left to its owner")

// legacy is the legacy [strategy.Strategy].
type legacy struct {
	conn   driver.Conn
	srv    cas.Server // conn's operations: scripts, or none if conn is marked driver.WithoutScripts
	format Format
	grace  time.Duration // the safety TTL beyond the timestamp; 0 for none
	skew   time.Duration
	now    func() time.Time
}

var (
	_ strategy.Strategy = (*legacy)(nil)
	_ strategy.Notifier = (*legacy)(nil)
)

// Option configures a Strategy.
type Option func(*legacy)

// WithFormat sets the format of the timestamps. The default is [Seconds],
// as in the Redis documentation.
func WithFormat(f Format) Option { return func(s *legacy) { s.format = f } }

// WithSafetyTTL makes every key this strategy writes expire grace after its
// timestamp (SET NX PX, and SET PX GET for a takeover), so a crashed holder
// never leaves an immortal key. grace must cover the fleet's clock skew.
// The default is no TTL, as legacy clients write.
func WithSafetyTTL(grace time.Duration) Option { return func(s *legacy) { s.grace = grace } }

// WithClockSkew sets how far apart the fleet's clocks may be. A timestamp
// counts as expired only once it is that far in the past, and the handle's
// ValidUntil ends that much before the TTL. The default is 0.
func WithClockSkew(d time.Duration) Option { return func(s *legacy) { s.skew = d } }

// WithClock sets the wall clock that timestamps are written and judged by.
// The default is time.Now; tests use it to play a skewed client.
func WithClock(now func() time.Time) Option { return func(s *legacy) { s.now = now } }

// newStrategy returns the strategy over conn, which New gives lock.New.
func newStrategy(conn driver.Conn, opts ...Option) (*legacy, error) {
	if err := cas.CheckConn("conn", conn); err != nil {
		return nil, err
	}
	s := &legacy{conn: conn, format: Seconds, now: time.Now}
	for _, opt := range opts {
		if opt == nil {
			return nil, &strategy.ArgumentError{Name: "option", Reason: "must not be nil"}
		}
		opt(s)
	}
	switch {
	case s.format == nil:
		return nil, &strategy.ArgumentError{Name: "format", Reason: "must not be nil"}
	case s.grace < 0:
		return nil, &strategy.ArgumentError{Name: "safety TTL", Reason: fmt.Sprintf("must not be negative, got %v", s.grace)}
	case s.skew < 0:
		return nil, &strategy.ArgumentError{Name: "clock skew", Reason: fmt.Sprintf("must not be negative, got %v", s.skew)}
	case s.now == nil:
		return nil, &strategy.ArgumentError{Name: "clock", Reason: "must not be nil"}
	}
	var err error
	s.srv, err = cas.NewServer("conn", conn, driver.ScriptsOff(conn))
	s.srv = s.srv.Unmarked() // a timestamp is no holder's own: see Break
	return s, err
}

// New returns a [lock.Locker] that takes legacy locks on conn.
func New(conn driver.Conn, opts ...Option) (*lock.Locker, error) {
	s, err := newStrategy(conn, opts...)
	if err != nil {
		return nil, err
	}
	return lock.New(s), nil
}

// String returns the strategy's name, "setnx-getset".
func (s *legacy) String() string { return "setnx-getset" }

// Shared implements [strategy.Sharer] to refuse semaphores and read-write
// locks with an *strategy.ArgumentError whose reason says why.
func (s *legacy) Shared(sh strategy.Sharing) (strategy.SharedStrategy, error) {
	return nil, &strategy.ArgumentError{Name: sh.Option(), Reason: "semaphores and read-write locks are not supported by setnx-getset: " +
		"its legacy format is one timestamp that legacy clients read as one holder, with no place for several; use the single strategy", Err: errors.ErrUnsupported}
}

// Addr returns the server's address, where the driver knows it.
func (s *legacy) Addr() string { return driver.Addr(s.conn) }

// Acquire implements [strategy.Strategy]. It refuses, with an
// [*strategy.ArgumentError] and before writing anything, a TTL that is not more
// than the clock skew, or too long for the format.
func (s *legacy) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	refused := strategy.Grant{Undone: true} // nothing was written
	switch {
	case r.Metadata != "":
		return refused, &strategy.ArgumentError{Name: "metadata", Reason: "not supported: the value is a bare timestamp, which legacy readers parse", Err: errors.ErrUnsupported}
	case r.CallerToken:
		return refused, &strategy.ArgumentError{Name: "token", Reason: "not supported: the value is the expiry timestamp", Err: errors.ErrUnsupported}
	case r.Fencing:
		return refused, &strategy.ArgumentError{Name: "fencing", Reason: "not supported by setnx-getset: legacy clients take the lock without a counter, " +
			"so no token could order their holders and ours; fence with the single strategy once the fleet has moved to it", Err: errors.ErrUnsupported}
	}
	if err := s.checkTTL(r.TTL); err != nil {
		return refused, err
	}
	for range 3 { // the key can vanish between SETNX and GET: start again
		now := s.now()
		value, err := s.encode(now, r.TTL)
		if err != nil {
			return refused, err
		}
		ok, err := s.conn.SetNX(ctx, r.Key, value, s.safetyTTL(value, now))
		if err != nil {
			return lostReply, err
		}
		if ok {
			return s.grant(value), nil
		}
		held, gone, err := s.current(ctx, r.Key)
		switch {
		case err != nil:
			return strategy.Grant{}, err
		case gone:
			continue
		case !s.expired(held):
			return strategy.Grant{}, strategy.ErrNotObtained
		}
		return s.takeOver(ctx, r, held)
	}
	return strategy.Grant{}, strategy.ErrNotObtained
}

// current reads the key; the error matches ErrNotObtained (and
// ErrNotTimestamp) when it holds a value of a non-legacy owner.
func (s *legacy) current(ctx context.Context, key string) (held string, gone bool, err error) {
	held, ok, err := s.conn.Get(ctx, key)
	switch {
	case err != nil:
		return "", false, err
	case !ok:
		return "", true, nil
	}
	if _, isTimestamp := s.format.Decode(held); !isTimestamp {
		return "", false, fmt.Errorf("%w: %w", strategy.ErrNotObtained, ErrNotTimestamp)
	}
	return held, false, nil
}

// takeOver replaces the expired value held, as GETSET does (see getSet).
func (s *legacy) takeOver(ctx context.Context, r strategy.Request, held string) (strategy.Grant, error) {
	now := s.now()
	value, err := s.encode(now, r.TTL)
	if err != nil {
		return strategy.Grant{Undone: true}, err
	}
	old, existed, err := s.getSet(ctx, r.Key, value, s.safetyTTL(value, now))
	if err != nil {
		return lostReply, err
	}
	if existed && old != held {
		// Another client took it over first, and our GETSET overwrote its
		// value: put that back, unless something changed it since. If the
		// winner wrote the very value we did (the same second), there is
		// nothing to put back.
		if old != value {
			_, _ = s.srv.Run(ctx, cas.Set(cas.Lock{Key: r.Key, Value: value, TTL: s.restoreTTL(old, r.TTL)}, old))
		}
		return strategy.Grant{}, strategy.ErrNotObtained
	}
	return s.grant(value), nil
}

// getSet writes value in key's place and returns the value it replaced, if
// any, with an expiry of ttl when ttl is positive (the safety TTL). With
// one, it sends SET key value PX ttl GET (Redis 6.2 and later), which
// writes both at once: a holder that dies right after it leaves no key
// without an expiry, as one between a GETSET, which strips the TTL, and a
// PEXPIRE did. Without a safety TTL, it sends GETSET, as legacy clients
// do; and so it does over a driver that sends no commands of its choice
// (driver.Commander), followed by the PEXPIRE.
func (s *legacy) getSet(ctx context.Context, key, value string, ttl time.Duration) (string, bool, error) {
	if ttl > 0 {
		reply, err := driver.Do(ctx, s.conn, "SET", key, value, "PX", max(ttl.Milliseconds(), 1), "GET")
		if !errors.Is(err, errors.ErrUnsupported) {
			old, existed := reply.(string)
			return old, existed, err
		}
	}
	old, existed, err := s.conn.GetSet(ctx, key, value)
	if err != nil || ttl <= 0 {
		return old, existed, err
	}
	if _, err := s.srv.Run(ctx, cas.PExpire(cas.Lock{Key: key, Value: value, TTL: ttl})); err != nil && !errors.Is(err, strategy.ErrNotHeld) {
		return old, existed, err
	}
	return old, existed, nil
}

// lostReply goes with the error of a write whose reply was lost: the
// timestamp it may have written is not cleaned up by value, because a
// holder that wrote in the same second (or millisecond) has the same value,
// and a compare-and-delete would delete its lock. A stray timestamp expires
// as a crashed holder's does.
var lostReply = strategy.Grant{Undone: true}

// checkTTL refuses a TTL that the clock-skew margin uses up: the lock would
// be handed back with its ValidUntil already passed.
func (s *legacy) checkTTL(ttl time.Duration) error {
	if ttl <= s.skew {
		return &strategy.ArgumentError{Name: "ttl", Reason: fmt.Sprintf("must be more than the clock skew of WithClockSkew, %v, "+
			"which ValidUntil ends before the TTL; got %v", s.skew, ttl)}
	}
	return nil
}

// encode returns the timestamp of a lock taken at now for ttl. It returns
// an *strategy.ArgumentError if the format's timestamp does not read back as
// a time at or after now+ttl: a TTL too long for the format (the built-in
// formats end at maxUnixNano), or a Format that breaks its contract.
func (s *legacy) encode(now time.Time, ttl time.Duration) (string, error) {
	value := s.format.Encode(now, ttl)
	expiry, ok := s.format.Decode(value)
	switch {
	case !ok:
		return "", &strategy.ArgumentError{Name: "ttl", Reason: fmt.Sprintf("too long for the format: the timestamp of a lock taken now for %v, "+
			"to expire at %s, does not read back (the built-in formats read no time after %s)",
			ttl, now.Add(ttl).UTC().Format(time.RFC3339), latest.Format(time.RFC3339))}
	case expiry.Before(now.Add(ttl)):
		return "", &strategy.ArgumentError{Name: "format", Reason: fmt.Sprintf("its timestamp of a lock taken now for %v reads back %v before the lock expires: "+
			"Encode must not write a time earlier than now+ttl", ttl, now.Add(ttl).Sub(expiry))}
	}
	return value, nil
}

func (s *legacy) grant(value string) strategy.Grant {
	return strategy.Grant{Value: value, Drift: s.skew}
}

// expired reports whether a timestamp of the format is skew in the past.
func (s *legacy) expired(value string) bool {
	expiry, ok := s.format.Decode(value)
	return ok && s.now().After(expiry.Add(s.skew))
}

// safetyTTL is the PX of a key holding value, written at now: grace after
// its timestamp, or 0 (no expiry) without a safety TTL.
func (s *legacy) safetyTTL(value string, now time.Time) time.Duration {
	expiry, ok := s.format.Decode(value)
	if s.grace == 0 || !ok {
		return 0
	}
	return max(expiry.Sub(now)+s.grace, time.Millisecond)
}

// restoreTTL is the PX for putting back a value our GETSET overwrote, which
// stripped its TTL: a timestamp gets its safety TTL; a value we cannot judge
// gets the TTL we asked for, plus the grace.
func (s *legacy) restoreTTL(old string, ttl time.Duration) time.Duration {
	if _, ok := s.format.Decode(old); ok {
		return s.safetyTTL(old, s.now())
	}
	return ttl + s.grace
}

// Refresh implements [strategy.Strategy]: a compare-and-set of a new timestamp.
// An expired lock cannot be refreshed, even if nobody took it over. It
// refuses the TTLs that Acquire refuses, before writing anything. When the
// reply is lost, it reports the timestamp it may have written in
// Grant.Value, with the error.
func (s *legacy) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	now := s.now()
	next, err := s.next(ttl, now)
	if err != nil {
		return strategy.Grant{}, err
	}
	if s.expired(value) {
		return strategy.Grant{}, strategy.ErrExpired
	}
	if _, err := s.srv.Run(ctx, cas.Set(cas.Lock{Key: key, Value: value, TTL: s.safetyTTL(next, now)}, next)); err != nil {
		if errors.Is(err, strategy.ErrNotHeld) {
			return strategy.Grant{}, err
		}
		return strategy.Grant{Value: next}, err
	}
	return s.grant(next), nil
}

// Release implements [strategy.Strategy]. A key that still holds our value is
// deleted even if its timestamp has passed, and then Release reports
// ErrExpired. The deletion wakes the lock's waiters (see Waiting in
// docs/design/setnx-getset.md).
func (s *legacy) Release(ctx context.Context, key, value string) error {
	expired := s.expired(value)
	if err := notify.DeleteWaking(ctx, s.srv, s.conn, key, value); err != nil {
		return err
	}
	if expired {
		return strategy.ErrExpired
	}
	return nil
}

// Listen implements [strategy.Notifier]: the waiter id hears the releases
// of key that publish (see Waiting in docs/design/setnx-getset.md). It
// returns nil when the driver cannot subscribe, or key has no channel (a
// key with '}' but no hash tag), and the waiter polls.
func (s *legacy) Listen(key, id string) strategy.Listener {
	return notify.ListenLock([]driver.Conn{s.conn}, key, id)
}

// Leave implements [strategy.Notifier]: there is no queue to leave.
func (s *legacy) Leave(context.Context, string, string) error { return nil }

// TTL implements [strategy.Strategy]: the time until the lock's timestamp, by
// this client's clock.
func (s *legacy) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	if _, err := s.srv.Run(ctx, cas.PTTL(cas.Lock{Key: key, Value: value})); err != nil {
		return 0, err
	}
	expiry, _ := s.format.Decode(value)
	if ttl := expiry.Sub(s.now()); ttl > 0 {
		return ttl, nil
	}
	return 0, strategy.ErrExpired
}
