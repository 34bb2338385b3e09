// Package conformance is the test suite that every [lock.Locker] (each
// strategy over each driver) must pass, and that a third party can run
// against its own strategy or driver.
//
// [Run] checks a Locker through the [Harness] that builds it; [RunDriver]
// checks a [driver.Conn]. Each property is a subtest, so a failure names it
// (TestConformance/single/goredis/MutualExclusion). Concurrency bugs are
// probabilistic: the suite has no false positives but can have false
// negatives, so run it under the race detector, and more than once.
//
// A third party plugs in with a few lines:
//
//	func TestConformance(t *testing.T) {
//		addr := startRedis(t) // your own server, started for the test
//		conformance.RunDriver(t, func(t *testing.T) driver.Conn { return myredis.New(newClient(t, addr)) })
//		conformance.Run(t, conformance.Harness{
//			NewLocker: func(t *testing.T) lock.Locker {
//				l, err := mystrategy.New(myredis.New(newClient(t, addr)))
//				if err != nil {
//					t.Fatal(err)
//				}
//				return l
//			},
//		})
//	}
//
// The package imports only the standard library and this module's lock and
// driver packages, so it brings no test dependencies to its users.
package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
)

// Harness builds the Locker under test. Only NewLocker is required; each
// optional field enables the properties that need it, and the others skip
// with a message saying which field is missing.
type Harness struct {
	// NewLocker returns a Locker under test. Lockers returned during one
	// subtest must contend on the same keyspace (the same server, cluster or
	// set of nodes), as separate clients would. Close what it opens with
	// t.Cleanup.
	NewLocker func(t *testing.T) lock.Locker

	// Conns returns a connection to every server behind the Locker (one
	// for a single server or cluster, one per node for a multi-node
	// strategy), for planting and inspecting keys.
	Conns func(t *testing.T) []driver.Conn

	// NewUnreachable returns a Locker whose Redis is unreachable, such as a
	// client of a closed loopback port.
	NewUnreachable func(t *testing.T) lock.Locker

	// NewWithNilConn builds the Locker over a nil driver and returns what
	// the constructor returned.
	NewWithNilConn func() (lock.Locker, error)

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
	// defaults are 8 goroutines and 2000 acquisitions in all.
	Goroutines, Acquisitions int

	// Skip names the properties the implementation cannot meet, each with
	// the reason, which the subtest reports when it skips. Use it only for a
	// documented limit of the algorithm.
	Skip map[string]string
}

// Property names, for Harness.Skip.
const (
	ExactlyOneWinner        = "ExactlyOneWinner"
	MutualExclusion         = "MutualExclusion"
	ExpiryFreesTheLock      = "ExpiryFreesTheLock"
	NotHeldAfterExpiry      = "NotHeldAfterExpiry"
	NonOwnerCannotTouch     = "NonOwnerCannotTouch"
	ExpiredAndTakenDiffer   = "ExpiredAndTakenDiffer"
	ReleaseFreesTheLock     = "ReleaseFreesTheLock"
	RefreshExtends          = "RefreshExtends"
	TTLReportsRemaining     = "TTLReportsRemaining"
	ContextEndsTheWait      = "ContextEndsTheWait"
	RetryPolicies           = "RetryPolicies"
	TokensAreUnique         = "TokensAreUnique"
	MetadataRoundTrips      = "MetadataRoundTrips"
	CallerChosenToken       = "CallerChosenToken"
	TokenStaysSecret        = "TokenStaysSecret"
	InvalidArguments        = "InvalidArguments"
	NilDriver               = "NilDriver"
	KeyOfAnotherType        = "KeyOfAnotherType"
	UnreachableRedisIsError = "UnreachableRedisIsError"
	AutoRefresh             = "AutoRefresh"
	LossCancelsTheHolder    = "LossCancelsTheHolder"
	DoHoldsAndReleases      = "DoHoldsAndReleases"
	FencingTokens           = "FencingTokens"
)

// subtestTimeout bounds every call a subtest makes, so that a hang fails
// the subtest instead of the whole test binary.
const subtestTimeout = 2 * time.Minute

