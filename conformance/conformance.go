// Package conformance is the test suite that every [lock.Locker] (each
// strategy over each driver) must pass, and that a third party can run
// against its own strategy or driver: [Run] checks a Locker through the
// [Harness] that builds it, [RunDriver] checks a [driver.Conn], and
// [RunElector] checks leader elections (package elect) over a Locker:
//
//	func TestConformance(t *testing.T) {
//		addr := startRedis(t) // your own server, started for the test
//		conn := func(t *testing.T) driver.Conn { return myredis.New(newClient(t, addr)) }
//		conformance.RunDriver(t, conn)
//		conformance.Run(t, conformance.Harness{
//			NewLocker: func(t *testing.T) *lock.Locker {
//				l, err := mystrategy.New(conn(t))
//				if err != nil {
//					t.Fatal(err)
//				}
//				return l
//			},
//			Conns: func(t *testing.T) []driver.Conn { return []driver.Conn{conn(t)} },
//		})
//	}
//
// Each property is a subtest named after it; Run's doc lists them. A
// property whose optional Harness field is not set fails unless
// Harness.Skip names it, so that none drops out of a run unnoticed, even
// in a go test ./... that hides skips. Concurrency bugs are probabilistic:
// the suite has no false positives but can have false negatives, so run it
// under the race detector, and more than once. docs/extending.md has a
// complete run. The package imports only the standard library and this
// module, so it brings its users no test dependencies.
package conformance

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
)

// Harness builds the Locker under test. NewLocker is required. Conns,
// NewUnreachable and NewWithNilConn enable the properties that need them: a
// property whose field is not set fails, naming the field, unless Skip names
// it, so that no property drops out of a run unnoticed.
type Harness struct {
	// NewLocker returns a Locker under test. Lockers returned during one
	// subtest must contend on the same keyspace (the same server, cluster or
	// set of nodes), as separate clients would. Close what it opens with
	// t.Cleanup.
	NewLocker func(t *testing.T) *lock.Locker

	// Conns returns a connection to every server behind the Locker (one
	// for a single server or cluster, one per node for a multi-node
	// strategy), for planting and inspecting keys.
	Conns func(t *testing.T) []driver.Conn

	// NewUnreachable returns a Locker whose Redis is unreachable, such as a
	// client of a closed loopback port.
	NewUnreachable func(t *testing.T) *lock.Locker

	// NewWithNilConn builds the Locker over a nil driver and returns what
	// the constructor returned.
	NewWithNilConn func() (*lock.Locker, error)

	// ShortTTL is the TTL of locks that the suite lets expire. It must be
	// long enough for one attempt to complete on a loaded machine. The
	// default is 300ms.
	ShortTTL time.Duration

	// ExtraTTL is how much longer than asked a lock may live, as TTL
	// reports it: a strategy that stores expiry timestamps rounds the TTL up
	// to its unit and may add one (the legacy seconds format: up to 2s).
	// ValidUntil never exceeds the TTL asked for. The default is 0.
	ExtraTTL time.Duration

	// Goroutines and Acquisitions size the MutualExclusion run. The
	// defaults are 8 goroutines and 2000 acquisitions in all. A run that
	// has not made its acquisitions within a minute, as on a busy machine,
	// stops there and logs how many it made: it checks exclusion, not
	// speed. It fails if it made fewer than one per goroutine.
	Goroutines, Acquisitions int

	// Skip names the properties the implementation cannot meet, or the
	// harness cannot check, each with the reason, which the subtest reports
	// when it skips and Run lists at the end. Use it for a documented limit
	// of the algorithm, or for a capability the harness cannot provide. A
	// key is a property's name, which is its subtest's name: [Run] lists
	// them, and fails on a key that names none.
	Skip map[string]string
}

// subtestTimeout bounds every call a subtest makes, so that a hang fails
// the subtest instead of the whole test binary.
const subtestTimeout = 2 * time.Minute

// suite is the Locker suite over one Harness, whose defaults are set.
type suite struct {
	h Harness
}

