package cas

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// A shared lock K (a counting semaphore, or a read-write lock) keeps its
// holders in K itself, so that a plain lock of the same name finds the key
// taken (its SET NX fails, and its GET gives WRONGTYPE), and in one
// companion key in K's Cluster slot:
//
//   - K, a sorted set of the holders' values, each scored by the server time
//     (ms) when its lease ends: the one source of truth. A holder's lease is
//     its own; a script that finds it past is the reaper.
//   - M = {K}:shared, a hash: "limit", the semaphore's limit (or "rw" for a
//     read-write lock), stated by the first holder and checked against
//     every other; "w", the value of the writer, while one holds the lock;
//     and "p" .. value, each semaphore holder's permit index.
//
// K and M expire with the last lease, so that nothing is left behind. The
// waiters queue in the FIFO queue of plain locks ({K}:q, {K}:w; see
// queue.go), their ids tagged with their mode after the listener's name
// ("to.s…", "to.r…", "to.w…"), so that a reader can tell a writer waiting
// ahead of it. The scripts read the clock with TIME, never the client's.
// The fencing counters are those of plain locks for the write side
// ({K}:fence) and, for a semaphore, a hash of one counter per permit index
// ({K}:fences): like every fencing counter, they never expire.

// sharedLib is the Lua that the shared-lock scripts share, after aclLib and
// queueLib: K is KEYS[1] and M KEYS[4].
const sharedLib = `local K, M = KEYS[1], KEYS[4]
local function zset()
	local t = redis.call('TYPE', K)['ok']
	return t == 'none' or t == 'zset'
end
local function reap(now)
	local gone = redis.call('ZRANGEBYSCORE', K, '-inf', now)
	if #gone > 0 then
		redis.call('ZREMRANGEBYSCORE', K, '-inf', now)
		local w = redis.call('HGET', M, 'w')
		for _, m in ipairs(gone) do
			redis.call('HDEL', M, 'p' .. m)
			if m == w then
				redis.call('HDEL', M, 'w')
			end
		end
	end
	if redis.call('EXISTS', K) == 0 then
		redis.call('DEL', M)
	end
end
local function keep(now)
	local last = redis.call('ZRANGE', K, -1, -1, 'WITHSCORES')
	if last[2] then
		local ms = math.max(tonumber(last[2]) - now, 1)
		redis.call('PEXPIRE', K, ms)
		redis.call('PEXPIRE', M, ms)
	end
end
local function modeOf(member)
	return string.match(member, '^[^.]*%.(.)')
end
local function may(mode, rank, limit)
	local holders = redis.call('ZCARD', K)
	if mode == 'w' then
		return holders == 0 and (rank == 1 or rank == 0 and call('ZCARD', Q) == 0)
	end
	if mode == 'r' then
		if redis.call('HEXISTS', M, 'w') == 1 then
			return false
		end
		local ahead = {}
		if rank == 0 then
			ahead = call('ZRANGE', Q, 0, -1)
		elseif rank > 1 then
			ahead = call('ZRANGE', Q, 0, rank - 2)
		end
		for _, m in ipairs(ahead) do
			if modeOf(m) == 'w' then
				return false
			end
		end
		return true
	end
	local free = (tonumber(limit) or math.huge) - holders
	if rank == 0 then
		return call('ZCARD', Q) < free
	end
	return rank <= free
end
local function wakeHead(now, limit)
	local head = prune(now)
	if head and may(modeOf(head), 1, limit) then
		wake(head, now)
	end
	tidy()
end
`

