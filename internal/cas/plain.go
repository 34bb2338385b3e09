package cas

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/strategy"
)

// Plain runs the package's operations without scripts, for servers that
// forbid them (an ACL without @scripting, a proxy, a managed service):
// nothing it sends is EVAL, EVALSHA, FCALL or SCRIPT. Each operation uses
// the best that the server offers, and answers as its script does, with the
// whole stored value compared:
//
//   - Acquire: SET key value NX PX ttl; when the key exists, a transaction
//     that sets it again if it holds value (a retry, or a lock handed over).
//   - Delete: DELEX key IFEQ value, or DELIFEQ key value, or else a
//     transaction: WATCH key, GET key, compared here, then MULTI, DEL, EXEC.
//   - PExpire: SET key value IFEQ value PX ttl, or else a transaction with
//     PEXPIRE.
//   - AcquireFenced: a transaction that WATCHes the key and the counter,
//     then sets the key and increments the counter.
//   - PTTL and Inspect: a MULTI, GET, PTTL, EXEC snapshot, compared here.
//   - Set: SET key next IFEQ value PX ttl, or else a transaction with SET.
//
// A conditional command that fails (DELEX IFEQ, say) is followed by a GET,
// which tells ErrExpired from ErrTaken: the lock was lost either way, and
// which one is what the key held an instant later.
//
// Detection: Plain tries a conditional command on first use. A server that
// lacks it refuses it without effect, as an unknown command (DELEX,
// DELIFEQ) or as a syntax error (SET … IFEQ), and so does an ACL that
// denies it (NOPERM); Plain then takes the transaction, and tries the
// command again only after [Reprobe], so that a rolling upgrade is found.
// A server that stops having it (a failover to an older replica) refuses
// it again, and the call takes the transaction. Such a refusal never
// becomes ErrNotHeld; a transaction's own command refused so is an error
// that matches errors.ErrUnsupported and names what the server lacks. The
// trial costs no command of its own, needs no permission for COMMAND or for
// a key of its own, and tells what the server does for the user, not only
// what it knows.
//
// Transactions run over one connection, pinned (driver.Pinner) for their
// length. A transaction that a change of a watched key aborts (a nil EXEC;
// since Redis 6.0.9 an expiry counts) is never success: it is run once
// more, and reads what changed (the key gone, or another value: the lock
// lost; the same value: only the TTL changed) and decides again.
type Plain struct {
	conn   driver.Conn
	pinned bool // conn is one connection, pinned already (Over)
	*found      // shared with the Plains of Over
}

// found is what a server was found to have, per conditional command.
type found struct{ setIfEq, delex, delifeq support }

// Reprobe is how long Plain takes a conditional command that the server
// refused for missing, before it tries it again.
const Reprobe = time.Minute

// NewPlain returns the script-free operations over c. c must send commands
// of its choice (driver.Commander) over one connection ([driver.Pinnable]):
// a transaction needs one connection for its length. It returns Pinnable's
// error otherwise. On a Cluster, a transaction pins the connection of its
// key's master, and keeps to that key's slot.
func NewPlain(c driver.Conn) (*Plain, error) {
	if err := driver.Pinnable(c); err != nil {
		return nil, err
	}
	return &Plain{conn: c, found: new(found)}, nil
}

// Over returns p's operations over one, a connection that the caller has
// pinned to the server of the key they are for, as [Acked] does: they send
// every command there, their transactions included, so that a WAIT that
// follows on one counts the replicas of their writes. What p found the
// server to have is shared.
func (p *Plain) Over(one driver.Conn) *Plain {
	return &Plain{conn: one, pinned: true, found: p.found}
}

// Support is what Plain found a server to have, per conditional command:
// true when the server ran it, false when it refused it as missing (within
// Reprobe), absent when it was never tried. For tests and diagnostics.
func (p *Plain) Support() map[string]bool {
	m := map[string]bool{}
	for name, s := range map[string]*support{"SET IFEQ": &p.setIfEq, "DELEX": &p.delex, "DELIFEQ": &p.delifeq} {
		if ok, known := s.known(); known {
			m[name] = ok
		}
	}
	return m
}

// support is what a server was found to do with a conditional command.
type support struct {
	state atomic.Int64 // 0: never tried; 1: ran it; otherwise the UnixNano until which it is taken as missing
}

