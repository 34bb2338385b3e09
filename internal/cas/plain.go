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

// plain runs the package's operations without scripts, for servers that
// forbid them (an ACL without @scripting, a proxy, a managed service):
// nothing it sends is EVAL, EVALSHA, FCALL or SCRIPT. Each operation
// answers as its script does, comparing the whole stored value, with the
// best the server offers: a conditional command (SET NX, DELEX or DELIFEQ,
// SET … IFEQ) where it applies, or else a transaction over one pinned
// connection (docs/strategies.md lists what each operation sends). A
// failed conditional command is followed by a GET, which tells ErrExpired
// from ErrTaken: the lock was lost either way.
//
// A conditional command is tried on first use: a server that lacks it, or
// an ACL that denies it, refuses it without effect, and plain takes the
// transaction, and tries the command again after reprobe, so that a
// rolling upgrade is found (a failover to an older replica refuses it
// again). Such a refusal never becomes ErrNotHeld; a transaction's own
// command refused so matches errors.ErrUnsupported and names the command.
//
// A transaction that a change of a watched key aborts (a nil EXEC; since
// Redis 6.0.9 an expiry counts) is never success: it runs once more and
// reads what changed (the key gone or another value: the lock lost; the
// same value: only the TTL changed). docs/design/without-scripts.md says
// why it works so.
type plain struct {
	conn   driver.Conn
	pinned bool // conn is one connection, pinned already (over)
	*found      // shared with the plains of over
}

// found is what a server was found to have, per conditional command.
type found struct{ setIfEq, delex, delifeq support }

// reprobe is how long plain takes a conditional command that the server
// refused for missing, before it tries it again.
const reprobe = time.Minute

// newPlain returns the script-free operations over c. c must send commands
// of its choice (driver.Commander) over one connection ([driver.Pinnable]):
// a transaction needs one connection for its length. It returns Pinnable's
// error otherwise. On a Cluster, a transaction pins the connection of its
// key's master, and keeps to that key's slot.
func newPlain(c driver.Conn) (*plain, error) {
	if err := driver.Pinnable(c); err != nil {
		return nil, err
	}
	return &plain{conn: c, found: new(found)}, nil
}

// over returns p's operations over one, a connection that the caller has
// pinned to the server of the key they are for, as [Acked] does: they send
// every command there, their transactions included, so that a WAIT that
// follows on one counts the replicas of their writes. What p found the
// server to have is shared.
func (p *plain) over(one driver.Conn) *plain {
	return &plain{conn: one, pinned: true, found: p.found}
}

