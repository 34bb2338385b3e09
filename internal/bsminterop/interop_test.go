package bsminterop_test

// Interoperability with github.com/bsm/redislock, for users moving from it to
// the single strategy: during a rolling migration both libraries run side by
// side on the same keys, so each must exclude the other, and neither may
// release or extend a lock the other holds.
//
// Both libraries use the same layout: SET key value NX PX ttl, with value =
// token + metadata, and compare-and-delete / compare-and-pexpire scripts.
// bsm/redislock's Obtain script also re-takes a key whose value starts with
// its own token; tokens are random 128-bit values on both sides, so a lock
// of the other library never matches.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

const (
	interopGoroutines = 4 // per library
	interopHold       = 50 * time.Microsecond
	interopLongTTL    = 30 * time.Second
	interopShortTTL   = 300 * time.Millisecond
	interopTimeout    = 2 * time.Minute
	interopMinBackoff = time.Millisecond
	interopMaxBackoff = 8 * time.Millisecond
)

// interopPeers is our Locker and a bsm/redislock client of the same server,
// each over its own connections, as two processes would be.
type interopPeers struct {
	ours *lock.Locker
	bsm  *redislock.Client
	raw  *redis.Client // for inspecting keys
}

func newInteropPeers(t *testing.T, d redistest.Driver, addr string) interopPeers {
	t.Helper()
	ours, err := single.New(d.Conn(t, addr))
	if err != nil {
		t.Fatalf("single.New: got error %v, want nil", err)
	}
	return interopPeers{
		ours: ours,
		bsm:  redislock.New(redistest.GoRedis(t, addr, 3)),
		raw:  redistest.GoRedis(t, addr, 3),
	}
}

func interopContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	t.Cleanup(cancel)
	return ctx
}

// bsmRetry returns a fresh retry strategy: bsm/redislock's strategies count
// attempts inside, so one must never be shared between Obtain calls.
func bsmRetry() *redislock.Options {
	return &redislock.Options{RetryStrategy: redislock.ExponentialBackoff(interopMinBackoff, interopMaxBackoff)}
}

// releaseOursLater releases lk when the test ends, whatever happened.
func releaseOursLater(t *testing.T, lk *lock.Lock) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = lk.Release(ctx)
	})
}

// releaseBsmLater releases bl when the test ends, whatever happened.
func releaseBsmLater(t *testing.T, bl *redislock.Lock) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = bl.Release(ctx)
	})
}

func obtainOurs(t *testing.T, ctx context.Context, p interopPeers, key string, ttl time.Duration, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := p.ours.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		t.Fatalf("ours: Obtain(%q, %v): got error %v, want a lock", key, ttl, err)
	}
	releaseOursLater(t, lk)
	return lk
}

func obtainBsm(t *testing.T, ctx context.Context, p interopPeers, key string, ttl time.Duration, opt *redislock.Options) *redislock.Lock {
	t.Helper()
	bl, err := p.bsm.Obtain(ctx, key, ttl, opt)
	if err != nil {
		t.Fatalf("bsm: Obtain(%q, %v): got error %v, want a lock", key, ttl, err)
	}
	releaseBsmLater(t, bl)
	return bl
}

