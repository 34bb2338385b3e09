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
// taken (its SET NX fails, and its GET gives WRONGTYPE), and in a companion
// key in K's slot (docs/design/semaphores.md gives the layout and why):
//
//   - K, a sorted set of the holders' values, each scored by the server
//     time (ms) when its lease ends: the one source of truth of the leases.
//     A script that finds a lease past is the reaper.
//   - M = {K}:shared, a hash: "limit" (or "rw", stated by the first holder
//     and checked against the others), "end" (the last lease's end, when K
//     and M expire, M first), "q" ("1" while the queue may have waiters),
//     "w" (the writer's value), and for a semaphore "p" .. value
//     (each holder's permit index) and "taken" (one "1" or "0" per permit
//     index; the lowest free is the first "0", or the string's length).
//
// M exists while K has holders, and only then, so a script reads the
// lock's state in one HMGET of M, and a step's cost does not grow with the
// holders. K, the permits and "taken" agree: the reaper frees a lease's
// permit too. The waiters queue in the plain locks' FIFO queue (queue.go),
// their ids tagged with their mode ("to.s…", "to.r…", "to.w…"); only the
// shared acquisition enqueues one, and a script that creates M sets "q"
// from the queue. The scripts read the clock with TIME, never the
// client's. The fencing counters, {K}:fence and, for a semaphore, a hash
// {K}:fences of one per permit index, live as a plain lock's do (see
// fenceLib): each fenced acquisition gives them their lifetime again.

