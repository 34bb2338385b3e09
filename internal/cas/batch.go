package cas

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/strategy"
)

// PerScript is the most locks that one call of a batch carries: a script,
// or a transaction without scripts. A server runs either without serving
// anyone else, some 2 to 3 µs a lock, so that 1000 locks stall its other
// clients about as long as a large MGET would. A larger group is split
// into several calls, which a Conn that pipelines sends in one round trip
// (driver.Pipeliner), the server serving others between them.
const PerScript = 1000

// A Batch is a batched refresh on one server (strategy.Batcher): what to
// do to each of its locks' keys, if the key holds one of the lock's
// values, and how the locks are split into calls, one per group of keys
// that one script can name (see Groups), a group of more than PerScript
// locks into several. [Server.Batch] runs it.
type Batch struct {
	keys  []string
	parts [][]int // the indexes of the locks of each call

	script *driver.Script
	args   func(i int) []any    // lock i's arguments to script
	ours   func(i int) []string // without scripts: the values that lock i's key may hold
	cmd    func(i int) []any    // without scripts: the command to run on lock i's key, when it holds one of ours
}

// split returns gs, with each group of more than PerScript indexes split
// into groups of PerScript and what is left.
func split(gs [][]int) [][]int {
	var parts [][]int
	for _, g := range gs {
		for len(g) > PerScript {
			parts = append(parts, g[:PerScript:PerScript])
			g = g[PerScript:]
		}
		if len(g) > 0 {
			parts = append(parts, g)
		}
	}
	return parts
}

var (
	// pexpireEachScript extends each key that holds its value, ARGV[a + 1],
	// to ARGV[a + 2] ms.
	pexpireEachScript = eachScript(`2`, `v == ARGV[a + 1]`, `r[i] = redis.call('PEXPIRE', KEYS[i], ARGV[a + 2])`)

	// setEachScript is setScript for each key: it replaces any of the
	// key's ARGV[a + 3] values, ARGV[a + 4] on, with ARGV[a + 1], expiring
	// after ARGV[a + 2] ms when that is positive; a key that holds
	// ARGV[a + 1] already gets it again.
	setEachScript = eachScript(`3 + tonumber(ARGV[a + 3])`, `v == ARGV[a + 1] or among(v, a + 4, a + 3 + tonumber(ARGV[a + 3]))`,
		`if tonumber(ARGV[a + 2]) > 0 then
			redis.call('SET', KEYS[i], ARGV[a + 1], 'PX', ARGV[a + 2])
		else
			redis.call('SET', KEYS[i], ARGV[a + 1])
		end
		r[i] = 1`)
)

// PExpireBatch is the batch that sets the TTL of each of keys, keys[i] to
// ttls[i], if it holds values[i], in groups gs (see Groups).
func PExpireBatch(keys, values []string, ttls []time.Duration, gs [][]int) Batch {
	return Batch{
		keys: keys, parts: split(gs), script: pexpireEachScript,
		args: func(i int) []any { return []any{values[i], ttls[i].Milliseconds()} },
		ours: func(i int) []string { return values[i : i+1] },
		cmd:  func(i int) []any { return []any{"PEXPIRE", keys[i], ttls[i].Milliseconds()} },
	}
}

// SetBatch is the batch that does [Set] to each of keys, in groups gs (see
// Groups): keys[i]'s value, if it is values[i], one of unsures[i], or
// nexts[i] already, becomes nexts[i], expiring after ttls[i] (never when it
// is 0).
func SetBatch(keys, values []string, unsures [][]string, nexts []string, ttls []time.Duration, gs [][]int) Batch {
	return Batch{
		keys: keys, parts: split(gs), script: setEachScript,
		args: func(i int) []any {
			args := []any{nexts[i], ttls[i].Milliseconds(), 1 + len(unsures[i]), values[i]}
			for _, v := range unsures[i] {
				args = append(args, v)
			}
			return args
		},
		ours: func(i int) []string { return slices.Concat(values[i:i+1], unsures[i], nexts[i:i+1]) },
		cmd: func(i int) []any {
			if ttls[i] > 0 {
				return []any{"SET", keys[i], nexts[i], "PX", ttls[i].Milliseconds()}
			}
			return []any{"SET", keys[i], nexts[i]}
		},
	}
}