// property is one check of the Locker suite, with the optional Harness
// field it needs, if any.
type property struct {
	name  string
	needs string // "Conns", "NewUnreachable" or "NewWithNilConn"
	f     func(suite, *testing.T, context.Context)
}

// properties are the Locker suite's checks, in the order Run runs them.
// Run's doc says what each checks; the comment of a property's function,
// if any, adds only how, or why.
var properties = []property{
	{"ExactlyOneWinner", "", suite.exactlyOneWinner},
	{"MutualExclusion", "", suite.mutualExclusion},
	{"ExpiryFreesTheLock", "", suite.expiryFreesTheLock},
	{"NotHeldAfterExpiry", "", suite.notHeldAfterExpiry},
	{"NonOwnerCannotTouch", "", suite.nonOwnerCannotTouch},
	{"ExpiredAndTakenDiffer", "", suite.expiredAndTakenDiffer},
	{"ReleaseFreesTheLock", "", suite.releaseFreesTheLock},
	{"RefreshExtends", "", suite.refreshExtends},
	{"TTLReportsRemaining", "", suite.ttlReportsRemaining},
	{"ContextEndsTheWait", "", suite.contextEndsTheWait},
	{"RetryPolicies", "", suite.retryPolicies},
	{"TokensAreUnique", "", suite.tokensAreUnique},
	{"MetadataRoundTrips", "Conns", suite.metadataRoundTrips},
	{"CallerChosenToken", "", suite.callerChosenToken},
	{"TokenStaysSecret", "", suite.tokenStaysSecret},
	{"InvalidArguments", "", suite.invalidArguments},
	{"NilContext", "", suite.nilContext},
	{"NilDriver", "NewWithNilConn", suite.nilDriver},
	{"KeyOfAnotherType", "Conns", suite.keyOfAnotherType},
	{"UnreachableRedisIsError", "NewUnreachable", suite.unreachable},
	{"SurvivesHookPanics", "", suite.survivesHookPanics},
	{"AutoRefresh", "", suite.autoRefresh},
	{"LossCancelsTheHolder", "Conns", suite.lossCancelsTheHolder},
	{"DoHoldsAndReleases", "Conns", suite.doHoldsAndReleases},
	{"ManyHeldLocksStayHeld", "", suite.manyHeldLocksStayHeld},
	{"BatchReportsEachLoss", "Conns", suite.batchReportsEachLoss},
	{"BatchReleaseLeavesNothing", "Conns", suite.batchReleaseLeavesNothing},
	{"BatchMutualExclusion", "", suite.batchMutualExclusion},
	{"FencingTokens", "", suite.fencingTokens},
	{"FencesSurviveCounterLoss", "Conns", suite.fencesSurviveCounterLoss},
	{"InspectReadsTheLock", "", suite.inspectReadsTheLock},
	{"BreakIsGuarded", "", suite.breakIsGuarded},
	{"WaiterNamesTheHolder", "", suite.waiterNamesTheHolder},
	{"ReleaseWakesTheHead", "", suite.releaseWakesTheHead},
	{"WaitersObtainInTurn", "", suite.waitersObtainInTurn},
	{"LostMessageCostsOnePoll", "Conns", suite.lostMessageCostsOnePoll},
	{"DeadWaiterDoesNotStall", "", suite.deadWaiterDoesNotStall},
	{"CancelledWaiterLeavesNothing", "Conns", suite.cancelledWaiterLeavesNothing},
	{"MultiKeyExclusion", "", suite.multiKeyExclusion},
	{"MultiKeyOppositeOrders", "", suite.multiKeyOppositeOrders},
	{"MultiKeyAllOrNothing", "Conns", suite.multiKeyAllOrNothing},
	{"MultiKeyLeavesNothing", "Conns", suite.multiKeyLeavesNothing},
	{"MultiKeyRefreshAllOrNothing", "Conns", suite.multiKeyRefreshAllOrNothing},
	{"MultiKeyReleaseReportsEachKey", "Conns", suite.multiKeyReleaseReportsEachKey},
	{"MultiKeyLossEndsTheLock", "Conns", suite.multiKeyLossEndsTheLock},
	{"MultiKeyInvalidArguments", "", suite.multiKeyInvalidArguments},
	{"SemaphoreNeverMoreThanN", "", suite.semaphoreNeverMoreThanN},
	{"SemaphoreCrashedHolderReturns", "", suite.semaphoreCrashedHolderReturns},
	{"SemaphoreLimitMismatch", "", suite.semaphoreLimitMismatch},
	{"SemaphorePermits", "", suite.semaphorePermits},
	{"SemaphoreWaitersInTurn", "", suite.semaphoreWaitersInTurn},
	{"ReadWriteExclusion", "", suite.readWriteExclusion},
	{"ReadWriteNoStarvation", "", suite.readWriteNoStarvation},
	{"ReadWriteDowngrade", "", suite.readWriteDowngrade},
	{"SharedInspectAndBreak", "", suite.sharedInspectAndBreak},
	{"SharedLeavesNothing", "Conns", suite.sharedLeavesNothing},
	{"SharedInvalidArguments", "", suite.sharedInvalidArguments},
	{"GuardedWriteNeedsTheLock", "Conns", suite.guardedWriteNeedsTheLock},
	{"GuardedCommandsNeedTheLock", "Conns", suite.guardedCommandsNeedTheLock},
	{"GuardedWriteRacesAnAcquire", "Conns", suite.guardedWriteRacesAnAcquire},
	{"GuardedWriteChecksEveryKey", "Conns", suite.guardedWriteChecksEveryKey},
	{"GuardedWriteInvalidArguments", "", suite.guardedWriteInvalidArguments},
}

