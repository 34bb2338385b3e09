package cas

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// The wait queue of a lock K is advisory: the lock key stays the only
// authority, and the queue only withholds a grant from a waiter that is not
// its head. It lives in two companion keys in K's Cluster slot (see Queue):
//
//   - Q, a sorted set of waiter ids, scored by ticket;
//   - W, a hash of waiter id → the server time (ms) by which the waiter must
//     try again or be dropped, and field "#", the ticket counter.
//
// Every script that needs the clock reads it with TIME (effects replication, the only mode
// of Redis 7 and the default from 5), drops dead heads (prune), and keeps
// Q and W alive as long as their most patient waiter. A release, and an
// attempt that finds the lock free with another waiter at the head, publish
// the head's id on the lock's channel, C; a lost message costs the head one
// timer. W goes when Q empties; each waiter's entry ages out on its own.

// Queue names the companion keys and channel of a lock's wait queue, all in
// the lock key's Cluster hash slot.
type Queue struct {
	Key, Q, W, Channel string
	Sharded            bool // publish with SPUBLISH (a Redis Cluster 7+), not PUBLISH
}

// NewQueue returns the queue of key; false when key has no companion names
// in its slot (see Companion), and its waiters can only poll.
func NewQueue(key string, sharded bool) (Queue, bool) {
	q, ok := Companion(key, "q")
	if !ok {
		return Queue{}, false
	}
	w, _ := Companion(key, "w")
	c, _ := WakeChannel(key)
	return Queue{Key: key, Q: q, W: w, Channel: c, Sharded: sharded}, true
}

// WakeChannel returns the channel on which releases of key's lock wake its
// waiters, in key's Cluster hash slot (see Companion); false when key has
// none, and its waiters can only poll.
func WakeChannel(key string) (string, bool) { return Companion(key, "wake") }

// Companion returns the name of a key (or channel) that goes with key, in
// its Cluster hash slot: key + ":" + suffix when key has a hash tag ({...}
// with something inside), "{" + key + "}:" + suffix otherwise. A key with no
// hash tag that contains '}' has no such name: false.
func Companion(key, suffix string) (string, bool) {
	switch {
	case hasHashTag(key):
		return key + ":" + suffix, true
	case strings.Contains(key, "}"):
		return "", false
	}
	return "{" + key + "}:" + suffix, true
}

// hasHashTag reports whether Redis Cluster hashes only part of key: from the
// first '{' to the first '}' after it, when that part is not empty.
func hasHashTag(key string) bool {
	open := strings.IndexByte(key, '{')
	return open >= 0 && strings.IndexByte(key[open+1:], '}') > 0
}

// queueLib is the Lua that the queue scripts share. KEYS[2] is Q, KEYS[3]
// W; the channel and the publish command are the last two arguments.
const queueLib = `local function clock()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
end
local function prune(now)
	for _ = 1, 16 do
		local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
		if not head then
			return nil
		end
		local due = tonumber(redis.call('HGET', KEYS[3], head))
		if due and due > now then
			return head
		end
		redis.call('ZREM', KEYS[2], head)
		redis.call('HDEL', KEYS[3], head)
	end
	return redis.call('ZRANGE', KEYS[2], 0, 0)[1]
end
local function tidy()
	if redis.call('EXISTS', KEYS[2]) == 0 then
		redis.call('DEL', KEYS[3])
	end
end
local function wake(head)
	if head then
		redis.pcall(ARGV[#ARGV], ARGV[#ARGV - 1], head)
	else
		tidy()
	end
end
`

var (
	// queuedScript is the acquire of a waiter, ARGV[3], that waits ARGV[4]
	// ms at most before it tries again. It grants the lock when the key is
	// free and the queue empty or headed by the waiter, or the key already
	// holds our value; with a fourth key, the fencing counter, it also
	// increments it. It replies {1, fence} when the lock is ours, and {0,
	// position, holder's PTTL} when the waiter is queued.
	queuedScript = driver.NewScript(queueLib + `local now, t = clock()
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then
	redis.call('HSET', KEYS[3], ARGV[3], now + tonumber(ARGV[4]))
end
local head = prune(now)
local v = redis.call('GET', KEYS[1])
local ours = v == ARGV[1]
if ours then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not v and (not head or head == ARGV[3]) then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	ours = true
end
if ours then
	redis.call('ZREM', KEYS[2], ARGV[3])
	redis.call('HDEL', KEYS[3], ARGV[3])
	tidy()
	local fence = 0
	if #KEYS > 3 then
		if redis.call('EXISTS', KEYS[4]) == 0 then
			redis.call('SET', KEYS[4], t[1] .. string.format('%06d', tonumber(t[2])))
		end
		fence = redis.call('INCR', KEYS[4])
	end
	return {1, fence}
end
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 0 then
	redis.call('ZADD', KEYS[2], redis.call('HINCRBY', KEYS[3], '#', 1), ARGV[3])
	redis.call('HSET', KEYS[3], ARGV[3], now + tonumber(ARGV[4]))
end
for i = 2, 3 do
	if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[4]) then
		redis.call('PEXPIRE', KEYS[i], ARGV[4])
	end
end
local pttl = 0
if v then
	pttl = redis.call('PTTL', KEYS[1])
else
	wake(head)
end
return {0, redis.call('ZRANK', KEYS[2], ARGV[3]) + 1, pttl}`)

	// releaseScript deletes the key if it holds our value, ARGV[1], and
	// wakes the head of the queue. It touches the queue before it deletes
	// the key, so that a user whose ACL denies the queue is refused before
	// anything is written, and DeleteQueued can fall back to Delete.
	releaseScript = ownerScript(queueLib + `local head
	if redis.call('EXISTS', KEYS[2]) == 1 then
		head = prune(clock())
	end
	redis.call('DEL', KEYS[1])
	if head then
		wake(head)
	end
	return 1`)

	// leaveScript takes the waiter ARGV[1] out of the queue, and wakes the
	// next head when it was the head and the key is free.
	leaveScript = driver.NewScript(queueLib + `local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if head == ARGV[1] and redis.call('EXISTS', KEYS[1]) == 0 then
	wake(prune(clock()))
else
	tidy()
end
return 1`)

	// hintScript deletes the key if it holds our value, ARGV[1], and
	// publishes ARGV[2] on channel ARGV[3]: the release of a strategy
	// without a queue, whose message wakes every waiter.
	hintScript = ownerScript(`redis.call('DEL', KEYS[1])
	redis.pcall(ARGV[#ARGV], ARGV[#ARGV - 1], ARGV[2])
	return 1`)
)