var (
	// sharedAcquireScript takes a place for ARGV[1] (the value) for
	// ARGV[2] ms, in a lock whose limit is ARGV[3] (a number, or "rw"), in
	// mode ARGV[4] ("s" for a semaphore's permit, "r" to read, "w" to
	// write), for the waiter ARGV[5] ("" for none), which polls every
	// ARGV[6] ms and gives up after ARGV[7] ms (0: none), issuing a fencing
	// token from KEYS[5] when ARGV[8] is 1: a writer increments the counter, a
	// reader reads it (starting it, as nextFence does, when there is none), and
	// a semaphore's holder increments its permit's. It replies {1, fence, permit
	// index + 1} when the place is ours, {0, rank, ms until the first lease
	// ends} when not, and {-1, what the key holds} when the key holds a lock
	// of another shape.
	sharedAcquireScript = driver.NewScript(aclLib + queueLib + fenceLib + sharedLib + `local now = clock()
local value, limit, mode, id = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
local poll, cap = tonumber(ARGV[6]), tonumber(ARGV[7])
if not zset() then
	return {-1, 'plain'}
end
reap(now)
local stated = redis.call('HGET', M, 'limit')
if stated and stated ~= limit then
	return {-1, stated}
end
local queued
if id ~= '' then
	queued = here(id, poll, now)
end
local head = prune(now)
local rank = 0
if queued then
	rank = call('ZRANK', Q, id) + 1
end
local ours = redis.call('ZSCORE', K, value)
if ours or may(mode, rank, limit) then
	local idx = 0
	if mode == 's' then
		idx = tonumber(redis.call('HGET', M, 'p' .. value))
		if not idx then
			local taken = {}
			for _, m in ipairs(redis.call('ZRANGE', K, 0, -1)) do
				taken[tonumber(redis.call('HGET', M, 'p' .. m)) or -1] = true
			end
			idx = 0
			while taken[idx] do
				idx = idx + 1
			end
		end
		redis.call('HSET', M, 'p' .. value, idx)
	elseif mode == 'w' then
		redis.call('HSET', M, 'w', value)
	end
	redis.call('ZADD', K, now + tonumber(ARGV[2]), value)
	redis.call('HSET', M, 'limit', limit)
	keep(now)
	local fence = 0
	if ARGV[8] == '1' then
		local F = KEYS[5]
		if mode == 'w' then
			fence = nextFence(F)
		elseif mode == 'r' then
			if redis.call('EXISTS', F) == 0 then
				local t = redis.call('TIME')
				redis.call('SET', F, t[1] .. string.format('%06d', tonumber(t[2])))
			end
			fence = tonumber(redis.call('GET', F))
		else
			if redis.call('HEXISTS', F, idx) == 0 then
				local t = redis.call('TIME')
				redis.call('HSET', F, idx, t[1] .. string.format('%06d', tonumber(t[2])))
			end
			fence = redis.call('HINCRBY', F, idx, 1)
		end
	end
	if queued then
		claimed(id)
	end
	wakeHead(now, limit)
	return {1, fence, idx + 1}
end
if id ~= '' then
	rank = enqueue(id, queued, poll, cap, now)
end
local first = redis.call('ZRANGE', K, 0, 0, 'WITHSCORES')
local pttl = 0
if first[2] then
	pttl = tonumber(first[2]) - now
end
if head and head ~= id and may(modeOf(head), 1, limit) then
	wake(head, now)
end
return {0, rank, pttl}`)

	// sharedRefreshScript extends the lease of ARGV[1] to ARGV[2] ms from
	// now, if it has not ended.
	sharedRefreshScript = driver.NewScript(aclLib + queueLib + sharedLib + `local now = clock()
if not zset() then
	return ` + strconv.Itoa(otherOwner) + `
end
reap(now)
if not redis.call('ZSCORE', K, ARGV[1]) then
	return ` + strconv.Itoa(noKey) + `
end
redis.call('ZADD', K, 'XX', now + tonumber(ARGV[2]), ARGV[1])
keep(now)
return 1`)

	// sharedTTLScript replies with the ms left of the lease of ARGV[1].
	sharedTTLScript = driver.NewScript(aclLib + queueLib + sharedLib + `local now = clock()
if not zset() then
	return ` + strconv.Itoa(otherOwner) + `
end
local score = redis.call('ZSCORE', K, ARGV[1])
if not score or tonumber(score) <= now then
	return ` + strconv.Itoa(noKey) + `
end
return tonumber(score) - now`)

	// sharedReleaseScript ends the lease of ARGV[1] (ARGV[2] = "1"), or,
	// with ARGV[2] = "0", only its writing: a downgrade. Either way it wakes
	// the head of the queue if the head may enter now.
	sharedReleaseScript = driver.NewScript(aclLib + queueLib + sharedLib + `local now = clock()
if not zset() then
	return ` + strconv.Itoa(otherOwner) + `
end
reap(now)
local limit = redis.call('HGET', M, 'limit')
if not redis.call('ZSCORE', K, ARGV[1]) then
	return ` + strconv.Itoa(noKey) + `
end
if redis.call('HGET', M, 'w') == ARGV[1] then
	redis.call('HDEL', M, 'w')
end
if ARGV[2] == '1' then
	redis.call('ZREM', K, ARGV[1])
	redis.call('HDEL', M, 'p' .. ARGV[1])
	if redis.call('EXISTS', K) == 0 then
		redis.call('DEL', M)
	end
end
wakeHead(now, limit)
return 1`)

	// sharedLeaveScript takes the waiter ARGV[1] out of the queue, and wakes
	// the next head if it may enter now.
	sharedLeaveScript = driver.NewScript(aclLib + queueLib + sharedLib + `local now = clock()
drop(ARGV[1])
if zset() then
	wakeHead(now, redis.call('HGET', M, 'limit'))
end
return 1`)

	// sharedInspectScript reads the lock without changing it: {what K
	// holds ("none", "zset" or another type), the limit, the writer, the
	// server's time in ms, {value, lease end, permit index}..., the length
	// of the queue, the fencing counter KEYS[5] (when ARGV[1] is "1")}.
	sharedInspectScript = driver.NewScript(`local K, Q, M = KEYS[1], KEYS[2], KEYS[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local typ = redis.call('TYPE', K)['ok']
if typ ~= 'zset' then
	return {typ, '', '', now, {}, 0, 0}
end
local holders = {}
local z = redis.call('ZRANGE', K, 0, -1, 'WITHSCORES')
for i = 1, #z, 2 do
	if tonumber(z[i + 1]) > now then
		table.insert(holders, z[i])
		table.insert(holders, z[i + 1])
		table.insert(holders, redis.call('HGET', M, 'p' .. z[i]) or '')
	end
end
local fence = 0
if ARGV[1] == '1' and redis.call('TYPE', KEYS[5])['ok'] == 'string' then
	fence = tonumber(redis.call('GET', KEYS[5])) or 0
end
return {typ, redis.call('HGET', M, 'limit') or '', redis.call('HGET', M, 'w') or '', now, holders, redis.call('ZCARD', Q), fence}`)
)