// support is what plain found a server to have, per conditional command:
// true when the server ran it, false when it refused it as missing (within
// reprobe), absent when it was never tried. For tests and diagnostics.
func (p *plain) support() map[string]bool {
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
// reprobe ago.
func (s *support) missing() bool {
	ok, known := s.known()
	return known && !ok
}

// try sends the conditional command args, unless the server was found to
// lack it less than reprobe ago. It reports done false, and the caller
// takes the transaction, when the server lacks it, now or then.
func (p *plain) try(ctx context.Context, s *support, args ...any) (reply any, done bool, err error) {
	if s.missing() {
		return nil, false, nil
	}
	reply, err = resend(ctx, func() (any, error) { return driver.Do(ctx, p.conn, args...) })
	switch {
	case lacks(err) || denied(err):
		s.state.Store(time.Now().Add(reprobe).UnixNano())
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

// acquireOne is Acquire without scripts, for a lock of Key alone that
// neither fences nor guards: SET NX PX, and when the key exists, unless
// start is BySetOnly, a GET, which finds it held by another value
// (ErrNotObtained) or of another type (WRONGTYPE) in one more round trip,
// and otherwise a transaction that sets it if it is free or holds value.
// A retry (ByScript) starts with the SET too.
func (p *plain) acquireOne(ctx context.Context, l Lock) error {
	if done, err := l.setNX(ctx, p.conn); done {
		return err
	}
	_, err := resend(ctx, func() (struct{}, error) { return struct{}{}, owner(ctx, p.conn, l.Key, l.Value) })
	switch {
	case errors.Is(err, strategy.ErrTaken):
		return strategy.ErrNotObtained
	case err != nil && !errors.Is(err, strategy.ErrExpired):
		return err
	}
	_, err = p.take(ctx, Lock{Key: l.Key, Value: l.Value, TTL: l.TTL})
	return err
}

// take is Acquire without scripts: one transaction that WATCHes l's keys
// and counters and sets every key, if each is free or holds the value,
// and, with fencing counters, increments each and gives it the lifetime
// l.FenceTTL (none when 0). A counter that does not exist starts, as the
// script's does, from the server's clock in microseconds (SET NX), read
// (TIME) with the WATCH and before the MULTI, a round trip before the
// transaction runs rather than within it: a counter that another client
// writes meanwhile aborts the transaction, which reads the clock again. When another value holds a key, it returns ErrNotObtained: for a
// lock of several keys, the *strategy.KeyError of the first such key,
// wrapping it, and that key's remaining TTL. When other clients wrote a
// watched key during both of the transaction's runs, it returns
// strategy.ErrNotObtained: they were taking the lock.
func (p *plain) take(ctx context.Context, l Lock) (r Result, err error) {
	keys, fenceKeys, value, ttl, ms := l.keys(), l.Fences, l.Value, l.TTL, fenceMS(l.FenceTTL)
	watch := append(append(make([]string, 0, len(keys)+len(fenceKeys)), keys...), fenceKeys...)
	reads := make([][]any, 0, len(keys)+1)
	for _, k := range keys {
		reads = append(reads, []any{"GET", k})
	}
	if fenceKeys != nil {
		reads = append(reads, []any{"TIME"})
	}
	replies, err := p.transact(ctx, keys[0], watch, reads, func(s *session, got []any) ([][]any, error) {
		cmds := make([][]any, 0, len(keys)+3*len(fenceKeys))
		for i, k := range keys {
			if v, ok := got[i].(string); ok && v != value {
				if l.Keys == nil {
					return nil, strategy.ErrNotObtained
				}
				ttl, _, err := s.c.PTTL(ctx, k)
				if err != nil {
					return nil, err
				}
				r.HolderTTL = max(ttl, 0)
				return nil, &strategy.KeyError{Key: k, Err: strategy.ErrNotObtained}
			}
			cmds = append(cmds, []any{"SET", k, value, "PX", ttl.Milliseconds()})
		}
		if fenceKeys == nil {
			return cmds, nil
		}
		now, err := serverTime(got[len(got)-1])
		if err != nil {
			return nil, err
		}
		for _, f := range fenceKeys {
			// SET NX rather than a SET when a read found no counter: a
			// counter that expires after the reads starts from the clock
			// too, even on a server before Redis 6.0.9, whose transaction
			// an expiry does not abort.
			cmds = append(cmds, []any{"SET", f, now, "NX"})
			cmds = append(cmds, []any{"INCR", f})
			if ms > 0 {
				cmds = append(cmds, []any{"PEXPIRE", f, ms})
			}
		}
		return cmds, nil
	})
	switch {
	case errors.Is(err, errChanged):
		return Result{}, strategy.ErrNotObtained
	case err != nil:
		return r, err
	case fenceKeys == nil:
		return Result{}, nil
	}
	// After the SETs of the keys, each counter has its SET NX's reply ("OK"
	// or nil), its INCR's, an integer, and, when it has a lifetime, its
	// PEXPIRE's, another.
	per := 1
	if ms > 0 {
		per = 2
	}
	var ints []int64
	for _, reply := range replies[len(keys):] {
		if n, ok := reply.(int64); ok {
			ints = append(ints, n)
		}
	}
	if len(ints) != per*len(fenceKeys) {
		return Result{}, fmt.Errorf("EXEC: got %d integers, want %d per fencing counter, %d", len(ints), per, len(fenceKeys))
	}
	fences := make([]int64, 0, len(fenceKeys))
	for i := 0; i < len(ints); i += per {
		fences = append(fences, ints[i])
	}
	return Result{Fences: fences}, nil
}

// deleteOne is Delete without scripts, of one key.
func (p *plain) deleteOne(ctx context.Context, key, value string) error {
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

// pexpireOne is PExpire without scripts, of Key alone: SET IFEQ where the
// server has it.
func (p *plain) pexpireOne(ctx context.Context, key, value string, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if reply, done, err := p.try(ctx, &p.setIfEq, "SET", key, value, "IFEQ", value, "PX", ms); done {
		return p.answer(ctx, key, reply == "OK", err)
	}
	_, err := p.transact(ctx, key, []string{key}, [][]any{{"GET", key}}, func(_ *session, got []any) ([][]any, error) {
		return [][]any{{"PEXPIRE", key, ms}}, ownerOf(got[0], value)
	})
	return err
}

// set is Set without scripts. As setScript does, it takes
// a key that already holds next for ours (a set whose reply was lost), and
// sets it again: where the server has SET IFEQ, a set conditioned on value
// that did not apply is followed by one conditioned on next.
func (p *plain) set(ctx context.Context, key, value, next string, ttl time.Duration) error {
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
func (p *plain) answer(ctx context.Context, key string, applied bool, err error) error {
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

// inspect is Server.Inspect without scripts and without a queue
// (its waiters poll): MULTI, GET key, PTTL key, GET fenceKey when it is not
// "", EXEC. A user whose ACL denies the counter gets the reading of key
// alone, with Fence 0. A read whose connection was dead is sent once
// more, as every call of the package is (see resend).
func (p *plain) inspect(ctx context.Context, key, fenceKey string) (Reading, error) {
	r, err := p.read(ctx, key, fenceKey)
	if err != nil && fenceKey != "" && denied(err) {
		r, err = p.read(ctx, key, "")
	}
	return r, err
}

func (p *plain) read(ctx context.Context, key, fenceKey string) (Reading, error) {
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
// whose connection was dead is run once more too (see resend).
func (p *plain) transact(ctx context.Context, key string, keys []string, reads [][]any, decide func(s *session, got []any) ([][]any, error)) ([]any, error) {
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
func (p *plain) session(ctx context.Context, key string, f func(*session) error) error {
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

// pexpire is PExpire without scripts: for Key alone, pexpireOne; for
// several keys, one transaction that sets the TTL of every key if each
// holds value, and changes nothing otherwise. (SET IFEQ, which would spare
// the transaction, extends one key at a time: not all or none.)
func (p *plain) pexpire(ctx context.Context, l Lock) error {
	if l.Keys == nil {
		return p.pexpireOne(ctx, l.Key, l.Value, l.TTL)
	}
	keys, value, ttl := l.Keys, l.Value, l.TTL
	reads := make([][]any, len(keys))
	for i, k := range keys {
		reads[i] = []any{"GET", k}
	}
	_, err := p.transact(ctx, keys[0], keys, reads, func(_ *session, got []any) ([][]any, error) {
		cmds := make([][]any, len(keys))
		for i, k := range keys {
			cmds[i] = []any{"PEXPIRE", k, ttl.Milliseconds()}
		}
		return cmds, ownersOf(keys, got, value)
	})
	return err
}

// ownersOf returns nil if every one of keys holds value, as the replies
// of their GETs, got, say, and otherwise the *strategy.KeyError of each
// that does not, wrapping what ownerOf found, joined in the order of keys.
func ownersOf(keys []string, got []any, value string) error {
	var errs []error
	for i, k := range keys {
		err := ownerOf(got[i], value)
		switch {
		case errors.Is(err, strategy.ErrNotHeld):
			errs = append(errs, &strategy.KeyError{Key: k, Err: err})
		case err != nil:
			return err
		}
	}
	return errors.Join(errs...)
}

// delete is Delete without scripts: a deleteOne of each key, which
// deletes it only if it holds value (DELEX IFEQ, DELIFEQ, or a
// transaction, as the server offers), then, with l.Hint, a PUBLISH (or
// SPUBLISH) of the hint on the channel of each key it deleted, best
// effort, as the script's. A release needs no more than
// that: unlike an acquisition or a refresh, it has nothing to undo when
// some keys are not ours. It returns the first error that is not about a
// key (a transport error), after trying every key, so that the caller tries
// again; otherwise the errors of the keys found gone or taken.
func (p *plain) delete(ctx context.Context, l Lock) error {
	if l.Keys == nil {
		err := p.deleteOne(ctx, l.Key, l.Value)
		if err == nil {
			p.hint(ctx, l, l.Key)
		}
		return err
	}
	var lost []error
	var failed error
	for _, k := range l.Keys {
		err := p.deleteOne(ctx, k, l.Value)
		if err == nil {
			p.hint(ctx, l, k)
		}
		switch {
		case errors.Is(err, strategy.ErrNotHeld):
			lost = append(lost, &strategy.KeyError{Key: k, Err: err})
		case err != nil && failed == nil:
			failed = err
		}
	}
	if failed != nil {
		return failed
	}
	return errors.Join(lost...)
}

// hint publishes l.Hint, if any, on the channel of key, if it has one.
func (p *plain) hint(ctx context.Context, l Lock, key string) {
	if l.Hint == "" {
		return
	}
	if channel, ok := WakeChannel(key); ok {
		publish := "PUBLISH"
		if l.Sharded {
			publish = "SPUBLISH"
		}
		_, _ = driver.Do(ctx, p.conn, publish, channel, l.Hint) // best effort, as the script's
	}
}

// pttl is PTTL without scripts: a snapshot, MULTI, GET and PTTL of each
// key, EXEC, compared here.
func (p *plain) pttl(ctx context.Context, l Lock) (time.Duration, error) {
	keys, value := l.keys(), l.Value
	cmds := make([][]any, 0, 2*len(keys))
	for _, k := range keys {
		cmds = append(cmds, []any{"GET", k}, []any{"PTTL", k})
	}
	replies, err := resend(ctx, func() (replies []any, err error) {
		err = p.session(ctx, keys[0], func(s *session) (err error) {
			replies, err = s.exec(ctx, cmds)
			return err
		})
		return replies, err
	})
	if err != nil {
		return 0, err
	}
	// The replies hold the values, and so tokens: never show them in an error.
	least := time.Duration(-1)
	var errs []error
	for i, k := range keys {
		ms, ok := replies[2*i+1].(int64)
		if !ok {
			return 0, fmt.Errorf("PTTL: got reply %T, want an integer", replies[2*i+1])
		}
		ttl, exists := driver.FromPTTL(ms)
		v, _ := replies[2*i].(string)
		switch {
		case !exists:
			errs = append(errs, &strategy.KeyError{Key: k, Err: strategy.ErrExpired})
		case v != value:
			errs = append(errs, &strategy.KeyError{Key: k, Err: strategy.ErrTaken})
		case ttl >= 0 && (least < 0 || ttl < least):
			least = ttl
		}
	}
	switch {
	case errs != nil && l.Keys == nil:
		return 0, errs[0].(*strategy.KeyError).Err
	case errs != nil:
		return 0, errors.Join(errs...)
	}
	return least, nil
}

// runPlain runs c without scripts, over p, as the operation that built it
// says. The guarded acquire has no form without scripts: it returns an
// error that matches errors.ErrUnsupported. A waiter's acquisition goes
// unqueued: there is no queue without scripts.
func (c Call) runPlain(ctx context.Context, p *plain) (Result, error) {
	l := c.l
	switch c.op {
	case opAcquire:
		switch {
		case l.GuardKey != "":
			return Result{}, fmt.Errorf("lock: this call has no form without scripts: %w", errors.ErrUnsupported)
		case l.Keys == nil && l.Fences == nil:
			return Result{}, p.acquireOne(ctx, l)
		}
		return p.take(ctx, l)
	case opDelete:
		return Result{}, p.delete(ctx, l)
	case opPExpire:
		return Result{}, p.pexpire(ctx, l)
	case opPTTL:
		ttl, err := p.pttl(ctx, l)
		return Result{TTL: ttl}, err
	}
	return Result{}, p.set(ctx, l.Key, l.Value, c.next, l.TTL)
}
