package cas

import (
	"strconv"

	"github.com/locksmith-go/lock/driver"
)

// The scripts of plain locks act on the keys of one lock on one server, or
// one Cluster slot: KEYS are the lock's keys, then the companions that the
// script needs (the fencing counters, the wait queues, the restart guard's
// record), all declared, none built in Lua. A lock of one key is a lock of
// several with one: the same script, which replies with a number rather
// than an array of one, so that its reply costs no more than a number. They
// compare each key's whole value; GET fails with WRONGTYPE on a key of
// another type, before anything is written.

// The scripts reply, per key, with a non-negative number when the key holds
// our value, noKey when it is gone and otherOwner when another value holds
// it; the guarded acquire with restarting on a node in quarantine.
const (
	noKey      = -2
	otherOwner = -3
	restarting = -4
)

// keyStateLib defines keyState(i): 1 when KEYS[i] holds our value,
// ARGV[1]; otherOwner when it holds another; noKey when it is missing.
const keyStateLib = `local function keyState(i)
	local v = redis.call('GET', KEYS[i])
	if v == ARGV[1] then
		return 1
	elseif v then
		return ` + "-3" + `
	end
	return ` + "-2" + `
end
`

// fenceLib is the Lua of nextFence, which increments the fencing counter
// key, gives it a lifetime of ms milliseconds when ms > 0 (none
// otherwise: a counter that has one keeps it), and returns its new value.
// A counter that does not exist (new, expired, deleted, or lost with a
// restart of a server without persistence) starts from the server's clock
// in microseconds, so that tokens keep increasing across its loss as long
// as the clock does not step back and the name is not fenced more than
// once per microsecond on average (docs/safety.md, "How long a counter
// lives").
const fenceLib = `local function nextFence(key, ms)
	if redis.call('EXISTS', key) == 0 then
		local t = redis.call('TIME')
		redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])))
	end
	local n = redis.call('INCR', key)
	if tonumber(ms) > 0 then
		redis.call('PEXPIRE', key, ms)
	end
	return n
end
`

// guard returns the Lua that starts a guarded acquire: it replies with
// refusal, a Lua expression, on a node that has not been up for quarantine
// ms, and goes on otherwise. The key named by record holds the server time,
// in ms, when a client first found the node without it, that is, since it
// last started empty. record and quarantine are Lua expressions.
func guard(record, quarantine, refusal string) string {
	return `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local since = tonumber(redis.call('GET', ` + record + `))
if not since then
	since = now
	redis.call('SET', ` + record + `, now)
end
if now - since < tonumber(` + quarantine + `) then
	return ` + refusal + `
end
`
}

// acquireBody returns the Lua that sets the first ARGV[3] = n keys to
// ARGV[1] for ARGV[2] ms, if each is free or holds ARGV[1] already (a
// retried attempt, or a lock handed over with lock.WithToken: then it
// resets its TTL), and writes nothing otherwise. The keys after them, up to
// the index last (a Lua expression), are fencing counters, one per key,
// each incremented and given the lifetime fenceTTL ms, a Lua expression
// (see fenceLib). It replies {1, fences...}, or {0, i,
// PTTL} for the first key i that another value holds. With n = 0, the
// lock of KEYS[1] alone replies with a number: 1 or its fencing token, or
// 0.
func acquireBody(last, fenceTTL string) string {
	return `local n = tonumber(ARGV[3])
local one = n == 0
if one then
	n = 1
end
local free = {}
for i = 1, n do
	local v = redis.call('GET', KEYS[i])
	if v and v ~= ARGV[1] then
		if one then
			return 0
		end
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
	reply[#reply + 1] = nextFence(KEYS[i], ` + fenceTTL + `)
end
if one then
	return reply[2] or 1
end
return reply`
}

// ownerScript returns the script that, when every key holds our value
// (ARGV[1]), evaluates body for each key KEYS[i] and replies with the
// results; and otherwise changes nothing and replies, per key, 1 for ours,
// noKey or otherOwner. body must never be noKey or otherOwner.
func ownerScript(body string) *driver.Script {
	return driver.NewScript(keyStateLib + `local state, lost = {}, false
for i = 1, #KEYS do
	state[i] = keyState(i)
	lost = lost or state[i] ~= 1
end
if not lost then
	for i = 1, #KEYS do
		state[i] = ` + body + `
	end
end
if #KEYS == 1 then
	return state[1]
end
return state`)
}

var (
	// acquireScript is acquireBody with every key after the lock's a
	// fencing counter, whose lifetime is ARGV[4] ms (0: none) when there
	// are counters.
	acquireScript = driver.NewScript(fenceLib + acquireBody(`#KEYS`, `ARGV[4]`))

	// guardedScript is acquireBody, without fencing counters, on a node
	// that has been up for ARGV[4] ms (see guard), by the record in the
	// last key, after the lock's. It replies restarting ({restarting} but
	// for a lock of one key alone) on a younger node.
	guardedScript = driver.NewScript(guard(`KEYS[#KEYS]`, `ARGV[4]`,
		`(tonumber(ARGV[3]) == 0 and `+strconv.Itoa(restarting)+` or {`+strconv.Itoa(restarting)+`})`) + acquireBody(`n`, `0`))

	pexpireScript = ownerScript(`redis.call('PEXPIRE', KEYS[i], ARGV[2])`)
	pttlScript    = ownerScript(`redis.call('PTTL', KEYS[i])`)

	// deleteScript deletes each of the lock's keys that holds our value,
	// ARGV[1], and replies 1, noKey or otherOwner for each. ARGV[2] has one
	// character per lock key, "1" for a key whose queue (Q, W) follows the
	// lock's keys in KEYS, in order, and "0" for one without: a released
	// key's queue wakes its head. It touches every queue before it deletes
	// a key, so that a user whose ACL denies the queues is refused before
	// anything is written, and the release can fall back to one without
	// them; with no queue, it is a compare-and-delete and one EXISTS. ARGV[3]
	// is 1 to publish with SPUBLISH. When ARGV[4] is there, a deleted key i
	// also publishes it on channel ARGV[4 + i] (none when it is empty): the
	// release of a strategy without a queue, whose message wakes every
	// waiter, best effort.
	deleteScript = driver.NewScript(aclLib + queueLib + keyStateLib + `sharded = ARGV[3] == '1'
local mask = ARGV[2]
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
		local channel = ARGV[4 + i]
		if channel and channel ~= '' then
			redis.pcall(sharded and 'SPUBLISH' or 'PUBLISH', channel, ARGV[4])
		end
	end
end
if n == 1 then
	return state[1]
end
return state`)

	// setScript replaces our value with ARGV[2], expiring after ARGV[3] ms
	// when that is positive, and never otherwise. A key that already holds
	// ARGV[2] is taken as ours: the same set was applied before and only
	// its reply was lost (a timeout, or run sending it twice), and it gets
	// the expiry again. Had another client written that very value, it took
	// over our lock, expired, with the very timestamp we were writing, in
	// the same second or millisecond: the ambiguity of legacy locks whose
	// values are timestamps, which the acquisition already has (see
	// docs/design/setnx-getset.md).
	setScript = driver.NewScript(`local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[2] then
	if tonumber(ARGV[3]) > 0 then
		redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	else
		redis.call('SET', KEYS[1], ARGV[2])
	end
	return 1
elseif v then
	return ` + strconv.Itoa(otherOwner) + `
end
return ` + strconv.Itoa(noKey))
)
