package cas

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// The scripts of a lock of several keys (strategy.Multi) take, extend, read
// and delete every key of one server, or of one Cluster slot, in one call:
// KEYS are the lock's keys, then the companions that the script needs (the
// fencing counters, the wait queues), all declared, none built in Lua. They
// compare each key's whole value, as the scripts of one key do, and reply
// with one number per key.

// acquireKeysBody returns the Lua that sets the first ARGV[3] keys to
// ARGV[1] for ARGV[2] ms, if each is free or holds ARGV[1] already (then it
// resets its TTL), and writes nothing otherwise. The keys after them, up to
// the index last (a Lua expression), are fencing counters, one per key,
// each incremented (see fenceLib). It replies {1, fences...}, or {0, i,
// PTTL} for the first key i that another value holds. GET fails with
// WRONGTYPE on a key of another type, before anything is written.
func acquireKeysBody(last string) string {
	return `local n = tonumber(ARGV[3])
local free = {}
for i = 1, n do
	local v = redis.call('GET', KEYS[i])
	if v and v ~= ARGV[1] then
		return {0, i, redis.call('PTTL', KEYS[i])}
	end
	free[i] = not v
end
for i = 1, n do
	if free[i] then
		redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
	else
		redis.call('PEXPIRE', KEYS[i], ARGV[2])
	end
end
local reply = {1}
for i = n + 1, ` + last + ` do
	reply[#reply + 1] = nextFence(KEYS[i])
end
return reply`
}

var (
	// acquireKeysScript is acquireKeysBody with every key after the lock's
	// a fencing counter.
	acquireKeysScript = driver.NewScript(fenceLib + acquireKeysBody(`#KEYS`))

	// guardedKeysScript is acquireKeysBody, without fencing counters, on a
	// node that has been up for ARGV[4] ms (see guard), by the record in the
	// last key, after the lock's. It replies {restarting} on a younger node.
	guardedKeysScript = driver.NewScript(guard(`KEYS[#KEYS]`, `ARGV[4]`, `{`+strconv.Itoa(restarting)+`}`) +
		acquireKeysBody(`n`))

	pexpireKeysScript = ownerKeysScript(`redis.call('PEXPIRE', KEYS[i], ARGV[2])`)
	pttlKeysScript    = ownerKeysScript(`redis.call('PTTL', KEYS[i])`)

	// hintKeysScript deletes each of the lock's keys that holds our value,
	// ARGV[1], and publishes ARGV[2] on that key's channel, ARGV[3 + i] (none
	// when it is empty), with SPUBLISH when ARGV[3] is 1: hintScript's
	// release for each key. It replies 1, noKey or otherOwner for each.
	hintKeysScript = driver.NewScript(keyStateLib + `local publish = 'PUBLISH'
if ARGV[3] == '1' then
	publish = 'SPUBLISH'
end
local state = {}
for i = 1, #KEYS do
	state[i] = keyState(i)
	if state[i] == 1 then
		redis.call('DEL', KEYS[i])
		if ARGV[3 + i] ~= '' then
			redis.pcall(publish, ARGV[3 + i], ARGV[2])
		end
	end
end
return state`)

	// deleteKeysScript deletes each of the lock's keys that holds our value,
	// ARGV[1], and replies 1, noKey or otherOwner for each. ARGV[2] has one
	// character per lock key, "1" for a key whose queue (Q, W) follows the
	// lock's keys in KEYS, in order, and "0" for one without: a released
	// key's queue wakes its head, as releaseScript does. It touches every
	// queue before it deletes a key, so that a user whose ACL denies the
	// queues is refused before anything is written, and DeleteKeysQueued
	// can fall back to DeleteKeys.
	deleteKeysScript = driver.NewScript(aclLib + queueLib + keyStateLib + `local mask = ARGV[2]
local n = #mask
local state, queue, heads, now = {}, {}, {}, nil
local j = n + 1
for i = 1, n do
	if string.sub(mask, i, i) == '1' then
		queue[i] = j
		j = j + 2
	end
end
for i = 1, n do
	state[i] = keyState(i)
	if state[i] == 1 and queue[i] then
		Q, W = KEYS[queue[i]], KEYS[queue[i] + 1]
		if call('EXISTS', Q) == 1 then
			now = now or clock()
			heads[i] = prune(now)
		end
	end
end
for i = 1, n do
	if state[i] == 1 then
		redis.call('DEL', KEYS[i])
		if heads[i] then
			Q, W = KEYS[queue[i]], KEYS[queue[i] + 1]
			wake(heads[i], now)
		end
	end
end
return state`)
)