// sharedLib is the Lua that the shared-lock scripts share, after aclLib and
// queueLib: K is KEYS[1] and M KEYS[4]. A script reads M into a table s
// (load), changes it in Lua, and writes back what changed.
const sharedLib = `local K, M = KEYS[1], KEYS[4]
local function zset()
	local t = redis.call('TYPE', K)['ok']
	return t == 'none' or t == 'zset'
end
-- load reads the state of the lock, and what M says of value's permit.
local function load(value)
	local f = call('HMGET', M, 'limit', 'end', 'q', 'w', 'taken', 'p' .. value)
	return {value = value, limit = f[1], last = tonumber(f[2]) or 0, stored = f[3] == '1', q = f[3] == '1' or not f[1],
		w = f[4], taken = f[5] or '', mine = tonumber(f[6])}
end
local function fresh(s)
	return {value = s.value, limit = false, last = 0, stored = false, q = true, w = false, taken = ''}
end
local function mark(s, i, c)
	local t = s.taken
	if #t < i then
		t = t .. string.rep('0', i - #t)
	end
	s.taken = string.sub(t, 1, i) .. c .. string.sub(t, i + 2)
end
local function empty(s)
	return not string.find(s.taken, '1', 1, true)
end
local function lowest(s)
	local at = string.find(s.taken, '0', 1, true)
	if at then
		return at - 1
	end
	return #s.taken
end
-- reap removes the leases that ended, and frees their permits, when the
-- earliest has ended; it returns nil when K is not a sorted set.
local function reap(s, now)
	local first = redis.pcall('ZRANGE', K, 0, 0, 'WITHSCORES')
	if first.err then
		if string.find(first.err, 'WRONGTYPE', 1, true) then
			return nil
		end
		error(first)
	end
	if not first[1] then
		if s.limit then
			redis.call('DEL', M) -- K was deleted: M is stale
			return fresh(s)
		end
		return s
	end
	if not s.limit then
		-- K without M: M expired first (see keep), or was deleted.
		if tonumber(redis.call('ZRANGE', K, -1, -1, 'WITHSCORES')[2]) <= now then
			redis.call('DEL', K)
		else
			s.orphan = true -- held until its leases end
		end
		return s
	end
	if tonumber(first[2]) > now then
		return s
	end
	repeat
		local gone = redis.call('ZRANGEBYSCORE', K, '-inf', now, 'LIMIT', 0, 100)
		if #gone == 0 then
			break
		end
		redis.call('ZREM', K, unpack(gone))
		local fields = {}
		for i, m in ipairs(gone) do
			fields[i] = 'p' .. m
		end
		for _, i in ipairs(redis.call('HMGET', M, unpack(fields))) do
			if i then
				mark(s, tonumber(i), '0')
			end
		end
		for _, m in ipairs(gone) do
			if m == s.value then
				s.mine = nil
			end
			if m == s.w then
				s.w = false
				table.insert(fields, 'w')
			end
		end
		redis.call('HDEL', M, unpack(fields))
	until #gone < 100
	if redis.call('EXISTS', K) == 0 then
		redis.call('DEL', M)
		return fresh(s)
	end
	redis.call('HSET', M, 'taken', s.taken)
	return s
end
-- keep makes K and M expire with lease when it ends last.
local function keep(s, now, lease)
	if lease > s.last then
		s.last = lease
		-- M first: run later, K's PEXPIRE never ends it before M's.
		redis.call('PEXPIRE', M, lease - now)
		redis.call('PEXPIRE', K, lease - now)
		return true
	end
end
local function modeOf(member)
	return string.match(member, '^[^.]*%.(.)')
end
local function may(s, mode, rank, limit, head)
	if s.orphan then
		return false
	end
	if mode == 'w' then
		return (not s.limit or redis.call('ZCARD', K) == 0) and (rank == 1 or rank == 0 and not head)
	end
	if mode == 'r' then
		if s.w then
			return false
		end
		local ahead = {}
		if rank == 0 and head then
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
	limit = tonumber(limit) or math.huge
	if not head then
		return lowest(s) < limit
	end
	local free = limit - redis.call('ZCARD', K)
	if rank == 0 then
		return call('ZCARD', Q) < free
	end
	return rank <= free
end
-- headOf returns the live head of the queue, pruning dead ones, or nil
-- when it has none; it looks only when the queue may have waiters.
local function headOf(s, now)
	if not s.q then
		return nil
	end
	if not call('ZRANGE', Q, 0, 0)[1] then
		s.q = false
		return nil
	end
	local head = prune(now)
	if not head then
		tidy()
		s.q = false
	end
	return head
end
local function wakeHead(s, now, limit)
	local head = headOf(s, now)
	if head and may(s, modeOf(head), 1, limit, head) then
		wake(head, now)
	end
end
-- queueField returns the value of M's "q" once the script queued (or not)
-- a waiter, or nil when M says so already.
local function queueField(s, queued)
	queued = queued or s.q
	if queued ~= s.stored then
		s.stored = queued
		return queued and '1' or '0'
	end
end
local function write(fields)
	if #fields > 0 then
		redis.call('HSET', M, unpack(fields))
	end
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
	// a semaphore's holder increments its permit's (KEYS[5] is then a hash,
	// one field per permit index). Either way the counter gets the lifetime
	// ARGV[9] ms (0: none), as nextFence gives it. It replies {1, fence, permit
	// index + 1} when the place is ours, {0, rank, ms until the first lease
	// ends} when not, and {-1, what the key holds} when the key holds a lock
	// of another shape.
	//
	// Uncontended (no waiter, and "q" says the queue is empty), a permit
	// costs TIME, HMGET, ZRANGE (the earliest lease, which has not ended),
	// ZADD, HSET and, when this lease ends last, two PEXPIREs, whatever the
	// number of holders.
	sharedAcquireScript = driver.NewScript(aclLib + queueLib + fenceLib + sharedLib + `local now = clock()
local value, limit, mode, id = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
local poll, cap = tonumber(ARGV[6]), tonumber(ARGV[7])
local s = reap(load(value), now)
if not s then
	return {-1, 'plain'}
end
if s.limit and s.limit ~= limit then
	return {-1, s.limit}
end
local queued, rank = nil, 0
if s.q and id ~= '' then
	queued = here(id, poll, now)
end
local head = headOf(s, now)
if queued then
	rank = call('ZRANK', Q, id) + 1
end
local ours = s.mine
if mode ~= 's' and s.limit then
	ours = redis.call('ZSCORE', K, value)
