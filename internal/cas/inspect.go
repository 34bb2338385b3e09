package cas

import (
	"context"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// inspectScript reads, in one step, the value of KEYS[1] (empty when it is
// missing), its PTTL, and the counter KEYS[2] when it is given (0 when it
// is missing). The PTTL tells whether the key exists (-2 when it does not),
// so an empty value is told apart from a missing key. GET fails with
// WRONGTYPE on a key of another type, and so does the read of a counter
// that is not a number.
var inspectScript = driver.NewScript(`local v = redis.call('GET', KEYS[1])
local fence = 0
if #KEYS > 1 then
	local f = redis.call('GET', KEYS[2])
	if f then
		fence = tonumber(f)
		if not fence then
			return redis.error_reply('WRONGTYPE the fencing counter ' .. KEYS[2] .. ' is not a number')
		end
	end
end
return {v or '', redis.call('PTTL', KEYS[1]), fence}`)

// Reading is what Inspect read of a key, at one instant.
type Reading struct {
	Exists bool          // the key exists
	Value  string        // its value; "" when it does not exist
	TTL    time.Duration // its remaining time to live; negative when it has no expiry, 0 when it does not exist
	Fence  int64         // the fencing counter; 0 when none was asked for or it does not exist
}

// Inspect reads key, its TTL and, when fenceKey is not "", the fencing
// counter at fenceKey, atomically and without changing anything. On a
// Cluster, fenceKey must be in key's hash slot. A user whose ACL does not
// allow fenceKey (one that never fences need not be allowed it) gets the
// reading of key alone, with Fence 0. A key of another type gives the
// server's WRONGTYPE error. A read whose pooled connection was dead is sent
// once more, as every call of the package is (see call.run).
func Inspect(ctx context.Context, c driver.Conn, key, fenceKey string) (Reading, error) {
	keys := []string{key}
	if fenceKey != "" {
		keys = append(keys, fenceKey)
	}
	reply, err := inspect(ctx, c, keys)
	if err != nil && fenceKey != "" && denied(err) {
		reply, err = inspect(ctx, c, keys[:1])
	}
	if err != nil {
		return Reading{}, err
	}
	// The reply holds the value, and so a token: never show it in an error.
	r, _ := reply.([]any)
	if len(r) != 3 {
		return Reading{}, fmt.Errorf("script %.8s: got a reply of type %T, want {value, pttl, fence}", inspectScript.SHA1(), reply)
	}
	value, ok1 := r[0].(string)
	pttl, ok2 := r[1].(int64)
	fence, ok3 := r[2].(int64)
	if !ok1 || !ok2 || !ok3 {
		return Reading{}, fmt.Errorf("script %.8s: got {%T, %T, %T}, want {value, pttl, fence}", inspectScript.SHA1(), r[0], r[1], r[2])
	}
	ttl, exists := driver.FromPTTL(pttl)
	if !exists {
		return Reading{Fence: fence}, nil
	}
	return Reading{Exists: true, Value: value, TTL: ttl, Fence: fence}, nil
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

// inspect runs inspectScript, once more when its connection was dead.
func inspect(ctx context.Context, c driver.Conn, keys []string) (any, error) {
	return resend(ctx, func() (any, error) { return inspectScript.Run(ctx, c, keys) })
}