type suite struct {
	h Harness
}

// Run runs the Locker suite as subtests of t.
func Run(t *testing.T, h Harness) {
	if h.NewLocker == nil {
		t.Fatal("conformance: Harness.NewLocker is required")
	}
	if h.ShortTTL == 0 {
		h.ShortTTL = 300 * time.Millisecond
	}
	if h.Goroutines == 0 {
		h.Goroutines = 8
	}
	if h.Acquisitions == 0 {
		h.Acquisitions = 2000
	}
	s := suite{h}
	for _, c := range []struct {
		name string
		f    func(*testing.T, context.Context)
	}{
		{ExactlyOneWinner, s.exactlyOneWinner},
		{MutualExclusion, s.mutualExclusion},
		{ExpiryFreesTheLock, s.expiryFreesTheLock},
		{NotHeldAfterExpiry, s.notHeldAfterExpiry},
		{NonOwnerCannotTouch, s.nonOwnerCannotTouch},
		{ExpiredAndTakenDiffer, s.expiredAndTakenDiffer},
		{ReleaseFreesTheLock, s.releaseFreesTheLock},
		{RefreshExtends, s.refreshExtends},
		{TTLReportsRemaining, s.ttlReportsRemaining},
		{ContextEndsTheWait, s.contextEndsTheWait},
		{RetryPolicies, s.retryPolicies},
		{TokensAreUnique, s.tokensAreUnique},
		{MetadataRoundTrips, s.metadataRoundTrips},
		{CallerChosenToken, s.callerChosenToken},
		{TokenStaysSecret, s.tokenStaysSecret},
		{InvalidArguments, s.invalidArguments},
		{NilDriver, s.nilDriver},
		{KeyOfAnotherType, s.keyOfAnotherType},
		{UnreachableRedisIsError, s.unreachable},
		{AutoRefresh, s.autoRefresh},
		{LossCancelsTheHolder, s.lossCancelsTheHolder},
		{DoHoldsAndReleases, s.doHoldsAndReleases},
		{FencingTokens, s.fencingTokens},
	} {
		t.Run(c.name, func(t *testing.T) {
			if reason, ok := h.Skip[c.name]; ok {
				t.Skipf("the implementation declares it cannot meet %s: %s", c.name, reason)
			}
			ctx, cancel := context.WithTimeout(context.Background(), subtestTimeout)
			defer cancel()
			c.f(t, ctx)
		})
	}
}

// Key returns a key unique to t and to this call, for tests that share a
// server.
func Key(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "conformance:" + strings.ReplaceAll(t.Name(), " ", "_") + ":" + hex.EncodeToString(b[:])
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

// Hold enters, stays inside for d (yielding, so that an overlapping holder
// would be caught), and exits.
func (d *Detector) Hold(inside time.Duration) {
	d.Enter()
	defer d.Exit()
	if inside > 0 {
		time.Sleep(inside)
	}
}

func (s suite) conns(t *testing.T) []driver.Conn {
	t.Helper()
	if s.h.Conns == nil {
		t.Skip("Harness.Conns is not set")
	}
	return s.h.Conns(t)
}

func (s suite) obtain(t *testing.T, ctx context.Context, l lock.Locker, key string, ttl time.Duration, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := l.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		t.Fatalf("Obtain(%q, %v) = %v, want a lock", key, ttl, err)
	}
	return lk
}

// release releases lk at the end of the test, whatever happened.
func release(t *testing.T, lk *lock.Lock) {
	t.Cleanup(func() {
		// t.Context() is cancelled before Cleanup runs: use a fresh one.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = lk.Release(ctx)
	})
}

// waitExpired polls lk.TTL until the lock is gone or ctx ends.
func waitExpired(t *testing.T, ctx context.Context, lk *lock.Lock) {
	t.Helper()
	for {
		_, err := lk.TTL(ctx)
		if errors.Is(err, lock.ErrNotHeld) {
			return
		}
		if ctx.Err() != nil || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
			t.Fatalf("waiting for the lock to expire: TTL = %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
