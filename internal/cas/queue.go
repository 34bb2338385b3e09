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
//   - W, a hash of waiter id → "due:poll": the server time (ms) by which the
//     waiter must try again or be dropped, and its poll interval (ms); and
//     field "#", the ticket counter.
//
// A waiter at rank r (1 for the head) polls every r × poll, and the queue
// keeps it for 3 × r × poll + 50 ms (its patience, never past the caller's
// deadline): a waiter far back polls rarely, so the cost of waiting does not
// grow with the number of waiters. When the lock is released, the head is
// woken by a message (its id on the lock's channel, C = {K}:wake) and must
// claim within its poll + 50 ms or be dropped; when the head takes the lock,
// the next waiter is told it is now the head (its id + "+"), so that it
// polls every poll, and a lost wake-up costs it one poll at most. The
// scripts read the clock with TIME (effects replication, the only mode of
// Redis 7 and the default from 5), drop dead heads (prune), and keep Q and
// W alive as long as their most patient waiter; W goes when Q empties.

// Queue names the companion keys of a lock's wait queue, in the lock key's
// Cluster hash slot.
type Queue struct {
	Key, Q, W string
	Sharded   bool // publish with SPUBLISH (a Redis Cluster 7+), not PUBLISH
}

// NewQueue returns the queue of key; false when key has no companion names
// in its slot (see Companion), and its waiters can only poll.
func NewQueue(key string, sharded bool) (Queue, bool) {
	var names string // both in one allocation
	switch {
	case hasHashTag(key):
		names = key + ":q" + key + ":w"
	case strings.Contains(key, "}"):
		return Queue{}, false
	default:
		names = "{" + key + "}:q{" + key + "}:w"
	}
	n := len(names) / 2
	return Queue{Key: key, Q: names[:n], W: names[n:], Sharded: sharded}, true
}

// WakeChannelOf returns the channel on which the queue of key's lock wakes
// its waiters whose ids start with to + ".": those of one listener (a
// Strategy), so that a message reaches the one subscriber that waits for
// it, not every process that waits for the lock. It is in key's Cluster
// hash slot; false when key has none.
func WakeChannelOf(key, to string) (string, bool) { return Companion(key, "wake:"+to) }

// WakeChannel returns the lock's own channel, in key's Cluster hash slot
// (see Companion): where a strategy without a queue publishes its hints,
// and where the queue wakes a waiter whose id names no listener (see
// WakeChannelOf). False when key has none, and its waiters can only poll.
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

// hasHashTag reports whether Redis Cluster hashes only part of key (see
// hashTag).
func hasHashTag(key string) bool {
	_, ok := hashTag(key)
	return ok
}

