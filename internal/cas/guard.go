package cas

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// A guarded write (lock.Lock.Guard) runs the caller's Lua body after a
// check of the lock, in one script: KEYS are the lock's keys, then the
// write's; ARGV are the lock's value, n, then the write's arguments. With n
// > 0, each of the first n keys must hold the value; with n = 0, the first
// key is a shared lock's sorted set, and the value's lease in it must not
// have ended by the server's clock. The body is a function whose
// parameters KEYS and ARGV shadow the globals, so that it sees only its
// own keys and arguments. It replies {1, reply}, or {0, state...}, one
// state per lock key (1, or noKey or otherOwner) when one is not ours; an
// error that the body returns is the script's error.
const guardCheck = `
local value, n = ARGV[1], tonumber(ARGV[2])
local states, lost = {}, false
if n == 0 then
	n = 1
	local score = tonumber(redis.call('ZSCORE', KEYS[1], value))
	local t = redis.call('TIME')
	if not score or score <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
		states[1], lost = ` + noKeyLua + `, true
	end
else
	for i = 1, n do
		local v = redis.call('GET', KEYS[i])
		if v == value then
			states[i] = 1
		elseif v then
			states[i], lost = ` + otherOwnerLua + `, true
		else
			states[i], lost = ` + noKeyLua + `, true
		end
	end
end
if lost then
	return {0, unpack(states)}
end
local reply = body({unpack(KEYS, n + 1)}, {unpack(ARGV, 3)})
if type(reply) == 'table' and reply.err then
	return reply
end
return {1, reply}
`

// The states of guardCheck, as Lua.
const (
	noKeyLua      = "-2" // noKey
	otherOwnerLua = "-3" // otherOwner
)

// guardScripts are the guarded scripts built so far, by body: a body is
// a constant of its program, as a script's source is, so there are few.
var guardScripts sync.Map // string → *driver.Script

// guardScript returns the guarded script of body.
func guardScript(body string) *driver.Script {
	if s, ok := guardScripts.Load(body); ok {
		return s.(*driver.Script)
	}
	s, _ := guardScripts.LoadOrStore(body, driver.NewScript("local function body(KEYS, ARGV)\n"+body+"\nend\n"+guardCheck))
	return s.(*driver.Script)
}

// Guard runs w on the server while l holds it (see lock.Lock.Guard): each
// of l's keys holds l.Value, or, with shared set, l.Key is a shared lock's
// sorted set in which l.Value's lease has not ended. w.Script runs in one
// script with the check; w.Commands run in a transaction (WATCH, the
// check's reads, MULTI, the commands, EXEC) over one pinned connection,
// with scripts or without, run again when a watched key changed under it
// (guardRuns times at most, then errChanged). It returns ErrExpired or
// ErrTaken (for several keys, a *strategy.KeyError per key, joined) when
// the lock is not held, writing nothing: ErrBroken for a key that a
// Break's mark says was broken. A script on a server that refuses scripts
// gives an error matching errors.ErrUnsupported, writing nothing.
func (s Server) Guard(ctx context.Context, l Lock, shared bool, w strategy.Write) (reply any, err error) {
	if w.Script != "" {
		reply, err = s.guardScript(ctx, l, shared, w)
	} else {
		reply, err = s.guardCommands(ctx, l, shared, w)
	}
	if !s.unmarks && !shared {
		err = s.broken(ctx, l, err)
	}
	return reply, err
}

// guardedScripts names what Guard's scripts are, in the error of a server
// that refuses scripts.
const guardedScripts = "guarded scripts (Lock.GuardCommands runs its commands without them)"