// has reports whether the harness sets the named optional field.
func (h Harness) has(field string) bool {
	set := map[string]bool{"": true, "Conns": h.Conns != nil, "NewUnreachable": h.NewUnreachable != nil, "NewWithNilConn": h.NewWithNilConn != nil}
	return set[field]
}

// Run runs the Locker suite as subtests of t, one per property, named
// after it. These are the properties, in the order Run runs them, with the
// Harness field that a property needs, if any:
//
//   - ExactlyOneWinner: of many obtainers started at once, exactly one wins.
//   - MutualExclusion: under sustained contention, no two holders are ever
//     inside at once (a [Detector] watches), and every Release succeeds.
//   - ExpiryFreesTheLock: an unreleased lock expires; only then does
//     another owner obtain it.
//   - NotHeldAfterExpiry: an expired lock's Refresh and Release report
//     ErrNotHeld, and do not bring the key back.
//   - NonOwnerCannotTouch: a stale holder's Release, Refresh and TTL report
//     ErrNotHeld, and leave the new owner's lock as it was.
//   - ExpiredAndTakenDiffer: ErrExpired when nobody holds the key, ErrTaken
//     when another owner does.
//   - ReleaseFreesTheLock: after Release another owner obtains at once, and
//     a second Release reports ErrNotHeld.
//   - RefreshExtends: Refresh moves both the server's expiry and ValidUntil.
//   - TTLReportsRemaining: TTL is positive and at most the TTL obtained
//     (plus Harness.ExtraTTL).
//   - ContextEndsTheWait: a deadline or a cancellation ends the wait with
//     the context's error and cause, and ErrNotObtained exactly when an
//     attempt found the lock held (else ErrNoAnswer); a context cancelled
//     already gives its error alone; no key is left behind.
//   - RetryPolicies: NoRetry and LimitAttempts give up after their count;
//     Linear and Exponential wait until the holder releases.
//   - TokensAreUnique: every Obtain gets a fresh token of at least 128 bits.
//   - MetadataRoundTrips (Conns): the handle returns the metadata given to
//     Obtain, and the servers store it after the token.
//   - CallerChosenToken: a token given with WithToken is the lock's, and
//     obtaining again with it hands the lock over.
//   - TokenStaysSecret: formatting a lock or an error never shows a token.
//   - InvalidArguments: each bad argument to Obtain is an *ArgumentError
//     that names it.
//   - NilContext: Obtain, Inspect, Break, Do and the lock's TTL, Refresh,
//     StartRefresh and Release refuse a nil ctx (an *ArgumentError named
//     "ctx"), from a fresh Locker's first call on, and leave it working.
//   - NilDriver (NewWithNilConn): the constructor refuses a nil driver with
//     an *ArgumentError.
//   - KeyOfAnotherType (Conns): a key that holds a hash gives a WRONGTYPE
//     error, and is left alone.
//   - UnreachableRedisIsError (NewUnreachable): a Locker whose Redis is down
//     returns an error, not a hang.
//   - SurvivesHookPanics: after a hook's panic, recovered by the caller (an
//     Obtain, Attempt, Node or Wait hook of Obtain; Inspect's Op hook;
//     Release's Op or Ended hook), the Locker obtains the key again within
//     a deadline: the panic left no mutex held, no place in a queue, and
//     nothing it wrote; Done is closed after an Ended hook's panic. A hook
//     that never runs (Node of one node, Wait when polling) skips.
//   - AutoRefresh: a lock refreshed in the background outlives its TTL, and
//     StopRefresh stops the refreshes.
//   - LossCancelsTheHolder (Conns): deleting or overwriting the key behind
//     the holder's back cancels its context, with the cause.
//   - DoHoldsAndReleases (Conns): Do holds the lock while fn runs, releases
//     it after, returns fn's error as it is, and reports a loss.
//   - ManyHeldLocksStayHeld: many locks held through one Locker, refreshed
//     in the background (together, by a strategy that batches refreshes),
//     outlive their TTL, each through its own hooks.
//   - BatchReportsEachLoss (Conns): among them, the one whose key is
//     deleted or overwritten is found lost, with the cause; the others
//     stay held.
//   - BatchReleaseLeavesNothing (Conns): released at random moments while
//     refreshed, they leave no key behind.
//   - BatchMutualExclusion: locks taken in turn and held across refreshes,
//     among many others refreshed by the same Locker, never overlap.
//   - FencingTokens: WithFencing is refused with an *ArgumentError, or gives
//     tokens that increase from holder to holder.
//   - FencesSurviveCounterLoss (Conns): a token after the lock's
//     companion keys (its fencing counter among them) were deleted, or
//     expired, is more than the last one; WithFencing may be refused, as
//     for FencingTokens.
//   - InspectReadsTheLock: Inspect, by another client, finds the key free,
//     then held by the holder (its token's fingerprint, and its metadata
//     unless Harness.Skip names MetadataRoundTrips, and then also how long
//     it has held the lock) for at most the TTL, and free after Release.
//   - BreakIsGuarded: Break deletes the lock only when the fingerprint
//     names its holder (any holder when it is empty), and reports ErrTaken
//     for another's, leaving the lock, and ErrExpired for a free one. The
//     broken holder's Refresh, Release, TTL and auto-refresh report
//     ErrBroken (ErrExpired, where values are not unique to a holder:
//     Harness.Skip has TokensAreUnique); a holder whose key was deleted
//     otherwise, ErrExpired and not ErrBroken. A strategy that cannot
//     break locks (errors.ErrUnsupported) skips.
//   - WaiterNamesTheHolder: an Obtain refused by a held lock fails with a
//     *lock.NotObtainedError that names the key and the holder, as
//     Inspect reads it (its fingerprint; unless Harness.Skip names
//     MetadataRoundTrips, its metadata, how long it has held the lock, and
//     the trace context its Locker's hooks stored), in its message too.
//
// The notification properties apply to a Locker whose strategy wakes its
// waiters (a strategy.Notifier whose Listen returns a Listener, and
// Lockers that do not poll), and skip, saying why, for others;
// WaitersObtainInTurn and DeadWaiterDoesNotStall also skip for a strategy
// that does not queue its waiters (Grant.Position), such as Redlock. They
// count attempts and wake-ups, never time, with timers and TTLs of a
// minute, so that only a message explains a prompt wake-up.
//
//   - ReleaseWakesTheHead: a waiter queued behind a holder, once listening,
//     is woken by the release with a message, and its next attempt
//     obtains the lock.
//   - WaitersObtainInTurn: waiters that queue one after the other obtain
//     the lock in that order.
//   - LostMessageCostsOnePoll (Conns): a release whose message is lost (the
//     key deleted behind the holder's back) costs the waiter one timer: it
//     obtains on its next wake-up, by its timer; a strategy that queues
//     also reports the lost message (the Wait event "missed").
//   - DeadWaiterDoesNotStall: a waiter that queues and never comes back
//     does not stall the one behind it, which obtains within a number of
//     attempts set by the dead one's patience.
//   - CancelledWaiterLeavesNothing (Conns): a waiter that gives up (at its
//     deadline, or cancelled) leaves the queue, and no key named after the
//     lock remains once it is released.
//
// The multi-key properties apply to a Locker whose strategy locks several
// keys as one ([lock.Locker.ObtainMany] through a strategy.Multi), and
// skip, saying why, when an ObtainMany of two keys is an *ArgumentError
// named "keys" matching errors.ErrUnsupported (setnx-getset); any other
// answer fails them. Their keys share a hash tag, so one Cluster slot.
//
//   - MultiKeyExclusion: an ObtainMany of {A, B, C} while another Locker
//     holds one of them is not obtained, and leaves the holder's key;
//     goroutines taking {A, B}, {B, C}, {C, A} and each key alone never
//     hold a key together (a [Detector] per key watches).
//   - MultiKeyOppositeOrders: two callers that name the same keys in
//     opposite orders both obtain them, each one's first attempt held back
//     until the other's has returned.
//   - MultiKeyAllOrNothing (Conns): with one key held by another lock,
//     ObtainMany fails with ErrNotObtained and a *KeyError naming that key,
//     and leaves the other keys free.
//   - MultiKeyLeavesNothing (Conns): Release leaves no key of the set.
//   - MultiKeyRefreshAllOrNothing (Conns): with one key deleted or taken,
//     Refresh reports it (ErrExpired or ErrTaken, in a *KeyError naming it)
//     and extends none of the others.
//   - MultiKeyReleaseReportsEachKey (Conns): with one key deleted or taken,
//     Release deletes the others and reports that one, leaving a taken
//     key to its new owner.
//   - MultiKeyLossEndsTheLock (Conns): deleting or overwriting one key of
//     an auto-refreshed lock cancels its holder's context, and Err names
//     the key.
//   - MultiKeyInvalidArguments: an empty list, an empty key and more than
//     lock.MaxKeys keys are each an *ArgumentError named "keys", and
//     nothing is sent.
//
// The shared-lock properties apply to a Locker whose strategy shares locks
// (lock.WithPermits, WithRead and WithWrite, through a strategy.Sharer),
// and skip, saying why, when an Obtain WithPermits is an *ArgumentError
// named "permits" matching errors.ErrUnsupported (Redlock, setnx-getset,
// single without scripts); any other answer fails them.
// SemaphoreWaitersInTurn and ReadWriteNoStarvation also skip as
// WaitersObtainInTurn does.
//
//   - SemaphoreNeverMoreThanN: goroutines taking permits of a semaphore of
//     3, one holder in eight crashing (never releasing), are never more
//     than 3 inside at once.
//   - SemaphoreCrashedHolderReturns: a crashed holder's permit is free once
//     its lease ends, not before, and goes to the next holder.
//   - SemaphoreLimitMismatch: an Obtain that states another limit, or a
//     side of a read-write lock, or shares a plain lock's key, fails with
//     ErrMismatch and writes nothing; a free semaphore takes a new limit.
//   - SemaphorePermits: holders get the lowest free permit index, and with
//     WithFencing, each permit's fencing tokens increase.
//   - SemaphoreWaitersInTurn: waiters that queue one after the other get
//     permits in that order.
//   - ReadWriteExclusion: goroutines reading, writing and downgrading never
//     have a writer inside with anyone else.
//   - ReadWriteNoStarvation: a reader does not pass a writer that waits
//     ahead of it, nor a writer a reader.
//   - ReadWriteDowngrade: a downgraded writer lets readers in and keeps
//     writers out, a waiting writer does not come between, and only a
//     writer downgrades (else an *ArgumentError named "lock").
//   - SharedInspectAndBreak: Inspect lists the limit and each holder, and
//     Break ends one holder's lease by fingerprint, or every holder's.
//   - SharedLeavesNothing (Conns): after the holders release and the
//     waiters give up, no key named after the lock remains.
//   - SharedInvalidArguments: WithPermits out of 1 to lock.MaxPermits, and
//     a shared ObtainMany, are each an *ArgumentError, and nothing is sent.
//   - GuardedWriteNeedsTheLock (Conns): a guarded script (Lock.Guard) lands
//     while the lock is held, and writes nothing, with ErrExpired, ErrTaken
//     or ErrNotHeld, once the key was deleted, overwritten or broken, and
//     with ErrLapsed once ValidUntil has passed; the lock then ends. A
//     strategy that refuses guarded writes (an *ArgumentError named "lock"
//     matching errors.ErrUnsupported) passes, as does, for the script, a
//     server without scripts.
//   - GuardedCommandsNeedTheLock (Conns): the same of guarded commands
//     (Lock.GuardCommands), the form without Lua.
//   - GuardedWriteRacesAnAcquire (Conns): a holder's guarded writes never
//     land after the next holder obtained the lock, once the key was
//     deleted behind the first one's back, in either form.
//   - GuardedWriteChecksEveryKey (Conns): a lock of several keys, one of
//     them deleted, writes nothing, with ErrExpired in a *KeyError of that
//     key, in either form.
//   - GuardedWriteInvalidArguments: an empty script, no commands, an empty
//     command or key, and a nil ctx are each an *ArgumentError that leaves
//     the lock held; a nil lock's guarded write is ErrNotHeld.
//
// Run fails on a key of Harness.Skip that names no property, and logs the
// properties it skipped, with their reasons.
func Run(t *testing.T, h Harness) {
	if h.NewLocker == nil {
		t.Fatal("conformance: Harness.NewLocker is required")
	}
	h = h.withDefaults()
	checkSkip(t, h.Skip)
	s := suite{h}
	var skipped []string
	for _, p := range properties {
		if reason, ok := h.Skip[p.name]; ok {
			skipped = append(skipped, p.name+" ("+reason+")")
		}
		t.Run(p.name, func(t *testing.T) {
			if reason, ok := h.Skip[p.name]; ok {
				t.Skipf("Harness.Skip: %s", reason)
			}
			if !h.has(p.needs) {
				t.Fatalf("%s needs Harness.%s, which is not set: set it, or name %s in Harness.Skip with the reason", p.name, p.needs, p.name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), subtestTimeout)
			defer cancel()
			p.f(s, t, ctx)
		})
	}
	if len(skipped) > 0 {
		t.Logf("conformance: %d of %d properties skipped, as Harness.Skip asks: %s", len(skipped), len(properties), strings.Join(skipped, "; "))
	}
}