func (s *support) known() (ok, known bool) {
	switch v := s.state.Load(); v {
	case 0:
		return false, false
	case 1:
		return true, true
	default:
		return false, time.Now().UnixNano() < v
	}
}

// missing reports whether the command was refused as missing less than
// Reprobe ago.
func (s *support) missing() bool {
	ok, known := s.known()
	return known && !ok
}

// try sends the conditional command args, unless the server was found to
// lack it less than Reprobe ago. It reports done false, and the caller
// takes the transaction, when the server lacks it, now or then.
func (p *Plain) try(ctx context.Context, s *support, args ...any) (reply any, done bool, err error) {
	if s.missing() {
		return nil, false, nil
	}
	reply, err = resend(ctx, func() (any, error) { return driver.Do(ctx, p.conn, args...) })
	switch {
	case lacks(err) || denied(err):
		s.state.Store(time.Now().Add(Reprobe).UnixNano())
		return nil, false, nil
	case err == nil:
		s.state.Store(1)
	}
	return reply, true, err
}

// lacks reports whether err is a server's refusal of a command it does not
// have: an unknown command, or an unknown option (a syntax error). rueidis
// drops the error's ERR prefix.
func lacks(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "syntax error")
}

// Acquire is the package's [Acquire] without scripts: SET NX PX, and when
// the key exists, unless start is BySetOnly, a GET, which finds it held by
// another value (ErrNotObtained) or of another type (WRONGTYPE) in one
// more round trip, and otherwise a transaction that sets it if it is free
// or holds value. A retry (ByScript) starts with the SET too.
func (p *Plain) Acquire(ctx context.Context, key, value string, ttl time.Duration, start Start) error {
	ok, err := p.conn.SetNX(ctx, key, value, ttl)
	switch {
	case err == nil && ok:
		return nil
	case err != nil && !(neterr.Dead(err) && ctx.Err() == nil):
		return err
	case err == nil && start == BySetOnly:
		return strategy.ErrNotObtained
	}
	_, err = resend(ctx, func() (struct{}, error) { return struct{}{}, owner(ctx, p.conn, key, value) })
	switch {
	case errors.Is(err, strategy.ErrTaken):
		return strategy.ErrNotObtained
	case err != nil && !errors.Is(err, strategy.ErrExpired):
		return err
	}
	_, err = p.take(ctx, key, "", value, ttl)
	return err
}

// AcquireFenced is the package's [AcquireFenced] without scripts, in one
// transaction that WATCHes key and fenceKey. A counter that does not exist
// starts, as the script's does, from the server's clock in microseconds,
// read (TIME) with the WATCH and before the MULTI, a round trip before the
// transaction runs rather than within it: a counter that another client
// creates meanwhile aborts the transaction, which reads it again.
func (p *Plain) AcquireFenced(ctx context.Context, key, fenceKey, value string, ttl time.Duration) (int64, error) {
	return p.take(ctx, key, fenceKey, value, ttl)
}

// take sets key to value for ttl, in a transaction, if key is free or
// holds value; with a fenceKey, it also increments that counter and returns
// its new value. It returns ErrNotObtained when another value holds key,
// or when other clients wrote key or the counter during each of the
// transaction's two runs: they were taking the lock.
func (p *Plain) take(ctx context.Context, key, fenceKey, value string, ttl time.Duration) (int64, error) {
	keys := []string{key}
	if fenceKey != "" {
		keys = append(keys, fenceKey)
	}
	reads := [][]any{{"GET", key}}
	if fenceKey != "" {
		reads = append(reads, []any{"EXISTS", fenceKey}, []any{"TIME"})
	}
	replies, err := p.transact(ctx, key, keys, reads, func(_ *session, got []any) ([][]any, error) {
		if v, ok := got[0].(string); ok && v != value {
			return nil, strategy.ErrNotObtained
		}
		cmds := [][]any{{"SET", key, value, "PX", ttl.Milliseconds()}}
		if fenceKey == "" {
			return cmds, nil
		}
		if got[1] == int64(0) {
			now, err := serverTime(got[2])
			if err != nil {
				return nil, err
			}
			cmds = append(cmds, []any{"SET", fenceKey, now})
		}
		return append(cmds, []any{"INCR", fenceKey}), nil
	})
	if errors.Is(err, errChanged) {
		// Other clients wrote the key or the counter during both
		// transactions: they were taking the lock.
		err = strategy.ErrNotObtained
	}
	if err != nil || fenceKey == "" {
		return 0, err
	}
	n, ok := replies[len(replies)-1].(int64)
	if !ok {
		return 0, fmt.Errorf("INCR: got reply %T, want an integer", replies[len(replies)-1])
	}
	return n, nil
}

