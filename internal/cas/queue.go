package cas

import (
	"context"
	"errors"
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
//   - W, a hash of waiter id → "due:joined:poll": the server time (ms) by
//     which the waiter must try again or be dropped, the server time (ms)
//     when it joined the queue, and its poll interval (ms); and field "#",
//     the ticket counter. An entry "due:poll", which an earlier version
//     wrote, has no time of joining; the scripts read both.
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

// companions are the suffixes of the companion keys (see Companion) that
// the strategies keep beside a lock's key: its queue's, its fencing
// counters, and a shared lock's state.
var companions = []string{"q", "w", "fence", "fences", "shared"}

// IsCompanion reports whether key is named as one of another key's
// companion keys (a queue, a fencing counter, a shared lock's state, the
// mark of a Break), which a listing of locks skips. The name alone tells: a lock of a key named
// so, such as {orders}:q (the name of the queue of {orders}), is taken for
// one.
func IsCompanion(key string) bool {
	for _, s := range companions {
		if base, ok := strings.CutSuffix(key, ":"+s); ok && hasHashTag(base) {
			return true
		}
	}
	return isBrokenMark(key)
}

// hasHashTag reports whether Redis Cluster hashes only part of key (see
// hashTag).
func hasHashTag(key string) bool {
	_, ok := hashTag(key)
	return ok
}

// queueLib is the Lua that the queue scripts share. Its functions act on
// the queue Q, W, which are KEYS[2] and KEYS[3] unless the script sets
// them to another lock's (queuedScript and deleteScript act on several).
// The last argument is 1 to publish with SPUBLISH, 0 with PUBLISH, unless
// the script sets sharded itself. A message for
// the waiter "to.id" goes to the channel of its listener, to (see
// WakeChannelOf), and one for a waiter with no "." in its id to the lock's
// channel (WakeChannel): Q's name with "wake" for its final "q". The
// queue's commands go through call, so a script that uses it must start
// with aclLib.
const queueLib = `local Q, W = KEYS[2], KEYS[3]
local sharded = ARGV[#ARGV] == '1'
local function clock()
	local t = call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function entry(id)
	local e = call('HGET', W, id)
	if e then
		return tonumber(string.match(e, '^%d+')), tonumber(string.match(e, ':(%d+)$')), string.match(e, '^%d+:(%d+):') or ''
	end
end
local function put(id, due, poll, joined)
	call('HSET', W, id, due .. ':' .. joined .. ':' .. poll)
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
	if sharded then
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
	local due, poll, joined = entry(head)
	if due and poll and now + poll + 50 < due then
		put(head, now + poll + 50, poll, joined)
	end
	publish(head, head)
end
local function here(id, poll, now)
	local queued = call('ZSCORE', Q, id)
	if queued then
		local _, _, joined = entry(id)
		put(id, now + 1, poll, joined or now) -- here now: not to be pruned
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
	local joined = now
	if queued then
		local _, _, was = entry(id)
		joined = was or now
	else
		call('ZADD', Q, call('HINCRBY', W, '#', 1), id)
	end
	local rank = call('ZRANK', Q, id) + 1
	local keep = 3 * rank * poll + 50
	if cap > 0 and cap < keep then
		keep = cap
	end
	put(id, now + keep, poll, joined)
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

// The waiter of a lock queues in the FIFO queue of each key (a lock of one
// key is one of several with one: the same script, queuedScript). It queues
// in the lock's order, one key at a time, and keeps its place: it joins the
// queue of the first key that it cannot take (held, or free but promised
// to another waiter, the head of its queue), after the queues of the keys
// before it, which it heads, so that no later waiter takes them. It takes
// every key once each is free and it heads each queue. A waiter holds its
// places only in the lock's order, so no two waiters can each hold a place
// the other waits for, and each queue is FIFO, so none waits for ever while
// the keys are released. Queueing behind another waiter at a key, it leaves
// the queues of the keys after it, which it may have joined in an earlier
// attempt.
//
// On a Cluster, a lock's keys in several slots take one script per slot,
// in the order of the slots (see strategy/single), so the waiter's places
// are kept slot by slot: it reserves the keys of each slot in turn (heads
// their queues, takes nothing), stopping at the first slot with a key it
// cannot take, and leaving the queues of the slots after it; once every
// slot is reserved, it takes the keys slot by slot, keeping its places,
// and then leaves the queues. A key that a client outside the queues (one
// that does not wait, or polls) took in between undoes the slots taken,
// and the waiter, which kept its places, tries again.

// The modes of queuedScript, ARGV[7].
const (
	takeMode    = "take"    // take every key, or queue
	reserveMode = "reserve" // head every key's queue, or queue
	holdMode    = "hold"    // take every key, keeping the places, or queue
	claimMode   = "claim"   // leave every queue, telling each next waiter that it heads it
	leaveMode   = "leave"   // leave every queue
)

// queuedScript is the acquire of the waiter ARGV[4] of a lock of ARGV[3] =
// n keys, KEYS[1..n], with their queues: KEYS[n+2i-1] and KEYS[n+2i] are Q
// and W of key i; the fencing counters, when there are,
// follow, one per key. ARGV[1] is our value, ARGV[2] the TTL (ms), ARGV[5]
// the waiter's poll (ms), ARGV[6] its patience (ms, 0: none), ARGV[7]
// the mode and ARGV[8] the counters' lifetime (ms, 0: none). It replies {1, fences...} when it took every key, {2} when it
// reserved them, left or claimed the queues, and {0, i, rank, PTTL} when
// the waiter waits in the queue of key i, at rank, for a holder with that
// PTTL (0 when the key is free and another waiter heads its queue). A
// lock of one key takes the waiter out of its queue whenever it takes the
// key, and leaves the queue without looking for the waiter first.
var queuedScript = driver.NewScript(aclLib + queueLib + fenceLib + `local value, ttl, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local id, poll, cap, mode, fenceTTL = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8]
local function use(i)
	Q, W = KEYS[n + 2 * i - 1], KEYS[n + 2 * i]