// keyStateLib defines keyState(i): 1 when KEYS[i] holds our value,
// ARGV[1]; otherOwner when it holds another; noKey when it is missing.
var keyStateLib = `local function keyState(i)
	local v = redis.call('GET', KEYS[i])
	if v == ARGV[1] then
		return 1
	elseif v then
		return ` + strconv.Itoa(otherOwner) + `
	end
	return ` + strconv.Itoa(noKey) + `
end
`

// ownerKeysScript returns the script that, when every key holds our value
// (ARGV[1]), evaluates body for each key KEYS[i] and replies with the
// results; and otherwise changes nothing and replies, per key, 1 for ours,
// noKey or otherOwner. body must never be noKey or otherOwner.
func ownerKeysScript(body string) *driver.Script {
	return driver.NewScript(keyStateLib + `local state, lost = {}, false
for i = 1, #KEYS do
	state[i] = keyState(i)
	lost = lost or state[i] ~= 1
end
if lost then
	return state
end
for i = 1, #KEYS do
	state[i] = ` + body + `
end
return state`)
}

// AcquireKeys sets each of keys to value for ttl, if each is free or holds
// value already (a retry, or lock.WithToken: its TTL is reset), and none
// otherwise, in one script. With fenceKeys, one counter per key, it also
// increments each, as AcquireFenced does, and returns their new values, in
// the order of keys. When another value holds a key, it returns a
// *strategy.KeyError that names the first such key and wraps
// strategy.ErrNotObtained, and that key's remaining TTL. On a Cluster, keys
// and fenceKeys must be in one slot.
func AcquireKeys(ctx context.Context, c driver.Conn, keys, fenceKeys []string, value string, ttl time.Duration) (fences []int64, holderTTL time.Duration, err error) {
	all := keys
	if fenceKeys != nil {
		all = append(append(make([]string, 0, 2*len(keys)), keys...), fenceKeys...)
	}
	return acquireKeys(ctx, c, acquireKeysScript, keys, all, len(fenceKeys), value, ttl.Milliseconds(), len(keys))
}

// AcquireKeysGuarded is AcquireKeys, without fencing, on a node that has
// been up, by guardKey's record, for at least quarantine (see
// AcquireGuardedCall); on a younger node it returns ErrRestarting, and
// writes nothing but the record. On a Cluster, keys and guardKey must be
// in one slot.
func AcquireKeysGuarded(ctx context.Context, c driver.Conn, keys []string, guardKey, value string, ttl, quarantine time.Duration) (holderTTL time.Duration, err error) {
	all := append(append(make([]string, 0, len(keys)+1), keys...), guardKey)
	_, holderTTL, err = acquireKeys(ctx, c, guardedKeysScript, keys, all, 0, value, ttl.Milliseconds(), len(keys), quarantine.Milliseconds())
	return holderTTL, err
}

// acquireKeys runs s, a script of acquireKeysBody over all, which starts
// with keys and has fences fencing counters, and turns its reply into the
// results of AcquireKeys, or ErrRestarting (see guard).
func acquireKeys(ctx context.Context, c driver.Conn, s *driver.Script, keys, all []string, fences int, args ...any) ([]int64, time.Duration, error) {
	n, err := runInts(ctx, c, s, all, args...)
	switch {
	case err != nil:
		return nil, 0, err
	case len(n) == 1+fences && n[0] == 1:
		return n[1:], 0, nil
	case len(n) == 1 && n[0] == restarting:
		return nil, 0, ErrRestarting
	case len(n) == 3 && n[0] == 0 && 1 <= n[1] && n[1] <= int64(len(keys)):
		held := &strategy.KeyError{Key: keys[n[1]-1], Err: strategy.ErrNotObtained}
		return nil, time.Duration(max(n[2], 0)) * time.Millisecond, held
	}
	return nil, 0, fmt.Errorf("acquire of %d keys: got reply %v, want {1, fences...} or {0, key, pttl}", len(keys), n)
}

// PExpireKeys sets the TTL of each of keys to ttl if every one holds value,
// and changes nothing otherwise; it then returns the errors of the keys
// that did not (see keyErrors).
func PExpireKeys(ctx context.Context, c driver.Conn, keys []string, value string, ttl time.Duration) error {
	_, err := ownedKeys(ctx, c, pexpireKeysScript, keys, keys, value, ttl.Milliseconds())
	return err
}

// PTTLKeys returns the least TTL of keys if every one holds value, ignoring
// those without an expiry (negative when none has one), and otherwise the
// errors of those that do not (see keyErrors).
func PTTLKeys(ctx context.Context, c driver.Conn, keys []string, value string) (time.Duration, error) {
	ms, err := ownedKeys(ctx, c, pttlKeysScript, keys, keys, value)
	if err != nil {
		return 0, err
	}
	least := int64(-1)
	for _, m := range ms {
		if m >= 0 && (least < 0 || m < least) {
			least = m
		}
	}
	return time.Duration(least) * time.Millisecond, nil
}