// Delete is the package's [Delete] without scripts.
func (p *Plain) Delete(ctx context.Context, key, value string) error {
	for _, d := range []struct {
		s    *support
		args []any
	}{{&p.delex, []any{"DELEX", key, "IFEQ", value}}, {&p.delifeq, []any{"DELIFEQ", key, value}}} {
		if reply, done, err := p.try(ctx, d.s, d.args...); done {
			return p.answer(ctx, key, reply == int64(1), err)
		}
	}
	_, err := p.transact(ctx, key, []string{key}, [][]any{{"GET", key}}, func(_ *session, got []any) ([][]any, error) {
		return [][]any{{"DEL", key}}, ownerOf(got[0], value)
	})
	return err
}

// PExpire is the package's [PExpire] without scripts.
func (p *Plain) PExpire(ctx context.Context, key, value string, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if reply, done, err := p.try(ctx, &p.setIfEq, "SET", key, value, "IFEQ", value, "PX", ms); done {
		return p.answer(ctx, key, reply == "OK", err)
	}
	_, err := p.transact(ctx, key, []string{key}, [][]any{{"GET", key}}, func(_ *session, got []any) ([][]any, error) {
		return [][]any{{"PEXPIRE", key, ms}}, ownerOf(got[0], value)
	})
	return err
}

// Set is the package's [Set] without scripts. As setScript does, it takes
// a key that already holds next for ours (a set whose reply was lost), and
// sets it again: where the server has SET IFEQ, a set conditioned on value
// that did not apply is followed by one conditioned on next.
func (p *Plain) Set(ctx context.Context, key, value, next string, ttl time.Duration) error {
	set := []any{"SET", key, next}
	if ttl > 0 {
		set = append(set, "PX", ttl.Milliseconds())
	}
	for _, ours := range []string{value, next} {
		reply, done, err := p.try(ctx, &p.setIfEq, slices.Concat(set, []any{"IFEQ", ours})...)
		switch {
		case !done:
			_, err := p.transact(ctx, key, []string{key}, [][]any{{"GET", key}}, func(_ *session, got []any) ([][]any, error) {
				return [][]any{set}, ownerOf(got[0], value, next)
			})
			return err
		case err != nil || reply == "OK":
			return err
		}
	}
	return p.answer(ctx, key, false, nil)
}

// answer turns a conditional command's outcome into nil, err, or, when it
// did not apply, ErrExpired or ErrTaken as a GET finds the key.
func (p *Plain) answer(ctx context.Context, key string, applied bool, err error) error {
	if err != nil || applied {
		return err
	}
	_, ok, err := p.conn.Get(ctx, key)
	switch {
	case err != nil:
		return err
	case ok:
		return strategy.ErrTaken
	}
	return strategy.ErrExpired
}

// owner returns nil if key holds one of ours, and ErrExpired or ErrTaken
// otherwise.
func owner(ctx context.Context, c driver.Conn, key string, ours ...string) error {
	v, ok, err := c.Get(ctx, key)
	switch {
	case err != nil:
		return err
	case !ok:
		return strategy.ErrExpired
	case !slices.Contains(ours, v):
		return strategy.ErrTaken
	}
	return nil
}

// ownerOf is owner of a key whose GET replied reply (nil, a string, or its
// error).
func ownerOf(reply any, ours ...string) error {
	switch v := reply.(type) {
	case nil:
		return strategy.ErrExpired
	case string:
		if !slices.Contains(ours, v) {
			return strategy.ErrTaken
		}
		return nil
	case error:
		return v
	}
	return fmt.Errorf("GET: got reply %T, want a string", reply)
}