// queueLib is the Lua that the queue scripts share. Its functions act on
// the queue Q, W, which are KEYS[2] and KEYS[3] unless the script sets
// them to another lock's (deleteKeysScript releases several). The last
// argument is 1 to publish with SPUBLISH, 0 with PUBLISH. A message for
// the waiter "to.id" goes to the channel of its listener, to (see
// WakeChannelOf), and one for a waiter with no "." in its id to the lock's
// channel (WakeChannel): Q's name with "wake" for its final "q". The
// queue's commands go through call, so a script that uses it must start
// with aclLib.
const queueLib = `local Q, W = KEYS[2], KEYS[3]
local function clock()
	local t = call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function entry(id)
	local e = call('HGET', W, id)
	if e then
		return tonumber(string.match(e, '^%d+')), tonumber(string.match(e, ':(%d+)$'))
	end
end
local function drop(id)
	call('ZREM', Q, id)
	call('HDEL', W, id)
end
local function prune(now)
	for _ = 1, 16 do
		local head = call('ZRANGE', Q, 0, 0)[1]
		if not head then
			return nil
		end
		local due = entry(head)
		if due and due > now then
			return head
		end
		drop(head)
	end
	return call('ZRANGE', Q, 0, 0)[1]
end
local function tidy()
	if call('EXISTS', Q) == 0 then
		call('DEL', W)
	end
end
local function publish(member, msg)
	local cmd = 'PUBLISH'
	if ARGV[#ARGV] == '1' then
		cmd = 'SPUBLISH'
	end
	local channel = string.sub(Q, 1, -2) .. 'wake'
	local to = string.match(member, '^([^.]+)%.')
	if to then
		channel = channel .. ':' .. to
	end
	redis.pcall(cmd, channel, msg)
end
local function wake(head, now)
	local due, poll = entry(head)
	if due and poll and now + poll + 50 < due then
		call('HSET', W, head, (now + poll + 50) .. ':' .. poll)
	end
	publish(head, head)
end
local function here(id, poll, now)
	local queued = call('ZSCORE', Q, id)
	if queued then
		call('HSET', W, id, (now + 1) .. ':' .. poll) -- here now: not to be pruned
	end
	return queued
end
local function claimed(id)
	drop(id)
	local nxt = call('ZRANGE', Q, 0, 0)[1]
	if nxt then
		publish(nxt, nxt .. '+')
	else
		call('DEL', W)
	end
end
local function enqueue(id, queued, poll, cap, now)
	if not queued then
		call('ZADD', Q, call('HINCRBY', W, '#', 1), id)
	end
	local rank = call('ZRANK', Q, id) + 1
	local keep = 3 * rank * poll + 50
	if cap > 0 and cap < keep then
		keep = cap
	end
	call('HSET', W, id, (now + keep) .. ':' .. poll)
	for _, k in ipairs({Q, W}) do
		if call('PTTL', k) < keep then
			call('PEXPIRE', k, keep)
		end
	end
	return rank
end
local function leave(key, id)
	local head = call('ZRANGE', Q, 0, 0)[1]
	drop(id)
	if head == id and call('EXISTS', key) == 0 then
		local now = clock()
		head = prune(now)
		if head then
			wake(head, now)
			return
		end
	end
	tidy()
end
`

var (
	// queuedScript is the acquire of the waiter ARGV[3], which polls every
	// ARGV[4] ms at the head, and whose deadline is ARGV[5] ms away (0:
	// none). It grants the lock when the key is free and the queue empty or
	// headed by the waiter, or the key already holds our value, ARGV[1];
	// with a fourth key, the fencing counter, it also increments it. It
	// replies {1, fence} when the lock is ours, and {0, rank, holder's
	// PTTL} when the waiter is queued.
	queuedScript = driver.NewScript(aclLib + queueLib + fenceLib + `local now = clock()
local id, poll, cap = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local queued = here(id, poll, now)
local head = prune(now)
local v = redis.call('GET', KEYS[1])
local ours = v == ARGV[1]
if ours then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not v and (not head or head == id) then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	ours = true
end
if ours then
	claimed(id)
	local fence = 0
	if #KEYS > 3 then
		fence = nextFence(KEYS[4])
	end
	return {1, fence}
end
local rank = enqueue(id, queued, poll, cap, now)
local pttl = 0
if v then
	pttl = redis.call('PTTL', KEYS[1])
elseif head then
	wake(head, now)
end
return {0, rank, pttl}`)

	// releaseScript deletes the key if it holds our value, ARGV[1], and
	// wakes the head of the queue. It touches the queue before it deletes
	// the key, so that a user whose ACL denies the queue is refused before
	// anything is written, and DeleteQueued can fall back to Delete. With no
	// queue, it is a compare-and-delete and one EXISTS: the queue's Lua is
	// not even run.
	releaseScript = ownerScript(aclLib + `if call('EXISTS', KEYS[2]) == 0 then
		return redis.call('DEL', KEYS[1])
	end
	` + queueLib + `local now = clock()
	local head = prune(now)
	redis.call('DEL', KEYS[1])
	if head then
		wake(head, now)
	end
	return 1`)

	// leaveScript takes the waiter ARGV[1] out of the queue, and wakes the
	// next head when it was the head and the key is free.
	leaveScript = driver.NewScript(aclLib + queueLib + `leave(KEYS[1], ARGV[1])
return 1`)

	// hintScript deletes the key if it holds our value, ARGV[1], and
	// publishes ARGV[2] on channel ARGV[3] (with SPUBLISH when ARGV[4] is
	// 1): the release of a strategy without a queue, whose message wakes
	// every waiter.
	hintScript = ownerScript(`redis.call('DEL', KEYS[1])
	local cmd = 'PUBLISH'
	if ARGV[4] == '1' then
		cmd = 'SPUBLISH'
	end
	redis.pcall(cmd, ARGV[3], ARGV[2])
	return 1`)
)