end
if ours or may(s, mode, rank, limit, head) then
	local lease = now + tonumber(ARGV[2])
	local idx = 0
	local fields = {'limit', limit}
	if mode == 's' then
		idx = s.mine or lowest(s)
		if not s.mine then
			mark(s, idx, '1')
			table.insert(fields, 'taken')
			table.insert(fields, s.taken)
			table.insert(fields, 'p' .. value)
			table.insert(fields, idx)
		end
	elseif mode == 'w' then
		s.w = value
		table.insert(fields, 'w')
		table.insert(fields, value)
	end
	redis.call('ZADD', K, lease, value)
	local fence = 0
	if ARGV[8] == '1' then
		local F = KEYS[5]
		if mode == 'w' then
			fence = nextFence(F, ARGV[9])
		else
			if mode == 'r' then
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
			if tonumber(ARGV[9]) > 0 then
				redis.call('PEXPIRE', F, ARGV[9])
			end
		end
	end
	if s.q then
		if queued then
			claimed(id)
		end
		wakeHead(s, now, limit)
	end
	local q = queueField(s, false)
	if q then
		table.insert(fields, 'q')
		table.insert(fields, q)
	end
	if lease > s.last then
		table.insert(fields, 'end')
		table.insert(fields, lease)
	end
	write(fields)
	keep(s, now, lease)
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
if head and head ~= id and may(s, modeOf(head), 1, limit, head) then
	wake(head, now)
end
if s.limit then
	local q = queueField(s, id ~= '')
	if q then
		write({'q', q})
	end
end
return {0, rank, pttl}`)

	// sharedRefreshScript extends the lease of ARGV[1] to ARGV[2] ms from
	// now, if it has not ended.
	sharedRefreshScript = driver.NewScript(aclLib + queueLib + sharedLib + `local now = clock()
local s = load(ARGV[1])
if not s.limit and not zset() then
	return ` + strconv.Itoa(otherOwner) + `
end
local score = tonumber(redis.call('ZSCORE', K, ARGV[1]))
if not s.limit or not score or score <= now then
	return ` + strconv.Itoa(noKey) + `
end
local lease = now + tonumber(ARGV[2])
redis.call('ZADD', K, 'XX', lease, ARGV[1])
if lease < score and score >= s.last then
	-- This lease was the last to end, and now ends sooner: the keys expire
	-- with the one that ends last now.
	s.last = 0
	lease = tonumber(redis.call('ZRANGE', K, -1, -1, 'WITHSCORES')[2])
end
if keep(s, now, lease) then
	redis.call('HSET', M, 'end', lease)
