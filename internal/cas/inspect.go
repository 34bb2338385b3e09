package cas

import (
	"context"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// inspectScript reads, in one step, the value of KEYS[1] (empty when it is
// missing), its PTTL, the counter KEYS[2] when ARGV[1] is "1" (0 when it is
// missing), and, when ARGV[2] is "1", the length of the wait queue
// KEYS[#KEYS-1] (counted with ZRANGE, which the waiters' ACL already
// allows, called through aclLib's call so that its denial is told apart)
// and how long its head has waited (ms, by the server's clock, from its
// entry in KEYS[#KEYS]; 0 when unknown: an entry of an earlier version, or
// an ACL that denies the read, which loses only that). The PTTL
// tells whether the key exists (-2 when it does not), so an empty value is
// told apart from a missing key. GET fails with WRONGTYPE on a key of
// another type, and so does the read of a counter that is not a number.
var inspectScript = driver.NewScript(aclLib + `local v = redis.call('GET', KEYS[1])
local fence, waiters, waited = 0, 0, 0
if ARGV[1] == '1' then
	local f = redis.call('GET', KEYS[2])
	if f then
		fence = tonumber(f)
		if not fence then
			return redis.error_reply('WRONGTYPE the fencing counter ' .. KEYS[2] .. ' is not a number')
		end
	end
end
if ARGV[2] == '1' then
	local q = call('ZRANGE', KEYS[#KEYS-1], 0, -1)
	waiters = #q
	local e = q[1] and redis.pcall('HGET', KEYS[#KEYS], q[1])
	local joined = type(e) == 'string' and tonumber(string.match(e, '^%d+:(%d+):'))
	local t = joined and redis.pcall('TIME')
	if type(t) == 'table' and t[1] then
		waited = math.max(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - joined, 0)
	end
end
return {v or '', redis.call('PTTL', KEYS[1]), fence, waiters, waited}`)

// Reading is what Inspect read of a key, at one instant.
type Reading struct {
	Exists bool          // the key exists
	Value  string        // its value; "" when it does not exist
	TTL    time.Duration // its remaining time to live; negative when it has no expiry, 0 when it does not exist
	Fence  int64         // the fencing counter; 0 when none was asked for or it does not exist
	Queued int           // the entries of the wait queue; 0 when none was asked for
	Waited time.Duration // how long the queue's head has waited; 0 when unknown, or none was asked for
}

// inspect is Server.Inspect with scripts. A read whose pooled connection
// was dead is sent once more, as every call of the package is (see
// resend).
func inspect(ctx context.Context, c driver.Conn, key, fenceKey string, q Queue) (Reading, error) {
	reply, err := inspectReply(ctx, c, key, fenceKey, q)
	if err != nil && q.Q != "" && denied(err) { // a user that never waits need not be allowed the queue
		reply, err = inspectReply(ctx, c, key, fenceKey, Queue{})
	}
	if err != nil && fenceKey != "" && denied(err) { // nor one that never fences the counter
		reply, err = inspectReply(ctx, c, key, "", Queue{})
	}
	if err != nil {
		return Reading{}, err
	}
	// The reply holds the value, and so a token: never show it in an error.
	r, _ := reply.([]any)
	if len(r) != 5 {
		return Reading{}, fmt.Errorf("script %.8s: got a reply of type %T, want {value, pttl, fence, waiters, waited}", inspectScript.SHA1(), reply)
	}
	value, ok1 := r[0].(string)
	pttl, ok2 := r[1].(int64)
	fence, ok3 := r[2].(int64)
	queued, ok4 := r[3].(int64)
	waited, ok5 := r[4].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return Reading{}, fmt.Errorf("script %.8s: got {%T, %T, %T, %T, %T}, want {value, pttl, fence, waiters, waited}", inspectScript.SHA1(), r[0], r[1], r[2], r[3], r[4])
	}
	rd := Reading{Fence: fence, Queued: int(queued), Waited: time.Duration(waited) * time.Millisecond}
	if ttl, exists := driver.FromPTTL(pttl); exists {
		rd.Exists, rd.Value, rd.TTL = true, value, ttl
	}
	return rd, nil
}

// Holder returns the fingerprint of the token in r's value and the metadata
// after it (see strategy.SplitValue), or "" for both when the key does not
// exist.
func (r Reading) Holder() (fingerprint, metadata string) {
	if !r.Exists {
		return "", ""
	}
	token, metadata := strategy.SplitValue(r.Value)
	return strategy.Fingerprint(token), metadata
}

// inspectReply runs inspectScript, once more when its connection was dead.
func inspectReply(ctx context.Context, c driver.Conn, key, fenceKey string, q Queue) (any, error) {
	keys, flags := []string{key}, [2]string{"0", "0"}
	if fenceKey != "" {
		keys, flags[0] = append(keys, fenceKey), "1"
	}
	if q.Q != "" {
		keys, flags[1] = append(keys, q.Q, q.W), "1"
	}
	return resend(ctx, func() (any, error) { return inspectScript.Run(ctx, c, keys, flags[0], flags[1]) })
}

// Break is lock.Locker.Break on one server: it reads the lock with read,
// then deletes the value it read, with release, if the holder's fingerprint
// is fingerprint, or whatever the holder when fingerprint is "". It returns
// the State read returned, and strategy.ErrExpired when there was no key,
// or strategy.ErrTaken, deleting nothing, when another holder holds it.
// release must delete the key only if it still holds the value, so that a
// holder that came after the reading is never deleted either. A deletion
// leaves its mark over c (see MarkBroken), unless c is nil.
func Break(ctx context.Context, c driver.Conn, key, fingerprint string, read func(context.Context) (strategy.State, Reading, error),
	release func(ctx context.Context, value string) error,
) (strategy.State, error) {
	st, r, err := read(ctx)
	if err != nil {
		return st, err
	}
	fp, _ := r.Holder()
	switch {
	case !r.Exists:
		return st, strategy.ErrExpired
	case fingerprint != "" && fp != fingerprint:
		return st, strategy.ErrTaken
	}
	if err := release(ctx, r.Value); err != nil {
		return st, err
	}
	if c != nil {
		MarkBroken(ctx, c, key, r.Value, r.TTL)
	}
	return st, nil
}
