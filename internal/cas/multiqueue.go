package cas

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// The waiter of a lock of several keys queues in the FIFO queue of each key
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

// The modes of queuedKeysScript, ARGV[7].
const (
	takeMode    = "take"    // take every key, or queue
	reserveMode = "reserve" // head every key's queue, or queue
	holdMode    = "hold"    // take every key, keeping the places, or queue
	claimMode   = "claim"   // leave every queue, telling each next waiter that it heads it
	leaveMode   = "leave"   // leave every queue
)

// queuedKeysScript is the acquire of the waiter ARGV[4] of a lock of
// ARGV[3] = n keys, KEYS[1..n], with their queues: KEYS[n+2i-1] and
// KEYS[n+2i] are Q and W of key i; the fencing counters, when there are,
// follow, one per key. ARGV[1] is our value, ARGV[2] the TTL (ms), ARGV[5]
// the waiter's poll (ms), ARGV[6] its patience (ms, 0: none) and ARGV[7]
// the mode. It replies {1, fences...} when it took every key, {2} when it
// reserved them, left or claimed the queues, and {0, i, rank, PTTL} when
// the waiter waits in the queue of key i, at rank, for a holder with that
// PTTL (0 when the key is free and another waiter heads its queue).
var queuedKeysScript = driver.NewScript(aclLib + queueLib + fenceLib + `local value, ttl, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local id, poll, cap, mode = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local function use(i)
	Q, W = KEYS[n + 2 * i - 1], KEYS[n + 2 * i]
end
if mode == 'claim' or mode == 'leave' then
	for i = 1, n do
		use(i)
		if call('ZSCORE', Q, id) then
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
		if queued[i] and mode == 'take' then
			claimed(id)
		end
	end
	local reply = {1}
	for i = 3 * n + 1, #KEYS do
		reply[#reply + 1] = nextFence(KEYS[i])
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
return {0, busy, rank, pttl}`)

// AcquireKeysQueued is AcquireKeys for the waiter id of a lock of several
// keys, with their queues qs (one per key, in one slot with them): it
// takes every key when each is free and the waiter may take it (its queue
// is empty or headed by the waiter), and queues the waiter otherwise, as
// the comment above says. It polls every poll, and gives up after
// patience (0: when it is dropped). When it queued the waiter, it returns
// a *strategy.KeyError that names the key whose queue the waiter waits in
// and wraps strategy.ErrNotObtained, with the waiter's place there. A user
// whose ACL does not allow the queues gets AcquireKeys.
func AcquireKeysQueued(ctx context.Context, c driver.Conn, keys []string, qs []Queue, fenceKeys []string, value, id string,
	ttl, poll, patience time.Duration,
) (fences []int64, e Enqueued, err error) {
	return Waiter{id, poll, patience}.run(ctx, c, takeMode, keys, qs, fenceKeys, value, ttl)
}

// ErrNoQueue is the error of a Waiter's call whose user the ACL does not
// allow the queues: its caller polls instead.
var ErrNoQueue = errors.New("the ACL does not allow the wait queues")

// A Waiter is the waiter of a lock of several keys in several Cluster
// slots, which keeps its places in the queues of each slot's keys (a
// group): see the comment at the top of this file.
type Waiter struct {
	ID             string        // the waiter's id in the queues
	Poll, Patience time.Duration // as AcquireKeysQueued's
}

// Reserve makes the waiter head the queue of each of keys, a group whose
// queues are qs, taking nothing, if it may take every key; and otherwise
// queues it as AcquireKeysQueued does, with the same error.
func (w Waiter) Reserve(ctx context.Context, c driver.Conn, keys []string, qs []Queue, ttl time.Duration) (Enqueued, error) {
	_, e, err := w.run(ctx, c, reserveMode, keys, qs, nil, "", ttl)
	return e, err
}

// Take takes every key of a group that the waiter reserved, as
// AcquireKeysQueued does, but keeps the waiter's places in their queues:
// Claim takes it out once every group is taken.
func (w Waiter) Take(ctx context.Context, c driver.Conn, keys []string, qs []Queue, fenceKeys []string, value string, ttl time.Duration) ([]int64, Enqueued, error) {
	return w.run(ctx, c, holdMode, keys, qs, fenceKeys, value, ttl)
}

// Claim takes the waiter out of the queues of a group it took, telling
// each next waiter that it heads the queue.
func (w Waiter) Claim(ctx context.Context, c driver.Conn, keys []string, qs []Queue) error {
	_, _, err := w.run(ctx, c, claimMode, keys, qs, nil, "", 0)
	return err
}

// Leave takes the waiter out of the queues of a group, as cas.Leave does
// for one key.
func (w Waiter) Leave(ctx context.Context, c driver.Conn, keys []string, qs []Queue) error {
	_, _, err := w.run(ctx, c, leaveMode, keys, qs, nil, "", 0)
	return err
}

// run runs queuedKeysScript in mode.
func (w Waiter) run(ctx context.Context, c driver.Conn, mode string, keys []string, qs []Queue, fenceKeys []string, value string, ttl time.Duration) (fences []int64, e Enqueued, err error) {
	all := make([]string, 0, 4*len(keys))
	all = append(all, keys...)
	for _, q := range qs {
		all = append(all, q.Q, q.W)
	}
	all = append(all, fenceKeys...)
	n, err := runInts(ctx, c, queuedKeysScript, all, value, ttl.Milliseconds(), len(keys), w.ID,
		max(w.Poll.Milliseconds(), 1), max(w.Patience.Milliseconds(), 0), mode, shard(len(qs) > 0 && qs[0].Sharded))
	if denied(err) && mode != takeMode {
		return nil, e, ErrNoQueue
	}
	if denied(err) {
		fences, e.HolderTTL, err = AcquireKeys(ctx, c, keys, fenceKeys, value, ttl)
		return fences, e, err
	}
	switch {
	case err != nil:
		return nil, e, err
	case len(n) == 1+len(fenceKeys) && n[0] == 1, len(n) == 1 && n[0] == 2 && mode != takeMode && mode != holdMode:
		return n[1:], e, nil
	case len(n) == 4 && n[0] == 0 && 1 <= n[1] && n[1] <= int64(len(keys)):
		e = Enqueued{Position: int(n[2]), HolderTTL: time.Duration(max(n[3], 0)) * time.Millisecond}
		return nil, e, &strategy.KeyError{Key: keys[n[1]-1], Err: strategy.ErrNotObtained}
	}
	return nil, e, fmt.Errorf("queued acquire of %d keys (%s): got reply %v, want {1, fences...}, {2} or {0, key, rank, pttl}", len(keys), mode, n)
}