// DeleteKeys deletes each of keys that holds value, and returns the errors
// of those that do not (see keyErrors).
func DeleteKeys(ctx context.Context, c driver.Conn, keys []string, value string) error {
	return deleteKeys(ctx, c, keys, nil, value, false)
}

// DeleteKeysQueued is DeleteKeys that also wakes the head of the queue of
// each key it deletes, as DeleteQueued does; a key with no queue (see
// NewQueue) is only deleted. A user whose ACL does not allow the queues
// gets DeleteKeys.
func DeleteKeysQueued(ctx context.Context, c driver.Conn, keys []string, value string, sharded bool) error {
	err := deleteKeys(ctx, c, keys, queuesOf(keys, sharded), value, sharded)
	if denied(err) {
		return DeleteKeys(ctx, c, keys, value)
	}
	return err
}

// DeleteKeysHinting is DeleteKeys that also publishes all on the channel
// of each key it deletes, channels[i] for keys[i] ("" for none), as
// DeleteHintingCall does for one key: the release of a strategy without a
// queue. The publish is best effort. On a Cluster, keys and channels must
// be in one slot.
func DeleteKeysHinting(ctx context.Context, c driver.Conn, keys, channels []string, value, all string, sharded bool) error {
	args := append(make([]any, 0, 3+len(channels)), value, all, shard(sharded))
	for _, ch := range channels {
		args = append(args, ch)
	}
	_, err := ownedKeys(ctx, c, hintKeysScript, keys, keys, args...)
	return err
}

// queuesOf returns the queues of keys, with ok false for a key that has
// none.
func queuesOf(keys []string, sharded bool) []Queue {
	qs := make([]Queue, len(keys))
	for i, k := range keys {
		qs[i], _ = NewQueue(k, sharded)
	}
	return qs
}

// deleteKeys runs deleteKeysScript over keys and, when qs is not nil, the
// queues of keys (a zero Queue for a key without one).
func deleteKeys(ctx context.Context, c driver.Conn, keys []string, qs []Queue, value string, sharded bool) error {
	all, mask := keys, []byte(strings.Repeat("0", len(keys)))
	if qs != nil {
		all = append(make([]string, 0, 3*len(keys)), keys...)
		for i, q := range qs {
			if q.Q != "" {
				all, mask[i] = append(all, q.Q, q.W), '1'
			}
		}
	}
	_, err := ownedKeys(ctx, c, deleteKeysScript, keys, all, value, string(mask), shard(sharded))
	return err
}

// ownedKeys runs s, a script over keys and then the other keys of all
// (all starts with keys), which replies with one number per key, and
// returns those numbers, or the errors of the keys whose number is noKey
// or otherOwner (see keyErrors).
func ownedKeys(ctx context.Context, c driver.Conn, s *driver.Script, keys, all []string, args ...any) ([]int64, error) {
	n, err := runInts(ctx, c, s, all, args...)
	if err != nil {
		return nil, err
	}
	if len(n) != len(keys) {
		return nil, fmt.Errorf("script of %d keys: got %d replies, want one per key", len(keys), len(n))
	}
	if err := keyErrors(keys, n); err != nil {
		return nil, err
	}
	return n, nil
}

// keyErrors returns one *strategy.KeyError per key whose state is noKey
// (wrapping strategy.ErrExpired) or otherOwner (strategy.ErrTaken), joined
// with errors.Join, in the order of keys; nil when there is none.
func keyErrors(keys []string, states []int64) error {
	var errs []error
	for i, n := range states {
		if err := owned(n, nil); err != nil {
			errs = append(errs, &strategy.KeyError{Key: keys[i], Err: err})
		}
	}
	return errors.Join(errs...)
}

// runInts runs s, sending it once more when its connection was dead (see
// call.run), and returns its reply: an array of integers.
func runInts(ctx context.Context, c driver.Conn, s *driver.Script, keys []string, args ...any) ([]int64, error) {
	reply, err := resend(ctx, func() (any, error) { return s.Run(ctx, c, keys, args...) })
	if err != nil {
		return nil, err
	}
	n, ok := ints(reply)
	if !ok {
		return nil, fmt.Errorf("script %.8s: got reply %v, want an array of integers", s.SHA1(), reply)
	}
	return n, nil
}

// ints returns reply as integers, if it is an array of them.
func ints(reply any) ([]int64, bool) {
	r, ok := reply.([]any)
	if !ok {
		return nil, false
	}
	n := make([]int64, len(r))
	for i, v := range r {
		if n[i], ok = v.(int64); !ok {
			return nil, false
		}
	}
	return n, true
}