// withDefaults returns h with the defaults of the fields left zero.
func (h Harness) withDefaults() Harness {
	h.ShortTTL = cmp.Or(h.ShortTTL, 300*time.Millisecond)
	h.Goroutines = cmp.Or(h.Goroutines, 8)
	h.Acquisitions = cmp.Or(h.Acquisitions, 2000)
	return h
}

// checkSkip fails t for each key of skip that names no property, listing
// the properties.
func checkSkip(t *testing.T, skip map[string]string) {
	t.Helper()
	var names []string
	for _, p := range properties {
		names = append(names, p.name)
	}
	for name := range skip {
		if !slices.Contains(names, name) {
			t.Errorf("conformance: Harness.Skip names %q, which is not a property of the suite; the properties are %s", name, strings.Join(names, ", "))
		}
	}
}

// Key returns a key unique to t and to this call, for tests that share a
// server.
func Key(t testing.TB) string {
	return "conformance:" + strings.ReplaceAll(t.Name(), " ", "_") + ":" + randomHex(6)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Detector fails a test when two holders are ever inside a critical section
// at once. Call Enter just after obtaining the lock and Exit just before
// releasing it. It is safe for concurrent use.
type Detector struct {
	inside   atomic.Int64
	entries  atomic.Int64
	overlaps atomic.Int64
}

// Enter records a holder entering the critical section.
func (d *Detector) Enter() {
	d.entries.Add(1)
	if d.inside.Add(1) > 1 {
		d.overlaps.Add(1)
	}
}

// Exit records a holder leaving the critical section.
func (d *Detector) Exit() { d.inside.Add(-1) }

// Entries returns how many times a holder entered.
func (d *Detector) Entries() int64 { return d.entries.Load() }

// Overlaps returns how many entries found another holder inside.
func (d *Detector) Overlaps() int64 { return d.overlaps.Load() }

// Hold enters, sleeps for inside, so that a holder who enters meanwhile is
// caught, and exits.
func (d *Detector) Hold(inside time.Duration) {
	d.Enter()
	defer d.Exit()
	time.Sleep(inside)
}

// obtain obtains key on l, failing t on error; t releases the lock when it
// ends.
func (s suite) obtain(t *testing.T, ctx context.Context, l *lock.Locker, key string, ttl time.Duration, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := l.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		t.Fatalf("Obtain(%q, %v) = %v, want a lock", key, ttl, err)
	}
	release(t, lk)
	return lk
}