// PTTL is the package's [PTTL] without scripts.
func (p *Plain) PTTL(ctx context.Context, key, value string) (time.Duration, error) {
	r, err := p.Inspect(ctx, key, "")
	switch {
	case err != nil:
		return 0, err
	case !r.Exists:
		return 0, strategy.ErrExpired
	case r.Value != value:
		return 0, strategy.ErrTaken
	}
	return r.TTL, nil
}

// Inspect is the package's [Inspect] without scripts and without a queue
// (its waiters poll): MULTI, GET key, PTTL key, GET fenceKey when it is not
// "", EXEC. A user whose ACL denies the counter gets the reading of key
// alone, with Fence 0. A read whose connection was dead is sent once
// more, as every call of the package is (see call.run).
func (p *Plain) Inspect(ctx context.Context, key, fenceKey string) (Reading, error) {
	r, err := p.inspect(ctx, key, fenceKey)
	if err != nil && fenceKey != "" && denied(err) {
		r, err = p.inspect(ctx, key, "")
	}
	return r, err
}

func (p *Plain) inspect(ctx context.Context, key, fenceKey string) (Reading, error) {
	cmds := [][]any{{"GET", key}, {"PTTL", key}}
	if fenceKey != "" {
		cmds = append(cmds, []any{"GET", fenceKey})
	}
	replies, err := resend(ctx, func() (replies []any, err error) {
		err = p.session(ctx, key, func(s *session) (err error) {
			replies, err = s.exec(ctx, cmds)
			return err
		})
		return replies, err
	})
	if err != nil {
		return Reading{}, err
	}
	// The replies hold the value, and so a token: never show it in an error.
	pttl, ok := replies[1].(int64)
	if !ok {
		return Reading{}, fmt.Errorf("PTTL: got reply %T, want an integer", replies[1])
	}
	var r Reading
	if fenceKey != "" && replies[2] != nil {
		f, _ := replies[2].(string)
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return Reading{}, fmt.Errorf("WRONGTYPE the fencing counter %s is not a number", fenceKey)
		}
		r.Fence = n
	}
	ttl, exists := driver.FromPTTL(pttl)
	if !exists {
		return r, nil
	}
	r.Exists, r.TTL = true, ttl
	r.Value, _ = replies[0].(string)
	return r, nil
}

// errChanged is the error of a transaction that a change of a key it
// watched aborted (a nil EXEC); transact returns it when that happened to
// both of its runs.
var errChanged = errors.New("lock: a transaction was aborted: a key it watched changed")

// transact runs, over one pinned connection, WATCH keys and the commands
// reads, then decide, which gets the session and the replies of reads and
// returns the commands to run between MULTI and EXEC, or an error (and the
// transaction is not run); it returns EXEC's replies, one per command.
// Over a Conn that pipelines (driver.Pipeliner), that is two round trips:
// WATCH with the reads, then MULTI, the commands and EXEC. A read that
// failed (WRONGTYPE, say) is the error, and decide does not run. A
// transaction aborted by a change of a watched key (a nil EXEC) is run
// once more, reads included; a second abort is errChanged. A transaction
// whose connection was dead is run once more too (see call.run).
func (p *Plain) transact(ctx context.Context, key string, keys []string, reads [][]any, decide func(s *session, got []any) ([][]any, error)) ([]any, error) {
	watch := make([][]any, 1, 1+len(reads))
	watch[0] = make([]any, 1, 1+len(keys))
	watch[0][0] = "WATCH"
	for _, k := range keys {
		watch[0] = append(watch[0], k)
	}
	watch = append(watch, reads...)
	for range 2 {
		replies, err := resend(ctx, func() (replies []any, err error) {
			err = p.session(ctx, key, func(s *session) error {
				got, err := s.pipeline(ctx, watch)
				if err != nil {
					return err
				}
				for _, r := range got { // WATCH's, then each read's
					if err, ok := r.(error); ok {
						return err
					}
				}
				cmds, err := decide(s, got[1:])
				if err != nil {
					return err
				}
				replies, err = s.exec(ctx, cmds)
				return err
			})
			return replies, err
		})
		if !errors.Is(err, errChanged) {
			return replies, err
		}
	}
	return nil, errChanged
}

