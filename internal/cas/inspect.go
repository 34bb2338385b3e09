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
// missing), and the length of the wait queue KEYS[#KEYS] when ARGV[2] is
// "1" (counted with ZRANGE, which the waiters' ACL already allows, called
// through aclLib's call so that its denial is told apart). The PTTL
// tells whether the key exists (-2 when it does not), so an empty value is
// told apart from a missing key. GET fails with WRONGTYPE on a key of
// another type, and so does the read of a counter that is not a number.
var inspectScript = driver.NewScript(aclLib + `local v = redis.call('GET', KEYS[1])
local fence, waiters = 0, 0
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
	waiters = #call('ZRANGE', KEYS[#KEYS], 0, -1)
end
return {v or '', redis.call('PTTL', KEYS[1]), fence, waiters}`)

// Reading is what Inspect read of a key, at one instant.
type Reading struct {
	Exists bool          // the key exists
	Value  string        // its value; "" when it does not exist
	TTL    time.Duration // its remaining time to live; negative when it has no expiry, 0 when it does not exist
	Fence  int64         // the fencing counter; 0 when none was asked for or it does not exist
	Queued int           // the entries of the wait queue; 0 when none was asked for
}

// inspect is Server.Inspect with scripts. A read whose pooled connection
// was dead is sent once more, as every call of the package is (see
// resend).
func inspect(ctx context.Context, c driver.Conn, key, fenceKey, queueKey string) (Reading, error) {
	reply, err := inspectReply(ctx, c, key, fenceKey, queueKey)
	if err != nil && queueKey != "" && denied(err) { // a user that never waits need not be allowed the queue
		reply, err = inspectReply(ctx, c, key, fenceKey, "")
	}
	if err != nil && fenceKey != "" && denied(err) { // nor one that never fences the counter
		reply, err = inspectReply(ctx, c, key, "", "")
	}
	if err != nil {
		return Reading{}, err
	}
	// The reply holds the value, and so a token: never show it in an error.
	r, _ := reply.([]any)
	if len(r) != 4 {
		return Reading{}, fmt.Errorf("script %.8s: got a reply of type %T, want {value, pttl, fence, waiters}", inspectScript.SHA1(), reply)
	}
	value, ok1 := r[0].(string)
	pttl, ok2 := r[1].(int64)
	fence, ok3 := r[2].(int64)
	queued, ok4 := r[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return Reading{}, fmt.Errorf("script %.8s: got {%T, %T, %T, %T}, want {value, pttl, fence, waiters}", inspectScript.SHA1(), r[0], r[1], r[2], r[3])
	}
	ttl, exists := driver.FromPTTL(pttl)
	if !exists {
		return Reading{Fence: fence, Queued: int(queued)}, nil
	}
	return Reading{Exists: true, Value: value, TTL: ttl, Fence: fence, Queued: int(queued)}, nil
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
func inspectReply(ctx context.Context, c driver.Conn, key, fenceKey, queueKey string) (any, error) {
	keys, flags := []string{key}, [2]string{"0", "0"}
	for i, k := range []string{fenceKey, queueKey} {
		if k != "" {
			keys, flags[i] = append(keys, k), "1"
		}
	}
	return resend(ctx, func() (any, error) { return inspectScript.Run(ctx, c, keys, flags[0], flags[1]) })
}

// Break is lock.Locker.Break on one server: it reads the lock with read,
// then deletes the value it read, with release, if the holder's fingerprint
// is fingerprint, or whatever the holder when fingerprint is "". It returns
// the State read returned, and strategy.ErrExpired when there was no key,
// or strategy.ErrTaken, deleting nothing, when another holder holds it.
// release must delete the key only if it still holds the value, so that a
// holder that came after the reading is never deleted either.
func Break(ctx context.Context, fingerprint string, read func(context.Context) (strategy.State, Reading, error),
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
	return st, release(ctx, r.Value)
}
