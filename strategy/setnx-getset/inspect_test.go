package setnxgetset_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
)

// TestInspect: Inspect reads a legacy lock without holding it: its decoded
// timestamp, whether Obtain would take it over now (by the rule Obtain
// follows), and the key's own TTL, over every driver.
func TestInspect(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	ms := setnxgetset.WithFormat(setnxgetset.Milliseconds)
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			conn := d.Conn(t, srv.Addr)
			l := newLocker(t, conn, ms)
			inspect := func(t *testing.T, l *lock.Locker, key string) lock.State {
				t.Helper()
				st, err := l.Inspect(ctx, key)
				if err != nil {
					t.Fatalf("Inspect = %v, want nil", err)
				}
				return st
			}
			plant := func(t *testing.T, key, value string) {
				t.Helper()
				if _, err := srv.Command(ctx, "SET", key, value); err != nil {
					t.Fatal(err)
				}
			}

			t.Run("a free key", func(t *testing.T) {
				st := inspect(t, l, conformance.Key(t))
				if st.Held || st.TTL != 0 || st.Fingerprint != "" || !st.Expiry.IsZero() || st.Takeover || st.Verdict != "free" {
					t.Errorf("Inspect = %+v, want free, with nothing else set", st)
				}
			})

			t.Run("a held lock", func(t *testing.T) {
				key := conformance.Key(t)
				lk, err := l.Obtain(ctx, key, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Release(ctx)
				st := inspect(t, l, key)
				stamp, _ := strconv.ParseInt(lk.Token(), 10, 64)
				if !st.Held || st.Takeover || st.Verdict != "held" {
					t.Errorf("Held, Takeover, Verdict = %v, %v, %q; want true, false, held", st.Held, st.Takeover, st.Verdict)
				}
				if !st.Expiry.Equal(time.UnixMilli(stamp)) {
					t.Errorf("Expiry = %v, want the timestamp of the value, %v", st.Expiry, time.UnixMilli(stamp))
				}
				if st.Fingerprint != strategy.Fingerprint(lk.Token()) {
					t.Errorf("Fingerprint = %q, want that of the holder's Token", st.Fingerprint)
				}
				if st.TTL >= 0 {
					t.Errorf("TTL of a lock written without a safety TTL = %v, want negative (no expiry)", st.TTL)
				}
			})

			t.Run("a held lock with a safety TTL", func(t *testing.T) {
				l := newLocker(t, conn, ms, setnxgetset.WithSafetyTTL(time.Second))
				key := conformance.Key(t)
				lk, err := l.Obtain(ctx, key, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Release(ctx)
				if st := inspect(t, l, key); st.TTL <= 0 || st.TTL > time.Minute+2*time.Second {
					t.Errorf("TTL = %v, want the safety TTL, in (0, 1m2s]", st.TTL)
				}
			})

			t.Run("an expired timestamp", func(t *testing.T) {
				key := conformance.Key(t)
				past := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
				plant(t, key, strconv.FormatInt(past.UnixMilli(), 10))
				st := inspect(t, l, key)
				if !st.Held || !st.Takeover || !st.Expiry.Equal(past) || st.Verdict != "expired: Obtain takes it over" {
					t.Errorf("Inspect = %+v, want held, expired at %v, and Takeover", st, past)
				}
				lk, err := l.Obtain(ctx, key, time.Minute)
				if err != nil {
					t.Fatalf("Obtain after Inspect reported Takeover = %v, want a lock", err)
				}
				_ = lk.Release(ctx)
			})

			t.Run("a timestamp within the clock skew", func(t *testing.T) {
				key := conformance.Key(t)
				careful := newLocker(t, conn, ms, setnxgetset.WithClockSkew(time.Hour))
				plant(t, key, strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10))
				st := inspect(t, careful, key)
				if !st.Held || st.Takeover || st.Verdict != "held: expired, but within the clock skew" {
					t.Errorf("Inspect = %+v, want held, with no Takeover", st)
				}
				if _, err := careful.Obtain(ctx, key, 2*time.Hour); !errors.Is(err, lock.ErrNotObtained) {
					t.Errorf("Obtain after Inspect reported no Takeover = %v, want ErrNotObtained", err)
				}
			})

			t.Run("a value that is not a timestamp", func(t *testing.T) {
				key := conformance.Key(t)
				const token = "AAAAAAAAAAAAAAAAAAAAAA"
				plant(t, key, token+"host=web-3") // a single-strategy holder
				st := inspect(t, l, key)
				if !st.Held || st.Takeover || !st.Expiry.IsZero() || st.Verdict != "held by a non-legacy owner: never taken over" {
					t.Errorf("Inspect = %+v, want held, never taken over, with no Expiry", st)
				}
				if st.Fingerprint != strategy.Fingerprint(token) || st.Metadata != "host=web-3" {
					t.Errorf("Fingerprint, Metadata = %q, %q; want the token's and host=web-3", st.Fingerprint, st.Metadata)
				}
			})

			t.Run("a key of another type", func(t *testing.T) {
				key := conformance.Key(t)
				if _, err := srv.Command(ctx, "HSET", key, "f", "v"); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Inspect(ctx, key); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
					t.Errorf("Inspect of a hash = %v, want WRONGTYPE", err)
				}
			})
		})
	}
}