// guardScript is Guard with w.Script.
func (s Server) guardScript(ctx context.Context, l Lock, shared bool, w strategy.Write) (any, error) {
	if s.plain != nil {
		return nil, s.noScripts()
	}
	if err := s.NeedsScripts(nil, guardedScripts); err != nil {
		return nil, err
	}
	keys := append(l.keysAnd(len(w.Keys)), w.Keys...)
	n := 0
	if !shared {
		n = len(l.keys())
	}
	args := append(make([]any, 0, 2+len(w.Args)), l.Value, n)
	args = append(args, w.Args...)
	reply, err := resend(ctx, func() (any, error) { return guardScript(w.Script).Run(ctx, s.Conn, keys, args...) })
	if err != nil {
		return nil, s.NeedsScripts(err, guardedScripts)
	}
	s.Refuses(nil) // the script ran
	r, _ := reply.([]any)
	if len(r) > 0 && r[0] == int64(1) {
		if len(r) == 1 {
			return nil, nil // the body replied nil (or false)
		}
		return r[1], nil
	}
	states, ok := ints(r)
	if !ok || len(states) < 2 {
		return nil, fmt.Errorf("guarded script: got reply %v, want {1, reply} or {0, states...}", reply)
	}
	return nil, l.lost(states[1:])
}

// noScripts is the error of a guarded script on a Server without scripts.
func (s Server) noScripts() error {
	return fmt.Errorf("lock: the conn is marked driver.WithoutScripts, and %s need them: %w", guardedScripts, errors.ErrUnsupported)
}

// lost is the error of a check that found l not held, with one state per
// key.
func (l Lock) lost(states []int64) error {
	if l.Keys == nil {
		return owned(states[0], nil)
	}
	return keyErrors(l.Keys, states)
}

// guardRuns bounds the runs of a guarded transaction that a change of a
// key it watched aborted, such as the lock's own refresh, or a write to
// the data by a client that does not guard it.
const guardRuns = 6

// guardCommands is Guard with w.Commands.
func (s Server) guardCommands(ctx context.Context, l Lock, shared bool, w strategy.Write) (any, error) {
	p, err := s.transactions()
	if err != nil {
		return nil, err
	}
	keys := l.keys()
	watch := append(append(make([]string, 0, len(keys)+len(w.Keys)), keys...), w.Keys...)
	var reads [][]any
	if shared {
		reads = [][]any{{"ZSCORE", l.Key, l.Value}, {"TIME"}}
	} else {
		reads = make([][]any, len(keys))
		for i, k := range keys {
			reads[i] = []any{"GET", k}
		}
	}
	decide := func(_ *session, got []any) ([][]any, error) {
		if shared {
			return w.Commands, leaseOf(got)
		}
		if l.Keys == nil {
			return w.Commands, ownerOf(got[0], l.Value)
		}
		return w.Commands, ownersOf(keys, got, l.Value)
	}
	for range guardRuns / 2 { // transact runs twice before errChanged
		replies, err := p.transact(ctx, l.Key, watch, reads, decide)
		if !errors.Is(err, errChanged) {
			if err != nil {
				return nil, err
			}
			return replies, nil
		}
	}
	return nil, fmt.Errorf("lock: the guarded transaction was aborted %d times by writes to the keys it watched: %w", guardRuns, errChanged)
}

// transactions returns the Server's operations without scripts, which a
// transaction needs whether the server runs scripts or not, or why there
// are none: the driver cannot pin a connection.
func (s Server) transactions() (*plain, error) {
	switch {
	case s.plain != nil:
		return s.plain, nil
	case s.auto != nil && s.auto.plain != nil:
		return s.auto.plain, nil
	case s.auto != nil:
		return nil, fmt.Errorf("lock: guarded commands run in a transaction over one connection, which this driver cannot pin: %w", s.auto.why)
	}
	return nil, fmt.Errorf("lock: guarded commands run in a transaction over one connection, which this Server cannot pin: %w", errors.ErrUnsupported)
}

// leaseOf returns nil if the replies of ZSCORE (the lease's end, in ms)
// and TIME, got, say that the lease has not ended, and ErrExpired
// otherwise: when it ended, or there is none.
func leaseOf(got []any) error {
	now, err := serverTime(got[1])
	if err != nil {
		return err
	}
	us, _ := strconv.ParseInt(now, 10, 64)
	var end float64
	switch v := got[0].(type) {
	case nil:
		return strategy.ErrExpired
	case float64: // RESP3's double
		end = v
	case string:
		if end, err = strconv.ParseFloat(v, 64); err != nil {
			return fmt.Errorf("ZSCORE: got %q, want a number", v)
		}
	default:
		return fmt.Errorf("ZSCORE: got %T, want a number", v)
	}
	if int64(end) <= us/1000 {
		return strategy.ErrExpired
	}
	return nil
}
