package setnxgetset_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
)

func TestFormats(t *testing.T) {
	at := time.Unix(1700000000, 250_000_000) // 1700000000.25
	t.Run("golden values", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			f      setnxgetset.Format
			ttl    time.Duration
			encode string
		}{
			{"Seconds: now + timeout + 1", setnxgetset.Seconds, 10 * time.Second, "1700000011"},
			{"Seconds rounds the timeout up", setnxgetset.Seconds, 300 * time.Millisecond, "1700000002"},
			{"Milliseconds: now + timeout + 1", setnxgetset.Milliseconds, 10 * time.Second, "1700000010251"},
			{"FloatSeconds: now + timeout", setnxgetset.FloatSeconds, 10 * time.Second, "1700000010.250000"},
			{"FloatSeconds rounds up to microseconds", setnxgetset.FloatSeconds, 1500 * time.Nanosecond, "1700000000.250002"},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got := c.f.Encode(at, c.ttl); got != c.encode {
					t.Errorf("Encode(%v, %v) = %q, want %q", at.UnixMilli(), c.ttl, got, c.encode)
				}
			})
		}
	})

	t.Run("a value never expires before now + ttl", func(t *testing.T) {
		for _, f := range []setnxgetset.Format{setnxgetset.Seconds, setnxgetset.Milliseconds, setnxgetset.FloatSeconds} {
			for _, ttl := range []time.Duration{time.Millisecond, 999 * time.Millisecond, time.Second, 90 * time.Second} {
				now := time.Now()
				expiry, ok := f.Decode(f.Encode(now, ttl))
				if !ok || expiry.Before(now.Add(ttl)) {
					t.Errorf("%v: Decode(Encode(now, %v)) = now%+v, %v; want at least now+%v", f, ttl, expiry.Sub(now), ok, ttl)
				}
			}
		}
	})

	t.Run("reading is lenient within the format", func(t *testing.T) {
		for _, c := range []struct {
			f    setnxgetset.Format
			text string
			want time.Time
		}{
			{setnxgetset.Seconds, "1700000011", time.Unix(1700000011, 0)},
			{setnxgetset.Seconds, " 1700000011\r\n", time.Unix(1700000011, 0)},
			{setnxgetset.Seconds, "1700000011.5", time.Unix(1700000011, 500_000_000)},
			{setnxgetset.Milliseconds, "1700000010251", time.UnixMilli(1700000010251)},
			{setnxgetset.Milliseconds, "1700000010251.0", time.UnixMilli(1700000010251)},
			{setnxgetset.FloatSeconds, "1700000010.25", time.Unix(1700000010, 250_000_000)},
			{setnxgetset.FloatSeconds, "1700000010", time.Unix(1700000010, 0)},
			{setnxgetset.FloatSeconds, "1", time.Unix(1, 0)}, // redis-objects' "no expiration" sentinel: long expired, as its readers see it
		} {
			got, ok := c.f.Decode(c.text)
			if !ok || got.Sub(c.want).Abs() > time.Microsecond {
				t.Errorf("%v.Decode(%q) = %v, %v; want %v, true", c.f, c.text, got, ok, c.want)
			}
		}
	})

	t.Run("values that are not timestamps of the format", func(t *testing.T) {
		for _, c := range []struct {
			f    setnxgetset.Format
			text string
		}{
			{setnxgetset.Seconds, ""},
			{setnxgetset.Seconds, "   "},
			{setnxgetset.Seconds, "BEzb3iRQgpoTxxpuOWiT1w"}, // a single strategy's token
			{setnxgetset.Seconds, "-5"},
			{setnxgetset.Seconds, "NaN"},
			{setnxgetset.Seconds, "+Inf"},
			{setnxgetset.Seconds, "1700000011abc"},
			{setnxgetset.Seconds, "1700000010251"},        // milliseconds read as seconds: beyond year 2116
			{setnxgetset.Milliseconds, "1700000011"},      // seconds read as milliseconds: would look expired
			{setnxgetset.FloatSeconds, "uuid:1700000011"}, // jedis-lock 2015 needs a custom Format
		} {
			if got, ok := c.f.Decode(c.text); ok {
				t.Errorf("%v.Decode(%q) = %v, true; want false", c.f, c.text, got)
			}
		}
	})
}

// nanos is a custom Format: integer unix nanoseconds, as vanng822/gorlock
// writes them.
type nanos struct{}

func (nanos) Encode(now time.Time, ttl time.Duration) string {
	return strconv.FormatInt(now.Add(ttl).UnixNano(), 10)
}

func (nanos) Decode(s string) (time.Time, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return time.Unix(0, n), err == nil && n >= 0
}

func TestCustomFormat(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	l := newLocker(t, goredis.New(rdb), setnxgetset.WithFormat(nanos{}))
	key := conformance.Key(t)
	// A gorlock holder crashed a second ago.
	if err := rdb.Set(ctx, key, time.Now().Add(-time.Second).UnixNano(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	lk, err := l.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain of an expired nanosecond timestamp = %v, want a lock", err)
	}
	defer lk.Release(ctx)
	stored, _ := rdb.Get(ctx, key).Result()
	n, err := strconv.ParseInt(stored, 10, 64)
	if err != nil || time.Unix(0, n).Before(time.Now().Add(50*time.Second)) {
		t.Errorf("stored value = %q, want a nanosecond timestamp about a minute ahead", stored)
	}
}