// publish returns the publish command of q's channel.
func (q Queue) publish() string {
	if q.Sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// Enqueued is what an attempt of a queued waiter learnt when the lock was
// not free.
type Enqueued struct {
	Position  int           // the waiter's place in the queue, 1 for the head
	HolderTTL time.Duration // the holder's remaining TTL; 0 when the key is free but another waiter is the head
}

// AcquireQueued is Acquire for the waiter id, which tries again within
// patience: it grants the lock only when the queue is empty or id is its
// head, and queues id otherwise. With a fenceKey (not ""), it also issues a
// fencing token, as AcquireFenced does. It returns strategy.ErrNotObtained
// and where id stands when the lock was not granted.
func AcquireQueued(ctx context.Context, c driver.Conn, q Queue, fenceKey, value, id string, ttl, patience time.Duration) (fence int64, e Enqueued, err error) {
	keys := []string{q.Key, q.Q, q.W}
	if fenceKey != "" {
		keys = append(keys, fenceKey)
	}
	reply, err := resend(ctx, func() (any, error) {
		return queuedScript.Run(ctx, c, keys, value, ttl.Milliseconds(), id, max(patience.Milliseconds(), 1), q.Channel, q.publish())
	})
	if err != nil {
		return 0, e, err
	}
	r, _ := reply.([]any)
	n := make([]int64, len(r))
	for i, v := range r {
		n[i], _ = v.(int64)
	}
	switch {
	case len(n) == 2 && n[0] == 1:
		return n[1], e, nil
	case len(n) == 3 && n[0] == 0:
		return 0, Enqueued{Position: int(n[1]), HolderTTL: time.Duration(max(n[2], 0)) * time.Millisecond}, strategy.ErrNotObtained
	}
	return 0, e, fmt.Errorf("queued acquire: got reply %v, want {1, fence} or {0, position, pttl}", reply)
}

// DeleteQueued is Delete that also wakes the head of key's queue. A user
// whose ACL does not allow the queue's keys or commands gets Delete.
func DeleteQueued(ctx context.Context, c driver.Conn, q Queue, value string) error {
	err := owned(call{releaseScript, []string{q.Key, q.Q, q.W}, []any{value, q.Channel, q.publish()}}.run(ctx, c))
	if err != nil && denied(err) {
		return Delete(ctx, c, q.Key, value)
	}
	return err
}

// Leave takes the waiter id out of key's queue, waking the next head if id
// was the head and the lock is free.
func Leave(ctx context.Context, c driver.Conn, q Queue, id string) error {
	_, err := call{leaveScript, []string{q.Key, q.Q, q.W}, []any{id, q.Channel, q.publish()}}.run(ctx, c)
	return err
}

// DeleteHinting is Delete that also publishes a message that wakes every
// waiter of the lock (payload all) on channel: the release of a strategy
// without a queue. The publish is best effort: it fails silently where the
// server refuses it.
func DeleteHinting(ctx context.Context, c driver.Conn, key, value, channel, all string, sharded bool) error {
	q := Queue{Channel: channel, Sharded: sharded}
	return owned(call{hintScript, []string{key}, []any{value, all, channel, q.publish()}}.run(ctx, c))
}

// denied reports whether err is the server's refusal of a script's command
// or key by ACL: "NOPERM ..." from Redis 7.2, "ERR The user executing the
// script can't ..." before.
func denied(err error) bool {
	return err != nil && (strings.HasPrefix(err.Error(), "NOPERM") || strings.Contains(err.Error(), "The user executing the script can't"))
}