// refused fails t, saying what, unless an Obtain of key on l, for longTTL
// with opts, is refused with ErrNotObtained.
func refused(t *testing.T, ctx context.Context, l *lock.Locker, key, what string, opts ...lock.Option) {
	t.Helper()
	if lk, err := l.Obtain(ctx, key, longTTL, opts...); !errors.Is(err, lock.ErrNotObtained) {
		release(t, lk)
		t.Errorf("%s = %v, want ErrNotObtained", what, err)
	}
}

// argumentError reports whether err is an *ArgumentError named name.
func argumentError(err error, name string) bool {
	var ae *lock.ArgumentError
	return errors.As(err, &ae) && ae.Name == name
}

// release releases lk, which may be nil, at the end of the test, whatever
// happened.
func release(t *testing.T, lk *lock.Lock) {
	t.Cleanup(func() {
		// t.Context() is cancelled before Cleanup runs: use a fresh one.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = lk.Release(ctx)
	})
}

// excusedRelease reports whether err, the error of lk's Release in a
// contention run, is a loaded machine's rather than the strategy's: lk
// lapsed first, or a server did not answer (CI's busy cores once stalled a
// Redlock node past its timeout). What Release left is then deleted in the
// background, which the run's next Obtain waits for, and the properties
// that count the keys left still check.
func excusedRelease(t *testing.T, lk *lock.Lock, err error) bool {
	switch {
	case errors.Is(lk.Err(), lock.ErrLapsed):
		return true
	case errors.Is(err, lock.ErrNoAnswer):
		t.Logf("Release = %v: a loaded machine", err)
		return true
	}
	return false
}

