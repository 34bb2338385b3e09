package conformance

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

// The mutants of shared locks: single, broken in how it shares them.

// sharedMutants are the mutants that break shared locks, each killing the
// properties it names.
var sharedMutants = []mutant{
	{name: "semaphore-admits-twice-the-limit", kills: []string{"SemaphoreNeverMoreThanN"},
		strategy: func(b base) strategy.Strategy { return twiceTheLimit{b} }},
	{name: "semaphore-leases-never-end", kills: []string{"SemaphoreCrashedHolderReturns"},
		strategy: sharesBroken(func(_ base, _ strategy.Sharing, v view) strategy.SharedStrategy { return endless{v} })},
	{name: "semaphore-per-limit", kills: []string{"SemaphoreLimitMismatch"},
		strategy: sharesBroken(func(_ base, sh strategy.Sharing, v view) strategy.SharedStrategy {
			return elsewhere{v, ":" + limitOf(sh)}
		})},
	{name: "permit-unreported", kills: []string{"SemaphorePermits"},
		strategy: sharesBroken(func(_ base, _ strategy.Sharing, v view) strategy.SharedStrategy { return noPermit{v} })},
	{name: "semaphore-queue-serves-newest-first", kills: []string{"SemaphoreWaitersInTurn"},
		strategy: sharesBroken(func(b base, _ strategy.Sharing, v view) strategy.SharedStrategy { return lifo{v, b.conn} })},
	{name: "readers-apart-from-writers", kills: []string{"ReadWriteExclusion"},
		strategy: sharesBroken(func(_ base, sh strategy.Sharing, v view) strategy.SharedStrategy {
			if sh.Read {
				return elsewhere{v, ":read"}
			}
			return v
		})},
	{name: "sides-jump-the-queue", kills: []string{"ReadWriteNoStarvation"},
		strategy: sharesBroken(func(b base, sh strategy.Sharing, v view) strategy.SharedStrategy { return jumps{v, b.conn, sh} })},
	{name: "downgrade-releases-then-reads", kills: []string{"ReadWriteDowngrade"},
		strategy: sharesBroken(func(b base, sh strategy.Sharing, v view) strategy.SharedStrategy {
			if !sh.Write {
				return v
			}
			read, _ := b.Shared(strategy.Sharing{Read: true})
			return reacquires{v, read}
		})},
	{name: "inspect-hides-the-holders", kills: []string{"SharedInspectAndBreak"},
		strategy: func(b base) strategy.Strategy { return hidesHolders{b} }},
	{name: "shared-release-leaves-its-hash", kills: []string{"SharedLeavesNothing"},
		strategy: sharesBroken(func(b base, _ strategy.Sharing, v view) strategy.SharedStrategy { return leavesHash{v, b.conn} })},
}

// unshared is a strategy that does not share locks, for
// TestSharedPropertiesSkip: single, hidden behind a strategy.Strategy.
var unshared = mutant{name: "unshared", kills: sharedPropertiesThatSkip(),
	strategy: func(b base) strategy.Strategy { return struct{ strategy.Strategy }{b} }}

// sharedProperties returns the names of the shared-lock properties.
func sharedProperties() []string {
	var names []string
	for _, p := range properties {
		for _, prefix := range []string{"Semaphore", "ReadWrite", "Shared"} {
			if strings.HasPrefix(p.name, prefix) {
				names = append(names, p.name)
			}
		}
	}
	return names
}

// sharedPropertiesThatSkip returns the shared-lock properties that skip for a
// Locker that does not share locks: all but SharedInvalidArguments, whose
// checks are the lock package's.
func sharedPropertiesThatSkip() []string {
	var names []string
	for _, p := range sharedProperties() {
		if p != "SharedInvalidArguments" {
			names = append(names, p)
		}
	}
	return names
}

// TestSharedPropertiesSkip: on a Locker whose strategy does not share locks,
// each shared-lock property skips, saying why, and the run passes.
func TestSharedPropertiesSkip(t *testing.T) {
	checkSkips(t, unshared, "a strategy that is no strategy.Sharer", "the Locker does not share locks")
}

// view is single's Strategy of one shape of shared locks.
type view interface {
	strategy.SharedStrategy
	strategy.Notifier
}

// sharesBroken returns the mutant whose shared locks go through broken,
// which wraps single's Strategy of each shape.
func sharesBroken(broken func(b base, sh strategy.Sharing, v view) strategy.SharedStrategy) func(base) strategy.Strategy {
	return func(b base) strategy.Strategy { return brokenShares{b, broken} }
}

type brokenShares struct {
	base
	broken func(b base, sh strategy.Sharing, v view) strategy.SharedStrategy
}

func (m brokenShares) Shared(sh strategy.Sharing) (strategy.SharedStrategy, error) {
	s, err := m.base.Shared(sh)
	if err != nil {
		return nil, err
	}
	return m.broken(m.base, sh, s.(view)), nil
}

// twiceTheLimit is the mutant semaphore-admits-twice-the-limit: its
// semaphores admit twice the holders asked for.
type twiceTheLimit struct{ base }

func (m twiceTheLimit) Shared(sh strategy.Sharing) (strategy.SharedStrategy, error) {
	sh.Permits *= 2
	return m.base.Shared(sh)
}

