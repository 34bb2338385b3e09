package cas_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// counting counts the SETs and scripts (EVALSHA; an EVAL follows only a
// NOSCRIPT) sent through a driver.Conn.
type counting struct {
	driver.Conn
	sets, scripts int
}

func (c *counting) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	c.sets++
	return c.Conn.SetNX(ctx, key, value, ttl)
}

func (c *counting) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	c.scripts++
	return c.Conn.EvalSha(ctx, sha1, keys, args...)
}

// TestAcquireStarts: an acquisition answers as the script alone does, in
// every state of the key, however it starts (cas.Start), and sends what
// its start says; but a SET alone, which takes a refusal for "held" (for a
// fresh token, on an attempt that another follows).
func TestAcquireStarts(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rdb := redistest.GoRedis(t, addr, 3)
	ctx := context.Background()
	key := "cas-acquire-starts"
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	type want struct {
		err           error  // errors.Is, or nil
		errText       string // in the error, when err is nil
		value         string // the key's value after the call
		sets, scripts int    // commands sent
	}
	notObtained := lock.ErrNotObtained
	for _, tc := range []struct {
		name  string
		plant func() error
		by    map[cas.Start]want
	}{
		{"the key is free", func() error { return nil }, map[cas.Start]want{
			cas.ByScript:  {nil, "", "v", 0, 1},
			cas.BySet:     {nil, "", "v", 1, 0},
			cas.BySetOnly: {nil, "", "v", 1, 0},
		}},
		{"another value holds the key", func() error { return rdb.Set(ctx, key, "x", time.Minute).Err() }, map[cas.Start]want{
			cas.ByScript:  {notObtained, "", "x", 0, 1},
			cas.BySet:     {notObtained, "", "x", 1, 1},
			cas.BySetOnly: {notObtained, "", "x", 1, 0},
		}},
		{"the key holds our value", func() error { return rdb.Set(ctx, key, "v", time.Second).Err() }, map[cas.Start]want{
			cas.ByScript: {nil, "", "v", 0, 1},
			cas.BySet:    {nil, "", "v", 1, 1},
			// Not for a fresh token: StartOf never chooses it for one
			// handed over (lock.WithToken).
			cas.BySetOnly: {notObtained, "", "v", 1, 0},
		}},
		{"the key is of another type", func() error { return rdb.HSet(ctx, key, "f", "v").Err() }, map[cas.Start]want{
			cas.ByScript: {nil, "WRONGTYPE", "", 0, 1},
			cas.BySet:    {nil, "WRONGTYPE", "", 1, 1},
			// The next attempt's script reports it.
			cas.BySetOnly: {notObtained, "", "", 1, 0},
		}},
	} {
		for _, start := range []cas.Start{cas.ByScript, cas.BySet, cas.BySetOnly} {
			w := tc.by[start]
			t.Run(fmt.Sprintf("%s/start %d", tc.name, start), func(t *testing.T) {
				rdb.Del(ctx, key)
				if err := tc.plant(); err != nil {
					t.Fatal(err)
				}
				c := &counting{Conn: goredis.New(rdb)}
				err := acquire(ctx, c, key, "v", time.Minute, start)
				switch {
				case w.errText != "":
					if err == nil || errors.Is(err, lock.ErrNotObtained) || !strings.Contains(err.Error(), w.errText) {
						t.Errorf("Acquire = %v, want a %s error", err, w.errText)
					}
				case !errors.Is(err, w.err):
					t.Errorf("Acquire = %v, want %v", err, w.err)
				case w.value != "":
					if got, _ := rdb.Get(ctx, key).Result(); got != w.value {
						t.Errorf("after Acquire, GET = %q, want %q", got, w.value)
					}
					if ttl, _ := rdb.PTTL(ctx, key).Result(); w.err == nil && ttl < 50*time.Second {
						t.Errorf("after Acquire, PTTL = %v, want about a minute", ttl)
					}
				}
				if c.sets != w.sets || c.scripts != w.scripts {
					t.Errorf("Acquire sent %d SETs and %d scripts, want %d and %d", c.sets, c.scripts, w.sets, w.scripts)
				}
			})
		}
	}
}

// TestStartOf: a retry runs the script alone; a first attempt starts with
// a bare SET, alone when its token is fresh and another attempt follows.
func TestStartOf(t *testing.T) {
	for _, tc := range []struct {
		r    strategy.Request
		want cas.Start
	}{
		{strategy.Request{Retry: true}, cas.ByScript},
		{strategy.Request{Retry: true, Again: true}, cas.ByScript},
		{strategy.Request{CallerToken: true}, cas.BySet},
		{strategy.Request{CallerToken: true, Again: true}, cas.BySet},
		{strategy.Request{}, cas.BySet},
		{strategy.Request{Again: true}, cas.BySetOnly},
	} {
		if got := cas.StartOf(tc.r); got != tc.want {
			t.Errorf("StartOf(Retry %v, Again %v, CallerToken %v) = %d, want %d", tc.r.Retry, tc.r.Again, tc.r.CallerToken, got, tc.want)
		}
	}
}