// shard is the last argument of the scripts that publish: 1 for SPUBLISH.
func shard(sharded bool) int {
	if sharded {
		return 1
	}
	return 0
}

// Enqueued is what an attempt of a queued waiter learnt when the lock was
// not free.
type Enqueued struct {
	Position  int           // the waiter's rank in the queue, 1 for the head
	HolderTTL time.Duration // the holder's remaining TTL; 0 when the key is free but another waiter is the head
}

// AcquireQueued is Acquire for the waiter id, which polls every poll at the
// head of the queue, and rank × poll behind it, and gives up after
// patience (0: when it is dropped): it grants the lock only when the queue
// is empty or id is its head, and queues id otherwise. With a fenceKey (not
// ""), it also issues a fencing token, as AcquireFenced does. It returns
// strategy.ErrNotObtained and where id stands when the lock was not
// granted. A user whose ACL denies the queue gets Acquire (or
// AcquireFenced), unqueued.
func AcquireQueued(ctx context.Context, c driver.Conn, q Queue, fenceKey, value, id string, ttl, poll, patience time.Duration) (fence int64, e Enqueued, err error) {
	keys := []string{q.Key, q.Q, q.W}
	if fenceKey != "" {
		keys = append(keys, fenceKey)
	}
	reply, err := resend(ctx, func() (any, error) {
		return queuedScript.Run(ctx, c, keys, value, ttl.Milliseconds(), id, max(poll.Milliseconds(), 1), max(patience.Milliseconds(), 0), shard(q.Sharded))
	})
	if denied(err) {
		if fenceKey != "" {
			fence, err = AcquireFenced(ctx, c, q.Key, fenceKey, value, ttl)
			return fence, e, err
		}
		return 0, e, Acquire(ctx, c, q.Key, value, ttl, ByScript)
	}
	if err != nil {
		return 0, e, err
	}
	n, _ := ints(reply)
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
	err := owned(call{releaseScript, []string{q.Key, q.Q, q.W}, []any{value, shard(q.Sharded)}}.run(ctx, c))
	if denied(err) {
		return Delete(ctx, c, q.Key, value)
	}
	return err
}

// Leave takes the waiter id out of key's queue, waking the next head if id
// was the head and the lock is free.
func Leave(ctx context.Context, c driver.Conn, q Queue, id string) error {
	_, err := call{leaveScript, []string{q.Key, q.Q, q.W}, []any{id, shard(q.Sharded)}}.run(ctx, c)
	return err
}

// DeleteHintingCall is a Delete call that also publishes a message that
// wakes every waiter of the lock (payload all) on channel: the release of a
// strategy without a queue. The publish is best effort: it fails silently
// where the server refuses it. Without scripts (RunPlain), it is sent after
// a Delete that deleted, as a command of its own.
func DeleteHintingCall(key, value, channel, all string, sharded bool) Call {
	publish := "PUBLISH"
	if sharded {
		publish = "SPUBLISH"
	}
	return Call{call: call{hintScript, []string{key}, []any{value, all, channel, shard(sharded)}}, reply: owned,
		op: opDelete, key: key, value: value, hint: hint{publish, channel, all}}
}