// endless is the mutant semaphore-leases-never-end: a lease lasts an hour,
// whatever the TTL, so a crashed holder's permit never comes back.
type endless struct{ view }

func (v endless) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	r.TTL = time.Hour
	return v.view.Acquire(ctx, r)
}

// elsewhere keeps its locks under the key with a suffix: the mutant
// semaphore-per-limit (a semaphore per limit: a caller that states
// another limit gets a second semaphore, silently) and
// readers-apart-from-writers.
type elsewhere struct {
	view
	suffix string
}

func (v elsewhere) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	r.Key += v.suffix
	return v.view.Acquire(ctx, r)
}

func (v elsewhere) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	return v.view.Refresh(ctx, key+v.suffix, value, ttl)
}

func (v elsewhere) Release(ctx context.Context, key, value string) error {
	return v.view.Release(ctx, key+v.suffix, value)
}

func (v elsewhere) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	return v.view.TTL(ctx, key+v.suffix, value)
}

func (v elsewhere) Listen(key, id string) strategy.Listener { return v.view.Listen(key+v.suffix, id) }

func (v elsewhere) Leave(ctx context.Context, key, id string) error {
	return v.view.Leave(ctx, key+v.suffix, id)
}

// noPermit is the mutant permit-unreported: Acquire does not report the
// holder's permit.
type noPermit struct{ view }

func (v noPermit) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	g, err := v.view.Acquire(ctx, r)
	g.Permit = 0
	return g, err
}

// lifo is the mutant semaphore-queue-serves-newest-first: its tickets
// count down, as newestFirst's do.
type lifo struct {
	view
	conn driver.Conn
}

func (v lifo) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	if q, ok := cas.NewQueue(r.Key, false); ok && r.Waiter != "" {
		if _, err := countdown.Run(ctx, v.conn, []string{q.W}); err != nil {
			return strategy.Grant{Undone: true}, err
		}
	}
	return v.view.Acquire(ctx, r)
}

// jumpScript takes the place ARGV[1] for ARGV[2] ms in the shared lock
// KEYS[1] (holders) and KEYS[2] (its hash) without a look at the queue: a
// reader (ARGV[3] = "r") whenever no writer holds it, as Redisson's
// RReadWriteLock does, and a writer whenever nobody does.
var jumpScript = driver.NewScript(`local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) == 0 then
	redis.call('DEL', KEYS[2])
end
if ARGV[3] == 'r' and redis.call('HEXISTS', KEYS[2], 'w') == 0 or redis.call('ZCARD', KEYS[1]) == 0 then
	redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
	redis.call('HSET', KEYS[2], 'limit', 'rw')
	if ARGV[3] == 'w' then
		redis.call('HSET', KEYS[2], 'w', ARGV[1])
	end
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	redis.call('PEXPIRE', KEYS[2], ARGV[2])
	return 1
end
return 0`)

// jumps is the mutant sides-jump-the-queue: an attempt that the queue
// holds back takes the lock all the same when no one of the other side
// holds it.
type jumps struct {
	view
	conn driver.Conn
	sh   strategy.Sharing
}

func (v jumps) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	g, err := v.view.Acquire(ctx, r)
	k, ok := cas.NewShared(r.Key, false)
	if !errors.Is(err, strategy.ErrNotObtained) || !ok {
		return g, err
	}
	n, jerr := jumpScript.Int(ctx, v.conn, []string{k.Key, k.M}, r.Value(), r.TTL.Milliseconds(), cas.Mode(v.sh))
	if jerr != nil || n == 0 {
		return g, err
	}
	return strategy.Grant{}, nil
}

// reacquires is the mutant downgrade-releases-then-reads: its Downgrade
// releases the write lock, then obtains a read lock with the same value,
// in two steps between which a waiting writer can come.
type reacquires struct {
	view
	read strategy.SharedStrategy
}

func (v reacquires) Downgrade(ctx context.Context, key, value string) error {
	ttl, err := v.TTL(ctx, key, value)
	if err != nil {
		return err
	}
	if err := v.Release(ctx, key, value); err != nil {
		return err
	}
	_, err = v.read.Acquire(ctx, strategy.Request{Key: key, TTL: ttl, Token: value, CallerToken: true})
	return err
}

// hidesHolders is the mutant inspect-hides-the-holders: Inspect reports no
// holder of a shared lock.
type hidesHolders struct{ base }

func (m hidesHolders) Inspect(ctx context.Context, key string) (strategy.State, error) {
	st, err := m.base.Inspect(ctx, key)
	st.Holders = nil
	return st, err
}

// zrem deletes ARGV[1] from the sorted set KEYS[1].
var zrem = driver.NewScript(`return redis.call('ZREM', KEYS[1], ARGV[1])`)

// leavesHash is the mutant shared-release-leaves-its-hash: its release
// takes the holder out of the holders' set and leaves the lock's hash.
type leavesHash struct {
	view
	conn driver.Conn
}

func (v leavesHash) Release(ctx context.Context, key, value string) error {
	_, err := zrem.Run(ctx, v.conn, []string{key}, value)
	return err
}

// limitOf is how a shared lock states its shape: a semaphore's permits, or
// "rw" for a read-write lock.
func limitOf(sh strategy.Sharing) string {
	if sh.Permits > 0 {
		return strconv.Itoa(sh.Permits)
	}
	return "rw"
}
