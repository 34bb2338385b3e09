package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/strategy"
)

// The mutants of notification waiting: single, broken in how it queues and
// wakes its waiters.

// silentRelease is the mutant release-sends-no-message: its release
// deletes the key and leaves the queue alone, so the head is never woken.
type silentRelease struct{ base }

func (s silentRelease) Release(ctx context.Context, key, value string) error {
	_, err := cas.Server{Conn: s.conn}.Run(ctx, cas.Delete(cas.Lock{Key: key, Value: value}))
	return err
}

// countdown takes one from a queue's ticket counter, KEYS[1] field "#",
// twice: each waiter's ticket then comes before those before it.
var countdown = driver.NewScript(`return redis.call('HINCRBY', KEYS[1], '#', -2)`)

// newestFirst is the mutant queue-serves-newest-first: its tickets count
// down, so the queue's head is its newest waiter (LIFO).
type newestFirst struct{ base }

func (s newestFirst) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	if q, ok := cas.NewQueue(r.Key, false); ok && r.Waiter != "" {
		if _, err := countdown.Run(ctx, s.conn, []string{q.W}); err != nil {
			return strategy.Grant{Undone: true}, err
		}
	}
	return s.singleStrategy.Acquire(ctx, r)
}

// noHolderTTL is the mutant holder-ttl-unreported: a waiter queued behind
// a holder is not told the holder's TTL, so that a timer wake-up cannot be
// told from a lost message.
type noHolderTTL struct{ base }

func (s noHolderTTL) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	g, err := s.singleStrategy.Acquire(ctx, r)
	g.HolderTTL = 0
	return g, err
}

// patient is the mutant patience-ignored: its queue keeps every waiter for
// an hour, whatever its patience, so a dead waiter stalls those behind it.
type patient struct{ base }

func (s patient) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	if r.Waiter != "" {
		r.Patience = time.Hour
	}
	return s.singleStrategy.Acquire(ctx, r)
}

// stays is the mutant leave-does-nothing: a waiter that gives up stays in
// the queue until its patience ends.
type stays struct{ base }

func (stays) Leave(context.Context, string, string) error { return nil }

// polling is single over go-redis, unbroken, with Lockers that poll.
var polling = mutant{name: "polling", poll: true, kills: []string{
	"ReleaseWakesTheHead", "WaitersObtainInTurn", "LostMessageCostsOnePoll", "DeadWaiterDoesNotStall", "CancelledWaiterLeavesNothing",
}}

// TestNotificationPropertiesSkip: on Lockers that do not wake their
// waiters (here, they poll), each property of notification waiting skips,
// saying why, and the run passes.
func TestNotificationPropertiesSkip(t *testing.T) {
	checkSkips(t, polling, "Lockers that poll", "the Locker does not wake its waiters")
}