// Batch runs b on the server, and returns each lock's error (nil,
// strategy.ErrExpired, strategy.ErrTaken, the server's error about its
// key, or the error of a call that got no answer) and whether its call got
// an answer, as scatter does.
//
// With scripts, every call is sent in one round trip, and in one more
// those whose server lacked the script (driver.Script.RunEach), over a
// Conn that pipelines; otherwise one after another. Without scripts, each
// call is a transaction (see plain.each), side by side as scatter sends
// them.
//
// A Server from Detecting whose server refuses scripts runs the calls
// that it refused without scripts.
//
// With ack.Replicas, each call runs on a connection pinned to the master
// of its keys, followed by WAIT there (see [Acked]), the calls side by side
// as scatter sends them. A call that too few replicas acknowledged gives
// each of its locks, but those that failed on their own, the
// *strategy.ReplicaError.
//
// A lock whose key is gone is reported broken where a Break's mark says so
// (see MarkBroken).
func (s Server) Batch(ctx context.Context, b Batch, ack Ack) ([]error, []bool) {
	errs, answered := s.batch(ctx, b, ack)
	if !s.unmarks {
		s.brokenEach(ctx, b, errs)
	}
	return errs, answered
}

// batch is Batch, but for the marks of Breaks.
func (s Server) batch(ctx context.Context, b Batch, ack Ack) ([]error, []bool) {
	if ack.Replicas > 0 {
		return s.batchAcked(ctx, b, ack)
	}
	if !s.Scripts() {
		return s.batchPlain(ctx, b, b.parts)
	}
	calls := make([]driver.Call, len(b.parts))
	for k, at := range b.parts {
		calls[k] = b.call(at)
	}
	b.script.RunEach(ctx, s.Conn, calls)
	var dead []int // the calls whose connection was dead, sent once more, as resend does
	for k := range calls {
		if neterr.Dead(calls[k].Err) && ctx.Err() == nil {
			dead = append(dead, k)
		}
	}
	if dead != nil {
		again := make([]driver.Call, len(dead))
		for j, k := range dead {
			again[j] = b.call(b.parts[k])
		}
		b.script.RunEach(ctx, s.Conn, again)
		for j, k := range dead {
			calls[k] = again[j]
		}
	}
	errs, answered := make([]error, len(b.keys)), make([]bool, len(b.keys))
	var refused [][]int // the calls whose server refused scripts
	for k, at := range b.parts {
		if s.Refuses(calls[k].Err) {
			refused = append(refused, at)
			continue
		}
		es, err := eachReply(b.script, calls[k].Keys, calls[k].Reply, calls[k].Err)
		spread(errs, answered, at, es, err)
	}
	if refused != nil {
		es, an := s.batchPlain(ctx, b, refused)
		for _, at := range refused {
			for _, i := range at {
				errs[i], answered[i] = es[i], an[i]
			}
		}
	}
	return errs, answered
}

// batchPlain runs the calls of b's locks in parts without scripts, side by
// side, as scatter sends them.
func (s Server) batchPlain(ctx context.Context, b Batch, parts [][]int) ([]error, []bool) {
	p, err := s.scriptless()
	return scatter(len(b.keys), parts, func(at []int) ([]error, error) {
		if err != nil {
			return nil, err
		}
		return p.each(ctx, b, at)
	})
}

// batchAcked is Batch with ack.Replicas.
func (s Server) batchAcked(ctx context.Context, b Batch, ack Ack) ([]error, []bool) {
	return scatter(len(b.keys), b.parts, func(at []int) (es []error, err error) {
		err = Acked(ctx, s.Conn, b.keys[at[0]], ack, func(one driver.Conn) (err error) {
			es, err = s.Over(one).part(ctx, b, at)
			return err
		})
		return es, err
	})
}

// part runs the call of b's locks at: the script, or without scripts a
// transaction.
func (s Server) part(ctx context.Context, b Batch, at []int) (es []error, err error) {
	err = s.either(func() error {
		call := b.call(at)
		reply, err := resend(ctx, func() (any, error) { return b.script.Run(ctx, s.Conn, call.Keys, call.Args...) })
		if err != nil {
			return err
		}
		es, err = eachReply(b.script, call.Keys, reply, nil)
		return err
	}, func(p *plain) (err error) {
		es, err = p.each(ctx, b, at)
		return err
	})
	return es, err
}

// call returns the script's call for b's locks at.
func (b Batch) call(at []int) driver.Call {
	var args []any
	for _, i := range at {
		args = append(args, b.args(i)...)
	}
	return driver.Call{Keys: pick(b.keys, at), Args: args}
}