end
if mode == 'claim' or mode == 'leave' then
	for i = 1, n do
		use(i)
		if (n == 1 and mode == 'leave') or call('ZSCORE', Q, id) then
			if mode == 'claim' then
				claimed(id)
			else
				leave(KEYS[i], id)
			end
		end
	end
	return {2}
end
local now = clock()
local vals, heads, queued, busy = {}, {}, {}, nil
for i = 1, n do
	use(i)
	queued[i] = here(id, poll, now)
	heads[i] = prune(now)
	local v = redis.call('GET', KEYS[i])
	vals[i] = v
	if not busy and v ~= value and (v or (heads[i] and heads[i] ~= id)) then
		busy = i
	end
end
if not busy and mode == 'reserve' then
	for i = 1, n do
		use(i)
		enqueue(id, queued[i], poll, cap, now)
	end
	return {2}
end
if not busy then
	for i = 1, n do
		if vals[i] == value then
			redis.call('PEXPIRE', KEYS[i], ttl)
		else
			redis.call('SET', KEYS[i], value, 'PX', ttl)
		end
		use(i)
		if (queued[i] or n == 1) and mode == 'take' then
			claimed(id)
		end
	end
	local reply = {1}
	for i = 3 * n + 1, #KEYS do
		reply[#reply + 1] = nextFence(KEYS[i], fenceTTL)
	end
	return reply
end
local rank, pttl = 0, 0
for i = 1, n do
	use(i)
	if i <= busy then
		rank = enqueue(id, queued[i], poll, cap, now)
	elseif queued[i] then
		leave(KEYS[i], id)
	end
end
use(busy)
if vals[busy] then
	pttl = redis.call('PTTL', KEYS[busy])
elseif heads[busy] then
	wake(heads[busy], now)
end
local last = call('ZRANGE', Q, -1, -1)[1]
return {0, busy, rank, pttl, vals[busy], last and call('ZRANK', Q, last) + 1 or 0}`)

// shard is the last argument of the scripts that publish: 1 for SPUBLISH.
func shard(sharded bool) int {
	if sharded {
		return 1
	}
	return 0
}

// ErrNoQueue is the error of a Waiter's Hold whose user
// the ACL does not allow the queues: its caller polls instead.
var ErrNoQueue = errors.New("the ACL does not allow the wait queues")

// A Waiter is a waiter in the queues of a lock's keys: with Lock.Waiter, an
// acquisition queues it (see Acquire). A lock of several keys in several
// Cluster slots keeps its places in the queues of each slot's keys (a
// group) with Hold and Leave: see the comment at the top of this
// part of the file.
type Waiter struct {
	ID             string        // the waiter's id in the queues
	Poll, Patience time.Duration // it polls every Poll at the head of a queue, rank × Poll behind it, and gives up after Patience (0: when it is dropped)
}

// queueKeys returns the keys of the queued acquisition of l: its keys,
// their queues (Q, W each) and its fencing counters.
func (l Lock) queueKeys() []string {
	n := max(len(l.Keys), 1)
	all := l.keysAnd(2*n + len(l.Fences))
	for _, k := range all[:n] {
		q, _ := NewQueue(k, l.Sharded)
		all = append(all, q.Q, q.W)
	}
	return append(all, l.Fences...)
}

// args returns the arguments of queuedScript for l in mode.
func (w Waiter) args(l Lock, mode string) []any {
	return []any{l.Value, l.TTL.Milliseconds(), max(len(l.Keys), 1), w.ID,
		max(w.Poll.Milliseconds(), 1), max(w.Patience.Milliseconds(), 0), mode, fenceMS(l.FenceTTL), shard(l.Sharded)}
}

// Hold keeps the waiter's places in the queues of l's keys, a group of a
// lock over several Cluster slots: reserving (taking false), it makes the
// waiter head the queue of each key, taking nothing, if it may take every
// key; taking, it takes every key of a group that it reserved, as Acquire
// does, and keeps its places, which Leave, claiming, ends once every group
// is taken. Either queues the waiter, as Acquire does, with the same error,
// when it may not.
func (w Waiter) Hold(ctx context.Context, c driver.Conn, l Lock, taking bool) (Result, error) {
	mode := holdMode
	if !taking {
		mode, l.Value = reserveMode, ""
	}
	return w.run(ctx, c, l, mode, l.queueKeys(), w.args(l, mode))
}

// Leave takes the waiter out of the queues of l's keys, waking the next
// head of a queue that it headed when that key is free; or, claiming,
// after it took them, telling each next waiter that it heads the queue.
func (w Waiter) Leave(ctx context.Context, c driver.Conn, l Lock, claiming bool) error {
	mode := leaveMode
	if claiming {
		mode = claimMode
	}
	l.Value, l.TTL, l.Fences = "", 0, nil
	_, err := w.run(ctx, c, l, mode, l.queueKeys(), w.args(l, mode))
	return err
}

// run runs queuedScript in mode, over keys with args, for l.
func (w Waiter) run(ctx context.Context, c driver.Conn, l Lock, mode string, keys []string, args []any) (Result, error) {
	reply, err := resend(ctx, func() (any, error) { return queuedScript.Run(ctx, c, keys, args...) })
	n, holder, waiters := queuedReply(reply)
	if denied(err) && (mode == reserveMode || mode == holdMode) {
		return Result{}, ErrNoQueue
	}
	nk := max(len(l.Keys), 1)
	switch {
	case err != nil:
		return Result{}, err
	case len(n) == 1+len(l.Fences) && n[0] == 1:
		if len(n) == 1 {
			return Result{}, nil
		}
		return Result{Fences: n[1:]}, nil
	case len(n) == 1 && n[0] == 2 && mode != takeMode && mode != holdMode:
		return Result{}, nil
	case len(n) == 4 && n[0] == 0 && 1 <= n[1] && n[1] <= int64(nk):
		r := Result{Position: int(n[2]), HolderTTL: time.Duration(max(n[3], 0)) * time.Millisecond, Holder: holder, Waiters: waiters}
		if l.Keys == nil {
			return r, strategy.ErrNotObtained
		}
		return r, &strategy.KeyError{Key: l.Keys[n[1]-1], Err: strategy.ErrNotObtained}
	}
	return Result{}, fmt.Errorf("queued acquire of %d keys (%s): got reply %v (of %T), want {1, fences...}, {2} or {0, key, rank, pttl, holder, waiters}", nk, mode, n, reply)
}

// queuedReply reads a reply of queuedScript: its integers, and for a
// refusal ({0, key, rank, pttl, holder, waiters}) the first four, the
// holder's value ("" when the key was free) and the length of the queue.
func queuedReply(reply any) (n []int64, holder string, waiters int) {
	if r, ok := reply.([]any); ok && len(r) == 6 {
		holder, _ = r[4].(string)
		w, _ := r[5].(int64)
		reply, waiters = r[:4], int(w)
	}
	n, _ = ints(reply)
	return n, holder, waiters
}
