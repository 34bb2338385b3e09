package cas_test

import (
	"context"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
)

// The operations that the tests run on one key, or several, with scripts,
// each one Call run by a Server over c.

func run(ctx context.Context, c driver.Conn, call cas.Call) (cas.Result, error) {
	return cas.Server{Conn: c}.Run(ctx, call)
}

func acquire(ctx context.Context, c driver.Conn, key, value string, ttl time.Duration, start cas.Start) error {
	_, err := run(ctx, c, cas.Acquire(cas.Lock{Key: key, Value: value, TTL: ttl, Start: start}))
	return err
}

func acquireFenced(ctx context.Context, c driver.Conn, key, fence, value string, ttl time.Duration) (int64, error) {
	r, err := run(ctx, c, cas.Acquire(cas.Lock{Key: key, Value: value, TTL: ttl, Fences: []string{fence}}))
	if err != nil {
		return 0, err
	}
	return r.Fences[0], nil
}

// acquireQueued is the attempt of the waiter id in q, fenced when fence is
// not "".
func acquireQueued(ctx context.Context, c driver.Conn, q cas.Queue, fence, value, id string, ttl, poll, patience time.Duration) (int64, cas.Result, error) {
	l := cas.Lock{Key: q.Key, Value: value, TTL: ttl, Sharded: q.Sharded, Waiter: cas.Waiter{ID: id, Poll: poll, Patience: patience}}
	if fence != "" {
		l.Fences = []string{fence}
	}
	r, err := run(ctx, c, cas.Acquire(l))
	if r.Fences != nil {
		return r.Fences[0], r, err
	}
	return 0, r, err
}

func acquireKeysGuarded(ctx context.Context, c driver.Conn, keys []string, guard, value string, ttl, quarantine time.Duration) (time.Duration, error) {
	r, err := run(ctx, c, cas.Acquire(cas.Lock{Key: keys[0], Keys: keys, Value: value, TTL: ttl, GuardKey: guard, Quarantine: quarantine}))
	return r.HolderTTL, err
}

func deleteKey(ctx context.Context, c driver.Conn, key, value string) error {
	_, err := run(ctx, c, cas.Delete(cas.Lock{Key: key, Value: value}))
	return err
}

func deleteQueued(ctx context.Context, c driver.Conn, q cas.Queue, value string) error {
	_, err := run(ctx, c, cas.Delete(cas.Lock{Key: q.Key, Value: value, Queued: true, Sharded: q.Sharded}))
	return err
}

func leave(ctx context.Context, c driver.Conn, q cas.Queue, id string) error {
	return cas.Waiter{ID: id}.Leave(ctx, c, cas.Lock{Key: q.Key, Sharded: q.Sharded}, false)
}

func pexpire(ctx context.Context, c driver.Conn, key, value string, ttl time.Duration) error {
	_, err := run(ctx, c, cas.PExpire(cas.Lock{Key: key, Value: value, TTL: ttl}))
	return err
}

func pttl(ctx context.Context, c driver.Conn, key, value string) (time.Duration, error) {
	r, err := run(ctx, c, cas.PTTL(cas.Lock{Key: key, Value: value}))
	return r.TTL, err
}

func set(ctx context.Context, c driver.Conn, key, value, next string, ttl time.Duration) error {
	_, err := run(ctx, c, cas.Set(cas.Lock{Key: key, Value: value, TTL: ttl}, next))
	return err
}

func inspect(ctx context.Context, c driver.Conn, key, fence string, queue cas.Queue) (cas.Reading, error) {
	return cas.Server{Conn: c}.Inspect(ctx, key, fence, queue)
}