// Shared names the keys of a shared lock (see above), in its key's Cluster
// hash slot.
type Shared struct {
	Queue
	M      string
	Fence  string // the write side's fencing counter, a plain lock's
	Fences string // a semaphore's fencing counters, one per permit index
}

// NewShared returns the keys of the shared lock key; false when key has no
// companion names in its slot (see Companion).
func NewShared(key string, sharded bool) (Shared, bool) {
	q, ok := NewQueue(key, sharded)
	if !ok {
		return Shared{}, false
	}
	m, _ := Companion(key, "shared")
	f, _ := Companion(key, "fence")
	fs, _ := Companion(key, "fences")
	return Shared{Queue: q, M: m, Fence: f, Fences: fs}, true
}

// Limit returns how a shared lock states its shape in M: a semaphore's
// permits, or "rw" for a read-write lock.
func Limit(sh strategy.Sharing) string {
	if sh.Permits > 0 {
		return strconv.Itoa(sh.Permits)
	}
	return "rw"
}

// Mode returns the letter of a holder's mode, which tags its waiter's id:
// "s" for a semaphore's permit, "r" to read, "w" to write.
func Mode(sh strategy.Sharing) string {
	switch {
	case sh.Read:
		return "r"
	case sh.Write:
		return "w"
	}
	return "s"
}

// SharedRequest is one attempt to take a place in a shared lock.
type SharedRequest struct {
	Sharing  strategy.Sharing
	Value    string
	TTL      time.Duration
	Fencing  bool
	Waiter   string // the waiter's id in the queue, tagged with its mode; "" for none
	Poll     time.Duration
	Patience time.Duration
}

// Acquire makes one attempt of r. It returns the fencing token (with
// r.Fencing) and the permit index + 1 (for a semaphore) when the place is
// ours, strategy.ErrNotObtained and where the waiter stands when not, and
// an error matching strategy.ErrMismatch, having written nothing, when the
// key holds a lock of another shape.
func (s Shared) Acquire(ctx context.Context, c driver.Conn, r SharedRequest) (fence int64, permit int, e Enqueued, err error) {
	fencing := "0"
	if r.Fencing {
		fencing = "1"
	}
	limit := Limit(r.Sharing)
	reply, err := resend(ctx, func() (any, error) {
		keys := s.keys()
		if r.Sharing.Permits > 0 {
			keys[4] = s.Fences
		}
		return sharedAcquireScript.Run(ctx, c, keys, r.Value, r.TTL.Milliseconds(), limit, Mode(r.Sharing), r.Waiter,
			max(r.Poll.Milliseconds(), 1), max(r.Patience.Milliseconds(), 0), fencing, shard(s.Sharded))
	})
	if err != nil {
		return 0, 0, e, err
	}
	if a, ok := reply.([]any); ok && len(a) == 2 && a[0] == int64(-1) {
		return 0, 0, e, Mismatch(fmt.Sprint(a[1]), limit)
	}
	n, _ := ints(reply)
	switch {
	case len(n) == 3 && n[0] == 1:
		return n[1], int(n[2]), e, nil
	case len(n) == 3 && n[0] == 0:
		return 0, 0, Enqueued{Position: int(n[1]), HolderTTL: time.Duration(max(n[2], 0)) * time.Millisecond}, strategy.ErrNotObtained
	}
	return 0, 0, e, fmt.Errorf("shared acquire: got reply %v, want {1, fence, permit} or {0, position, pttl}", reply)
}