end
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
	// the head of the queue if the head may enter now. A semaphore's
	// release, with no waiter, costs TIME, HMGET, ZSCORE, ZREM, HSET and
	// HDEL (or, the last holder's, DEL instead of the last two).
	sharedReleaseScript = driver.NewScript(aclLib + queueLib + sharedLib + `local now = clock()
local value = ARGV[1]
local s = load(value)
if not s.limit and not zset() then
	return ` + strconv.Itoa(otherOwner) + `
end
local score = tonumber(redis.call('ZSCORE', K, value))
if not s.limit or not score or score <= now then
	return ` + strconv.Itoa(noKey) + `
end
if s.q then
	s = reap(s, now) -- the head's turn counts the live holders only: ours is one
end
local gone = {}
if s.w == value then
	s.w = false
	table.insert(gone, 'w')
end
local fields = {}
if ARGV[2] == '1' then
	redis.call('ZREM', K, value)
	if s.mine then
		mark(s, s.mine, '0')
		table.insert(gone, 'p' .. value)
		table.insert(fields, 'taken')
		table.insert(fields, s.taken)
	end
	if (s.mine and empty(s)) or (not s.mine and redis.call('EXISTS', K) == 0) then
		redis.call('DEL', M)
		local q = s.q
		s = fresh(s)
		s.q = q -- the queue is as it was
		gone, fields = {}, {}
	end
end
if s.q then
	wakeHead(s, now, s.limit)
	if s.limit then
		local q = queueField(s, false)
		if q then
			table.insert(fields, 'q')
			table.insert(fields, q)
		end
	end
end
write(fields)
if #gone > 0 then
	redis.call('HDEL', M, unpack(gone))
end
return 1`)

	// sharedLeaveScript takes the waiter ARGV[1] out of the queue, and wakes
	// the next head if it may enter now. It reaps nothing, and so leaves the
	// keys of a lock as its holders' scripts left them: a head that it does
	// not wake because a lease that ended still counts tries again by its
	// own timer.
	sharedLeaveScript = driver.NewScript(aclLib + queueLib + sharedLib + `local now = clock()
drop(ARGV[1])
local s = load('')
if not s.limit and not zset() then
	return 1
end
wakeHead(s, now, s.limit)
if s.limit then
	local q = queueField(s, false)
	if q then
		write({'q', q})
	end
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

// limitOf returns how a shared lock states its shape in M: a semaphore's
// permits, or "rw" for a read-write lock.
func limitOf(sh strategy.Sharing) string {
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
	FenceTTL time.Duration // how long the fencing counter lives after the acquisition (0: no expiry is set)
	Waiter   string        // the waiter's id in the queue, tagged with its mode; "" for none
	Poll     time.Duration
	Patience time.Duration
}

// Acquire makes one attempt of r. It returns the fencing token (with
// r.Fencing) and the permit index + 1 (for a semaphore) when the place is
// ours, strategy.ErrNotObtained and where the waiter stands when not, and
// an error matching strategy.ErrMismatch, having written nothing, when the
// key holds a lock of another shape.
func (s Shared) Acquire(ctx context.Context, c driver.Conn, r SharedRequest) (fence int64, permit int, e Result, err error) {
	fencing := "0"
	if r.Fencing {
		fencing = "1"
	}
	limit := limitOf(r.Sharing)
	reply, err := resend(ctx, func() (any, error) {
		keys := s.keys()
		if r.Sharing.Permits > 0 {
			keys[4] = s.Fences
		}
		return sharedAcquireScript.Run(ctx, c, keys, r.Value, r.TTL.Milliseconds(), limit, Mode(r.Sharing), r.Waiter,
			max(r.Poll.Milliseconds(), 1), max(r.Patience.Milliseconds(), 0), fencing, fenceMS(r.FenceTTL), shard(s.Sharded))
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
		return 0, 0, Result{Position: int(n[1]), HolderTTL: time.Duration(max(n[2], 0)) * time.Millisecond}, strategy.ErrNotObtained
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

// Refresh extends value's lease to ttl from now. Like TTL and Release,
// it reports a lease that a Break ended strategy.ErrBroken (see
// MarkBroken).
func (s Shared) Refresh(ctx context.Context, c driver.Conn, value string, ttl time.Duration) error {
	n, err := s.run(ctx, c, sharedRefreshScript, value, ttl.Milliseconds())
	return s.leaseErr(ctx, c, value, n, err)
}

// TTL returns what is left of value's lease.
func (s Shared) TTL(ctx context.Context, c driver.Conn, value string) (time.Duration, error) {
	n, err := s.run(ctx, c, sharedTTLScript, value)
	if err := s.leaseErr(ctx, c, value, n, err); err != nil {
		return 0, err
	}
	return time.Duration(n) * time.Millisecond, nil
}

// Release ends value's lease or, downgrading, makes the writer value a
// reader, keeping its lease; either way it wakes the head of the queue if
// it may enter now.
func (s Shared) Release(ctx context.Context, c driver.Conn, value string, downgrading bool) error {
	end := "1"
	if downgrading {
		end = "0"
	}
	n, err := s.run(ctx, c, sharedReleaseScript, value, end)
	return s.leaseErr(ctx, c, value, n, err)
}

// leaseErr turns a script's reply about value's lease, n or err, into its
// error, as owned does, with a lease that a Break ended reported
// strategy.ErrBroken.
func (s Shared) leaseErr(ctx context.Context, c driver.Conn, value string, n int64, err error) error {
	return brokenOne(ctx, c, s.Key, value, owned(n, err))
}

// run runs script over the lock's keys with args and the last argument
// of the scripts that publish, once more when its connection was dead.
func (s Shared) run(ctx context.Context, c driver.Conn, script *driver.Script, args ...any) (int64, error) {
	args = append(args, shard(s.Sharded))
	keys := s.keys()
	return resend(ctx, func() (int64, error) { return script.Int(ctx, c, keys, args...) })
}

// Leave takes the waiter id out of the queue.
func (s Shared) Leave(ctx context.Context, c driver.Conn, id string) error {
	_, err := s.run(ctx, c, sharedLeaveScript, id)
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
