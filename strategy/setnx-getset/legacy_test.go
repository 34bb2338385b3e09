package setnxgetset_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// legacyClient is a reference legacy client, written from the Redis SETNX
// documentation ("Design pattern: Locking with SETNX") and independent of
// the strategy's code: the value is now + timeout + 1 in seconds or
// milliseconds; a stale lock is taken over with GETSET, and is ours only if
// the old value is the expired one we read; release is DEL, after checking
// that our timeout has not passed. Like the documentation, it judges expiry
// with its own wall clock, and a losing GETSET overwrites the winner's value.
type legacyClient struct {
	rdb     *redis.Client
	ms      bool          // milliseconds instead of seconds
	timeout time.Duration // a whole number of seconds
	// parse reads a stored value; the default is strconv.ParseInt, which
	// rejects values it cannot read (the lock counts as held).
	parse func(string) (int64, error)
	skew  time.Duration // added to this client's clock
}

func (c legacyClient) now() int64 {
	t := time.Now().Add(c.skew)
	if c.ms {
		return t.UnixMilli()
	}
	return t.Unix()
}

func (c legacyClient) stamp() int64 {
	if c.ms {
		return c.now() + c.timeout.Milliseconds() + 1
	}
	return c.now() + int64(c.timeout/time.Second) + 1
}

func (c legacyClient) read(s string) (int64, error) {
	if c.parse != nil {
		return c.parse(s)
	}
	return strconv.ParseInt(s, 10, 64)
}

// tryLock makes one attempt, as the documentation describes it.
func (c legacyClient) tryLock(ctx context.Context, key string) (stamp int64, ok bool, err error) {
	stamp = c.stamp()
	if ok, err := c.rdb.Do(ctx, "SETNX", key, stamp).Bool(); err != nil || ok {
		return stamp, ok, err
	}
	cur, err := c.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil // gone: try again later
	}
	if err != nil {
		return 0, false, err
	}
	held, err := c.read(cur)
	if err != nil || held >= c.now() {
		return 0, false, nil // held (or unreadable: leave it)
	}
	stamp = c.stamp()
	old, err := c.rdb.Do(ctx, "GETSET", key, stamp).Text() // the command legacy clients send
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, err
	}
	return stamp, old == cur, nil
}

// lock retries tryLock with a short random sleep until ctx ends.
func (c legacyClient) lock(ctx context.Context, key string) (int64, error) {
	for {
		stamp, ok, err := c.tryLock(ctx, key)
		if err != nil || ok {
			return stamp, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(rand.N(4000)) * time.Microsecond):
		}
	}
}

// unlock deletes the key unless our timeout has passed.
func (c legacyClient) unlock(ctx context.Context, key string, stamp int64) error {
	if c.now() > stamp {
		return nil
	}
	return c.rdb.Del(ctx, key).Err()
}

// rubyToI parses like Ruby's String#to_i: the leading digits, or 0. Such a
// reader judges any value it cannot read as long expired.
func rubyToI(s string) (int64, error) {
	end := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(s)
	}
	n, _ := strconv.ParseInt(s[:end], 10, 64)
	return n, nil
}