// Mismatch is the error of an acquisition of a lock whose limit is asked
// (a semaphore's permits, "rw" for a read-write lock, "plain" for a plain
// lock), where the key holds held: it matches strategy.ErrMismatch.
func Mismatch(held, asked string) error { return &shapeError{held, asked} }

// shapeError is an acquisition's mismatch: it matches strategy.ErrMismatch.
type shapeError struct{ held, asked string }

func (e *shapeError) Error() string {
	return "the key holds " + shape(e.held) + ", not " + shape(e.asked)
}

func (e *shapeError) Unwrap() error { return strategy.ErrMismatch }

// shape names the shape of a lock whose limit is limit.
func shape(limit string) string {
	switch limit {
	case "plain":
		return "a plain lock"
	case "rw":
		return "a read-write lock"
	case "1":
		return "a semaphore of 1 permit"
	}
	return "a semaphore of " + limit + " permits"
}

func (s Shared) keys() []string { return []string{s.Key, s.Q, s.W, s.M, s.Fence} }

// Refresh extends value's lease to ttl from now.
func (s Shared) Refresh(ctx context.Context, c driver.Conn, value string, ttl time.Duration) error {
	return owned(call{sharedRefreshScript, s.keys(), []any{value, ttl.Milliseconds(), shard(s.Sharded)}}.run(ctx, c))
}

// TTL returns what is left of value's lease.
func (s Shared) TTL(ctx context.Context, c driver.Conn, value string) (time.Duration, error) {
	n, err := call{sharedTTLScript, s.keys(), []any{value, shard(s.Sharded)}}.run(ctx, c)
	if err := owned(n, err); err != nil {
		return 0, err
	}
	return time.Duration(n) * time.Millisecond, nil
}

// Release ends value's lease, and wakes the head of the queue if it may
// enter now.
func (s Shared) Release(ctx context.Context, c driver.Conn, value string) error {
	return owned(call{sharedReleaseScript, s.keys(), []any{value, "1", shard(s.Sharded)}}.run(ctx, c))
}

// Downgrade makes the writer value a reader, keeping its lease, and wakes
// the head of the queue if it may enter now.
func (s Shared) Downgrade(ctx context.Context, c driver.Conn, value string) error {
	return owned(call{sharedReleaseScript, s.keys(), []any{value, "0", shard(s.Sharded)}}.run(ctx, c))
}

// Leave takes the waiter id out of the queue.
func (s Shared) Leave(ctx context.Context, c driver.Conn, id string) error {
	_, err := call{sharedLeaveScript, s.keys(), []any{id, shard(s.Sharded)}}.run(ctx, c)
	return err
}

// SharedReading is what Inspect read of a shared lock.
type SharedReading struct {
	Type    string // what the key holds: "none", "zset" for a shared lock, or another type
	Limit   string // the stated limit, or "rw"; "" when no one holds the lock
	Holders []SharedHolder
	Queued  int
	Fence   int64 // the write side's fencing counter, for a read-write lock
}

// SharedHolder is one holder that Inspect read. Its value holds a token:
// never show it.
type SharedHolder struct {
	Value  string
	TTL    time.Duration
	Permit int // the permit index, or -1
	Write  bool
}

// Inspect reads the shared lock without changing it.
func (s Shared) Inspect(ctx context.Context, c driver.Conn) (SharedReading, error) {
	reply, err := resend(ctx, func() (any, error) {
		return sharedInspectScript.Run(ctx, c, s.keys(), "1")
	})
	if err != nil {
		return SharedReading{}, err
	}
	// The reply holds values, and so tokens: never show it in an error.
	bad := fmt.Errorf("script %.8s: got a reply of type %T, want {type, limit, writer, now, holders, queued, fence}", sharedInspectScript.SHA1(), reply)
	a, ok := reply.([]any)
	if !ok || len(a) != 7 {
		return SharedReading{}, bad
	}
	typ, ok1 := a[0].(string)
	limit, ok2 := a[1].(string)
	writer, ok3 := a[2].(string)
	now, ok4 := a[3].(int64)
	hs, ok5 := a[4].([]any)
	queued, ok6 := a[5].(int64)
	fence, ok7 := a[6].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || len(hs)%3 != 0 {
		return SharedReading{}, bad
	}
	r := SharedReading{Type: typ, Limit: limit, Queued: int(queued), Fence: fence}
	for i := 0; i < len(hs); i += 3 {
		v, _ := hs[i].(string)
		score, _ := hs[i+1].(string)
		idx, _ := hs[i+2].(string)
		end, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return SharedReading{}, bad
		}
		permit, err := strconv.Atoi(idx)
		if err != nil {
			permit = -1
		}
		r.Holders = append(r.Holders, SharedHolder{Value: v, TTL: time.Duration(end-float64(now)) * time.Millisecond, Permit: permit, Write: v == writer})
	}
	return r, nil
}