// session runs f with a session over one connection of p's, for key:
// p's own when it is pinned already, or one pinned for f.
func (p *Plain) session(ctx context.Context, key string, f func(*session) error) error {
	run := func(c driver.Conn) error {
		s := &session{c: c}
		defer s.close(ctx)
		return f(s)
	}
	if p.pinned {
		return run(p.conn)
	}
	return driver.Pin(ctx, p.conn, key, run)
}

// A session is a pinned connection during a transaction. It remembers
// what would leave the connection in a transaction's state (a WATCH, or a
// MULTI without its EXEC's answer), so that close undoes it before the
// connection goes back to its pool, where the next caller would otherwise
// find its commands queued or its transaction aborted.
type session struct {
	c    driver.Conn
	undo string // "UNWATCH", "DISCARD", or "" when the connection is clean
}

// abortTimeout bounds the undoing of a transaction that failed half-way,
// which close sends even after its context ended: the call returns that
// much past its deadline at most, on a server that does not answer.
const abortTimeout = 100 * time.Millisecond

// exec runs cmds between MULTI and EXEC and returns their replies, in one
// round trip over a Conn that pipelines. A command that the server refuses
// as it queues it aborts the transaction, with that command's error. A nil
// EXEC is errChanged; a command that failed within EXEC gives its error.
func (s *session) exec(ctx context.Context, cmds [][]any) ([]any, error) {
	tx := make([][]any, 0, 2+len(cmds))
	tx = append(append(append(tx, []any{"MULTI"}), cmds...), []any{"EXEC"})
	replies, err := s.pipeline(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, r := range replies { // MULTI's and each QUEUED, then EXEC's
		if err, ok := r.(error); ok {
			return nil, err
		}
	}
	replies, err = execReply(replies[len(replies)-1], len(cmds))
	if err != nil {
		return nil, err
	}
	for _, r := range replies {
		if err, ok := r.(error); ok {
			return nil, err
		}
	}
	return replies, nil
}

// execReply returns the replies of EXEC's reply, n of them, with a
// command's error in its place, or errChanged for a nil EXEC.
func execReply(reply any, n int) ([]any, error) {
	if reply == nil {
		return nil, errChanged
	}
	replies, ok := reply.([]any)
	if !ok || len(replies) != n {
		return nil, fmt.Errorf("EXEC: got reply %T, want %d replies", reply, n)
	}
	return replies, nil
}

// pipeline sends cmds over the session's connection, in one round trip if
// it pipelines (driver.Pipeline), as do sends one: a first command WATCH or
// MULTI sets what close undoes, and a last command EXEC that got an
// answer clears it.
func (s *session) pipeline(ctx context.Context, cmds [][]any) ([]any, error) {
	switch cmds[0][0] {
	case "WATCH":
		s.undo = "UNWATCH"
	case "MULTI":
		s.undo = "DISCARD"
	}
	replies, err := driver.Pipeline(ctx, s.c, cmds)
	if err != nil {
		return nil, err
	}
	for i, r := range replies {
		if err, ok := r.(error); ok && lacks(err) {
			return nil, fmt.Errorf("lock: the server lacks %s, which locks without scripts need: %w", cmds[i][0], errors.ErrUnsupported)
		}
	}
	last := replies[len(replies)-1]
	if err, _ := last.(error); cmds[len(cmds)-1][0] == "EXEC" && !neterr.Unanswered(err) && !errors.Is(err, context.Canceled) {
		s.undo = ""
	}
	return replies, nil
}

// serverTime returns the server's clock in microseconds, from reply,
// TIME's.
func serverTime(reply any) (string, error) {
	t, _ := reply.([]any)
	if len(t) != 2 {
		return "", fmt.Errorf("TIME: got reply %T, want two numbers", reply)
	}
	sec, ok1 := t[0].(string)
	usec, ok2 := t[1].(string)
	if !ok1 || !ok2 || len(usec) > 6 {
		return "", fmt.Errorf("TIME: got {%T, %T}, want two numbers", t[0], t[1])
	}
	return sec + strings.Repeat("0", 6-len(usec)) + usec, nil
}

// close undoes what the session left, within abortTimeout of ctx even if
// ctx has ended: a connection whose command got no answer is one that its
// driver closes, or that answers in order.
func (s *session) close(ctx context.Context) {
	if s.undo == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	_, _ = driver.Do(ctx, s.c, s.undo)
}