// waitOursExpired polls our lock's TTL until it reports the lock is gone.
func waitOursExpired(t *testing.T, ctx context.Context, lk *lock.Lock) {
	t.Helper()
	for {
		_, err := lk.TTL(ctx)
		if errors.Is(err, lock.ErrNotHeld) {
			return
		}
		if err != nil {
			t.Fatalf("ours: waiting for %v to expire: TTL got error %v, want nil or lock.ErrNotHeld", lk, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("ours: waiting for %v to expire: got %v, want expiry within %v", lk, context.Cause(ctx), interopTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitBsmExpired polls bsm's lock TTL until it reports 0, and then the key
// until it is gone: bsm/redislock's TTL also reports 0 for a key that has
// less than a millisecond left (PTTL 0), which is still held.
func waitBsmExpired(t *testing.T, ctx context.Context, raw *redis.Client, bl *redislock.Lock) {
	t.Helper()
	for {
		ttl, err := bl.TTL(ctx)
		if err != nil {
			t.Fatalf("bsm: waiting for %q to expire: TTL got error %v, want nil", bl.Key(), err)
		}
		if ttl == 0 {
			n, err := raw.Exists(ctx, bl.Key()).Result()
			if err != nil {
				t.Fatalf("bsm: waiting for %q to expire: EXISTS got error %v, want nil", bl.Key(), err)
			}
			if n == 0 {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("bsm: waiting for %q to expire: got %v, want expiry within %v", bl.Key(), context.Cause(ctx), interopTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInteropMixedContention runs our Locker and bsm/redislock side by side
// on the same keys and checks that no two holders, of either library, are
// ever inside the critical section of a key at once.
func TestInteropMixedContention(t *testing.T) {
	t.Parallel()
	addr := redistest.Start(t, 1)[0].Addr
	for _, d := range redistest.InteropDrivers() {
		t.Run(d.Name, func(t *testing.T) {
			t.Run("SameKey", func(t *testing.T) {
				interopContend(t, newInteropPeers(t, d, addr), 1)
			})
			t.Run("ThreeKeys", func(t *testing.T) {
				interopContend(t, newInteropPeers(t, d, addr), 3)
			})
		})
	}
}

// interopAcquisitions is the size of a contention run: 1000 with
// LOCKSMITH_FULL=1, as CI sets, and 250 for README's quicker command.
func interopAcquisitions() int64 {
	if redistest.Full() {
		return 1000
	}
	return 250
}

// interopContend has interopGoroutines goroutines of each library take
// interopAcquisitions() locks in all, spread round-robin over nkeys keys, each
// held inside the key's Detector.
func interopContend(t *testing.T, p interopPeers, nkeys int) {
	ctx := interopContext(t)
	keys := make([]string, nkeys)
	detectors := make([]*conformance.Detector, nkeys)
	for i := range keys {
		keys[i] = conformance.Key(t)
		detectors[i] = new(conformance.Detector)
	}

	want := interopAcquisitions()
	var (
		tickets               atomic.Int64 // acquisitions claimed so far
		oursN, bsmN           atomic.Int64 // acquisitions made, per library
		oursRelErr, bsmRelErr atomic.Int64 // failed Releases, per library
		oursObtErr, bsmObtErr atomic.Int64 // failed Obtains, per library
		wg                    sync.WaitGroup
		ourRetry              = lock.WithRetry(lock.Exponential(interopMinBackoff, interopMaxBackoff))
		firstErrMu            sync.Mutex
		firstErr              error
		recordErr             = func(err error) {
			firstErrMu.Lock()
			defer firstErrMu.Unlock()
			if firstErr == nil {
				firstErr = err
			}
		}
	)
	// next claims an acquisition and returns its key's index, or false when
	// all have been claimed.
	next := func() (int, bool) {
		n := tickets.Add(1)
		if n > want {
			return 0, false
		}
		return int(n) % nkeys, true
	}

	for range interopGoroutines {
		wg.Add(2)
		go func() { // ours
			defer wg.Done()
			for {
				i, ok := next()
				if !ok {
					return
				}
				lk, err := p.ours.Obtain(ctx, keys[i], interopLongTTL, ourRetry)
				if err != nil {
					oursObtErr.Add(1)
					recordErr(err)
					return
				}
				detectors[i].Hold(interopHold)
				oursN.Add(1)
				if err := lk.Release(ctx); err != nil {
					oursRelErr.Add(1)
					recordErr(err)
				}
			}
		}()
		go func() { // bsm/redislock
			defer wg.Done()
			for {
				i, ok := next()
				if !ok {
					return
				}
				bl, err := p.bsm.Obtain(ctx, keys[i], interopLongTTL, bsmRetry())
				if err != nil {
					bsmObtErr.Add(1)
					recordErr(err)
					return
				}
				detectors[i].Hold(interopHold)
				bsmN.Add(1)
				if err := bl.Release(ctx); err != nil {
					bsmRelErr.Add(1)
					recordErr(err)
				}
			}
		}()
	}
	wg.Wait()

	var overlaps, entries int64
	for _, d := range detectors {
		overlaps += d.Overlaps()
		entries += d.Entries()
	}
	t.Logf("keys=%d ours=%d bsm=%d overlaps=%d", nkeys, oursN.Load(), bsmN.Load(), overlaps)

	if n := oursObtErr.Load() + bsmObtErr.Load(); n > 0 {
		t.Errorf("failed Obtains: got %d (ours %d, bsm %d; first error: %v), want 0",
			n, oursObtErr.Load(), bsmObtErr.Load(), firstErr)
	}
	if n := oursRelErr.Load() + bsmRelErr.Load(); n > 0 {
		t.Errorf("failed Releases: got %d (ours %d, bsm %d; first error: %v), want 0",
			n, oursRelErr.Load(), bsmRelErr.Load(), firstErr)
	}
	if overlaps != 0 {
		t.Errorf("overlapping holders: got %d, want 0", overlaps)
	}
	if entries != want {
		t.Errorf("acquisitions: got %d, want %d", entries, want)
	}
	if oursN.Load() == 0 {
		t.Errorf("our acquisitions: got 0, want > 0 (bsm took %d)", bsmN.Load())
	}
	if bsmN.Load() == 0 {
		t.Errorf("bsm acquisitions: got 0, want > 0 (ours took %d)", oursN.Load())
	}
}

// TestInteropOwnership checks that neither library can take, release or
// refresh a lock the other holds.
func TestInteropOwnership(t *testing.T) {
	t.Parallel()
	addr := redistest.Start(t, 1)[0].Addr
	for _, d := range redistest.InteropDrivers() {
		t.Run(d.Name, func(t *testing.T) {
			t.Run("OursHeldBsmCannotObtain", func(t *testing.T) {
				ctx := interopContext(t)
				p := newInteropPeers(t, d, addr)
				key := conformance.Key(t)
				obtainOurs(t, ctx, p, key, interopLongTTL)

				bl, err := p.bsm.Obtain(ctx, key, interopLongTTL, nil)
				if err == nil {
					releaseBsmLater(t, bl)
				}
				if !errors.Is(err, redislock.ErrNotObtained) {
					t.Errorf("bsm: Obtain of a key we hold: got %v, want redislock.ErrNotObtained", err)
				}
			})

			t.Run("BsmHeldOursCannotObtain", func(t *testing.T) {
				ctx := interopContext(t)
				p := newInteropPeers(t, d, addr)
				key := conformance.Key(t)
				obtainBsm(t, ctx, p, key, interopLongTTL, nil)

				lk, err := p.ours.Obtain(ctx, key, interopLongTTL)
				if err == nil {
					releaseOursLater(t, lk)
				}
				if !errors.Is(err, lock.ErrNotObtained) {
					t.Errorf("ours: Obtain of a key bsm holds: got %v, want lock.ErrNotObtained", err)
				}
			})

			t.Run("OurStaleReleaseLeavesBsmLock", func(t *testing.T) {
				ctx := interopContext(t)
				stale, bl := oursStale(t, ctx, newInteropPeers(t, d, addr))

				if err := stale.Release(ctx); !errors.Is(err, lock.ErrTaken) {
					t.Errorf("ours: Release of a stale lock that bsm now holds: got %v, want lock.ErrTaken", err)
				}
				assertBsmHeld(t, ctx, bl)
			})

			t.Run("OurStaleRefreshLeavesBsmLock", func(t *testing.T) {
				ctx := interopContext(t)
				stale, bl := oursStale(t, ctx, newInteropPeers(t, d, addr))

				if err := stale.Refresh(ctx, interopLongTTL); !errors.Is(err, lock.ErrTaken) {
					t.Errorf("ours: Refresh of a stale lock that bsm now holds: got %v, want lock.ErrTaken", err)
				}
				assertBsmHeld(t, ctx, bl)
			})

			t.Run("BsmStaleReleaseLeavesOurLock", func(t *testing.T) {
				ctx := interopContext(t)
				stale, lk := bsmStale(t, ctx, newInteropPeers(t, d, addr))

				if err := stale.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
					t.Errorf("bsm: Release of a stale lock that we now hold: got %v, want redislock.ErrLockNotHeld", err)
				}
				assertOursHeld(t, ctx, lk)
			})

			t.Run("BsmStaleRefreshLeavesOurLock", func(t *testing.T) {
				ctx := interopContext(t)
				stale, lk := bsmStale(t, ctx, newInteropPeers(t, d, addr))

				// bsm/redislock v0.9.4's Refresh reports a lost lock as
				// ErrNotObtained, not ErrLockNotHeld (only Release returns
				// ErrLockNotHeld).
				if err := stale.Refresh(ctx, interopLongTTL, nil); !errors.Is(err, redislock.ErrNotObtained) {
					t.Errorf("bsm: Refresh of a stale lock that we now hold: got %v, want redislock.ErrNotObtained", err)
				}
				assertOursHeld(t, ctx, lk)
			})
		})
	}
}

// oursStale returns a lock of ours that expired, and the bsm lock that
// holds its key now.
func oursStale(t *testing.T, ctx context.Context, p interopPeers) (*lock.Lock, *redislock.Lock) {
	t.Helper()
	key := conformance.Key(t)
	stale := obtainOurs(t, ctx, p, key, interopShortTTL)
	waitOursExpired(t, ctx, stale)
	return stale, obtainBsm(t, ctx, p, key, interopLongTTL, nil)
}

// bsmStale returns a bsm lock that expired, and the lock of ours that holds
// its key now.
func bsmStale(t *testing.T, ctx context.Context, p interopPeers) (*redislock.Lock, *lock.Lock) {
	t.Helper()
	key := conformance.Key(t)
	stale := obtainBsm(t, ctx, p, key, interopShortTTL, nil)
	waitBsmExpired(t, ctx, p.raw, stale)
	return stale, obtainOurs(t, ctx, p, key, interopLongTTL)
}

func assertBsmHeld(t *testing.T, ctx context.Context, bl *redislock.Lock) {
	t.Helper()
	ttl, err := bl.TTL(ctx)
	if err != nil || ttl <= 0 {
		t.Errorf("bsm: TTL of its lock after our stale handle acted: got (%v, %v), want (> 0, nil)", ttl, err)
	}
}

func assertOursHeld(t *testing.T, ctx context.Context, lk *lock.Lock) {
	t.Helper()
	ttl, err := lk.TTL(ctx)
	if err != nil || ttl <= 0 {
		t.Errorf("ours: TTL of our lock after bsm's stale lock acted: got (%v, %v), want (> 0, nil)", ttl, err)
	}
}

// TestInteropValueFormat checks that both libraries store a plain string,
// token followed by metadata, so tooling that inspects lock keys (to read
// the holder's metadata, say) works during and after a migration. It logs
// lengths only: tokens are secrets.
func TestInteropValueFormat(t *testing.T) {
	addr := redistest.Start(t, 1)[0].Addr
	for _, d := range redistest.InteropDrivers() {
		t.Run(d.Name, func(t *testing.T) {
			t.Run("OursIsTokenThenMetadata", func(t *testing.T) {
				ctx := interopContext(t)
				p := newInteropPeers(t, d, addr)
				key := conformance.Key(t)
				const meta = "host=ours;pid=1"
				lk := obtainOurs(t, ctx, p, key, interopLongTTL, lock.WithMetadata(meta))

				if lk.Metadata() != meta {
					t.Errorf("ours: Metadata(): got %q, want %q", lk.Metadata(), meta)
				}
				checkStoredValue(t, ctx, p.raw, "ours", key, lk.Token(), meta)
			})

			t.Run("BsmIsTokenThenMetadata", func(t *testing.T) {
				ctx := interopContext(t)
				p := newInteropPeers(t, d, addr)
				key := conformance.Key(t)
				const meta = "host=bsm;pid=2"
				bl := obtainBsm(t, ctx, p, key, interopLongTTL, &redislock.Options{Metadata: meta})

				if bl.Metadata() != meta {
					t.Errorf("bsm: Metadata(): got %q, want %q", bl.Metadata(), meta)
				}
				checkStoredValue(t, ctx, p.raw, "bsm", key, bl.Token(), meta)
			})
		})
	}
}

// checkStoredValue checks that key is a string holding token+meta, without
// ever printing the token.
func checkStoredValue(t *testing.T, ctx context.Context, raw *redis.Client, side, key, token, meta string) {
	t.Helper()
	typ, err := raw.Type(ctx, key).Result()
	if err != nil || typ != "string" {
		t.Errorf("%s: TYPE %q: got (%q, %v), want (\"string\", nil)", side, key, typ, err)
	}
	got, err := raw.Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("%s: GET %q: got error %v, want the lock's value", side, key, err)
	}
	got = redistest.Unstamped(got) // ours bear a stamp between the token and the metadata, which bsm reads as metadata
	if token == "" {
		t.Errorf("%s: token length: got 0, want > 0", side)
	}
	if got != token+meta {
		// The token is secret: report lengths and the metadata only.
		t.Errorf("%s: GET %q: got a %d-byte value, want token (%d bytes) + %q (%d bytes); value equals token: %t, ends with metadata: %t",
			side, key, len(got), len(token), meta, len(meta), got == token, len(got) >= len(meta) && got[len(got)-len(meta):] == meta)
	}
	t.Logf("%s: value is a plain string of %d bytes = token (%d bytes) + metadata %q (%d bytes)",
		side, len(got), len(token), meta, len(meta))
}