// eachScript returns the script of many locks, each with its own
// arguments, step of them (a Lua expression) for KEYS[i], from ARGV[a + 1]
// on, in one call (strategy.Batcher): for each key that holds one of the
// lock's values, as the Lua condition ours says of the key's value v, it
// runs body, which sets r[i]. It replies with one element per key: body's,
// noKey or otherOwner, or the error that reading the key gave (a key of
// another type), so that one key's error is its own and the others are
// still acted on. ours may call among(v, from, to): whether v is one of
// ARGV[from] to ARGV[to].
func eachScript(step, ours, body string) *driver.Script {
	return driver.NewScript(`local function among(v, from, to)
	for j = from, to do
		if v == ARGV[j] then
			return true
		end
	end
	return false
end
local r = {}
local a = 0
for i = 1, #KEYS do
	local v = redis.pcall('GET', KEYS[i])
	if type(v) == 'table' then
		r[i] = v.err
	elseif v and (` + ours + `) then
		` + body + `
	elseif v then
		r[i] = ` + strconv.Itoa(otherOwner) + `
	else
		r[i] = ` + strconv.Itoa(noKey) + `
	end
	a = a + ` + step + `
end
return r`)
}

// eachReply returns each key's error from the reply of s, a script of
// eachScript, over keys, or nil and err when the call failed.
func eachReply(s *driver.Script, keys []string, reply any, err error) ([]error, error) {
	if err != nil {
		return nil, err
	}
	r, ok := reply.([]any)
	if !ok || len(r) != len(keys) {
		return nil, fmt.Errorf("script %.8s over %d keys: got reply %v, want one element per key", s.SHA1(), len(keys), reply)
	}
	errs := make([]error, len(keys))
	for i, v := range r {
		switch v := v.(type) {
		case int64:
			errs[i] = owned(v, nil)
		case string:
			errs[i] = errors.New(v)
		default:
			errs[i] = fmt.Errorf("script %.8s, key %q: got reply %v, want an integer or an error", s.SHA1(), keys[i], v)
		}
	}
	return errs, nil
}

// each runs b's locks at in one transaction over a pinned connection, in
// two round trips over a Conn that pipelines: WATCH of their keys and a
// GET of each; then MULTI, b's command for each lock whose key holds one
// of its values, and EXEC. A transaction that a change of a watched key
// aborted is run once more; after a second abort, each lock is run in a
// transaction of its own, so that a lock whose key keeps changing (lost,
// or released) does not fail the others.
func (p *plain) each(ctx context.Context, b Batch, at []int) ([]error, error) {
	for range 2 {
		errs, err := resend(ctx, func() (errs []error, err error) {
			err = p.session(ctx, b.keys[at[0]], func(s *session) error {
				errs, err = s.each(ctx, b, at)
				return err
			})
			return errs, err
		})
		if !errors.Is(err, errChanged) {
			return errs, err
		}
	}
	errs := make([]error, len(at))
	for k, i := range at {
		_, errs[k] = p.transact(ctx, b.keys[i], b.keys[i:i+1], [][]any{{"GET", b.keys[i]}}, func(_ *session, got []any) ([][]any, error) {
			return [][]any{b.cmd(i)}, ownerOf(got[0], b.ours(i)...)
		})
	}
	return errs, nil
}

// each is plain.each's transaction, once, over the session's connection.
func (s *session) each(ctx context.Context, b Batch, at []int) ([]error, error) {
	read := make([][]any, 1, 1+len(at))
	read[0] = []any{"WATCH"}
	for _, i := range at {
		read[0] = append(read[0], b.keys[i])
		read = append(read, []any{"GET", b.keys[i]})
	}
	replies, err := s.pipeline(ctx, read)
	if err != nil {
		return nil, err
	}
	if err, ok := replies[0].(error); ok { // unwatched, nothing may be written
		return nil, err
	}
	errs := make([]error, len(at))
	tx := [][]any{{"MULTI"}}
	var in []int // the indexes in at of the locks in tx
	for k, i := range at {
		switch v := replies[1+k].(type) {
		case nil:
			errs[k] = strategy.ErrExpired
		case string:
			if !slices.Contains(b.ours(i), v) {
				errs[k] = strategy.ErrTaken
				break
			}
			tx, in = append(tx, b.cmd(i)), append(in, k)
		case error:
			if neterr.Unanswered(v) || ctx.Err() != nil {
				return nil, v
			}
			errs[k] = v
		default:
			errs[k] = fmt.Errorf("GET %q: got reply %T, want a string", b.keys[i], v)
		}
	}
	if len(in) == 0 {
		return errs, nil // close sends UNWATCH
	}
	replies, err = s.pipeline(ctx, append(tx, []any{"EXEC"}))
	if err != nil {
		return nil, err
	}
	for _, r := range replies {
		if err, ok := r.(error); ok { // refused as it was queued (EXEC aborted the transaction), or unanswered
			return nil, err
		}
	}
	exec, err := execReply(replies[len(replies)-1], len(in))
	if err != nil {
		return nil, err
	}
	for j, k := range in {
		if err, ok := exec[j].(error); ok {
			errs[k] = err
		}
	}
	return errs, nil
}