// expiryMargin is how long past its TTL (and Harness.ExtraTTL) a lock may
// still be found held, on a loaded machine, before the suite decides that
// it does not expire.
const expiryMargin = 5 * time.Second

// expiryLimit bounds the time until a lock obtained for Harness.ShortTTL is
// gone.
func (s suite) expiryLimit() time.Duration { return s.h.ShortTTL + s.h.ExtraTTL + expiryMargin }

// expiredLock obtains key on l for Harness.ShortTTL, and returns the lock
// once it has expired, as waitExpired finds.
func (s suite) expiredLock(t *testing.T, ctx context.Context, l *lock.Locker, key string) *lock.Lock {
	t.Helper()
	lk := s.obtain(t, ctx, l, key, s.h.ShortTTL)
	s.waitExpired(t, ctx, lk)
	return lk
}

// waitExpired polls lk.TTL until the lock, obtained for Harness.ShortTTL,
// is gone, and fails the test if it outlives expiryLimit.
func (s suite) waitExpired(t *testing.T, ctx context.Context, lk *lock.Lock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, s.expiryLimit())
	defer cancel()
	for {
		_, err := lk.TTL(ctx)
		if errors.Is(err, lock.ErrNotHeld) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("TTL of a lock obtained for %v, %v later = %v, want ErrNotHeld (the lock does not expire)", s.h.ShortTTL, s.expiryLimit(), err)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting for the lock to expire: TTL = %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
