// Package cas holds the compare-and-act operations that strategies share:
// each acts on a lock's keys only while they hold the caller's value,
// atomically, and tells "gone" from "held by another value". A lock of one
// key is a lock of several with one, from the [Lock] that names it down to
// the Lua: one [Call] for each operation ([Acquire], [PExpire], [PTTL],
// [Delete], [Set]), run by [Server.Run] with scripts (scripts.go) or
// without them, for servers that forbid them (plain.go). Only a lock of one
// key that neither fences, nor guards, nor waits starts with a bare SET NX
// PX, the cheapest command for a free key. A call whose pooled connection
// turns out dead is sent once more (see resend).
package cas

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/strategy"
)

// Lock is a lock on one server, or on one Cluster slot, and what an
// operation on it needs. A lock of one key is a slice of one: Key, with
// Keys nil, so that it allocates no slice. A lock of several keys has
// Keys, and Key their first. On a Cluster, every key that a Lock names
// (its keys, their counters, queues and the guard's record) must be in one
// slot.
type Lock struct {
	Key   string
	Keys  []string
	Value string
	TTL   time.Duration // an acquisition's, a PExpire's, a Set's (0: no expiry)

	// An acquisition's.
	Start      Start         // how a lock of one key that neither fences, guards nor waits starts (see StartOf)
	Fences     []string      // the fencing counters, one per key; nil: no fencing
	FenceTTL   time.Duration // how long each counter lives after the acquisition (0: no expiry is set)
	GuardKey   string        // the restart guard's record, with Quarantine; "": no guard
	Quarantine time.Duration // how long the node must have been up, by GuardKey's record
	Waiter     Waiter        // with an ID: the waiter, which queues in each key's queue (NewQueue)

	// A release's, and a queued acquisition's.
	Queued  bool   // a release wakes the head of each key's queue
	Hint    string // a release without a queue publishes Hint, if not "", on each key's channel (WakeChannel)
	Sharded bool   // publish with SPUBLISH (a Redis Cluster 7+), not PUBLISH
}

// keys returns the lock's keys: Keys, or Key alone.
func (l Lock) keys() []string {
	if l.Keys != nil {
		return l.Keys
	}
	return []string{l.Key}
}

// keysAnd returns the lock's keys followed by more, with room for extra
// more, in one allocation.
func (l Lock) keysAnd(extra int, more ...string) []string {
	all := make([]string, 0, max(len(l.Keys), 1)+len(more)+extra)
	if l.Keys == nil {
		all = append(all, l.Key)
	}
	return append(append(all, l.Keys...), more...)
}

// Start says how an acquisition of one key starts.
type Start int

// The ways an acquisition starts.
const (
	// ByScript runs the acquire script alone: a retry, which likely finds
	// the key held.
	ByScript Start = iota
	// BySet sends a bare SET key value NX PX ttl, the cheapest command for a
	// free key, and the script only when the SET is refused (the key
	// exists: held by another value, by ours, handed over or set by an
	// attempt whose reply was lost, or of another type), which tells those
	// cases apart as it does alone, so the answers, the errors (WRONGTYPE)
	// and the idempotence of a retry stay the script's.
	BySet
	// BySetOnly sends the bare SET alone, and takes a refusal for
	// ErrNotObtained: only for a value that cannot be on the server yet (a
	// fresh token) and an attempt that another follows, whose script
	// reports a key of another type. A SET whose connection was dead is
	// still followed by the script, which finds our value if it landed.
	BySetOnly
)

// StartOf returns how the attempt r starts: ByScript for a retry;
// BySetOnly for a first attempt with a fresh token that another attempt
// follows (a contended one then costs one command, not two); BySet for
// any other first attempt.
func StartOf(r strategy.Request) Start {
	switch {
	case r.Retry:
		return ByScript
	case r.Again && !r.CallerToken:
		return BySetOnly
	}
	return BySet
}

// ErrRestarting is a guarded acquisition's error on a node that started
// empty too recently.
var ErrRestarting = errors.New("the node restarted empty less than the restart guard ago")

// Result is what a Call learnt besides its error.
type Result struct {
	Fences    []int64       // an acquisition's fencing tokens, one per key, with Lock.Fences
	Position  int           // a queued waiter's rank in the queue it waits in, 1 for the head
	HolderTTL time.Duration // the holder's remaining TTL, when a lock of several keys, or a waiter, was not obtained; 0 when the key is free but another waiter heads its queue
	TTL       time.Duration // PTTL's: the least TTL of the keys, negative when none has an expiry
	Holder    string        // the value that held the key that refused a waiter; "" when it was free, or not read
	Waiters   int           // the entries of that key's wait queue, the waiter's own included, with Holder
}

// HolderState returns the State of the holder that a refused waiter read
// (Holder, HolderTTL, Waiters), as an inspection shows it; nil when it read
// none.
func (r Result) HolderState() *strategy.State {
	if r.Holder == "" {
		return nil
	}
	st := &strategy.State{Held: true, TTL: r.HolderTTL, Waiters: r.Waiters, Verdict: "held"}
	st.Fingerprint, st.Metadata = Reading{Exists: true, Value: r.Holder}.Holder()
	return st
}

// A Call is an operation on a Lock, built once, for a strategy that sends
// it to several connections (Redlock sends one to each node; drivers must
// not modify keys and arguments, see driver.Conn.EvalSha). [Server.Run]
// runs it. Every call is safe to send twice, even if the first one was
// applied and only its reply lost: an acquisition finds the keys holding
// our value and resets their TTL (a fenced one increments the counters
// once more, and fencing tokens only need to increase); a deletion finds
// the keys gone and reports ErrExpired; a PEXPIRE resets the same TTL; a
// PTTL only reads; a Set finds the key holding next, and succeeds (see
// setScript).
type Call struct {
	l    Lock
	op   op
	next string // Set's

	// The script's call. An acquisition that starts with a SET builds it
	// only when the SET is refused: on a free key, the SET's arguments are
	// all it allocates.
	script *driver.Script
	keys   []string
	args   []any
}

// op is the operation of a Call.
type op uint8

const (
	opAcquire op = iota
	opDelete
	opPExpire
	opPTTL
	opSet
)

// Acquire is the Call that sets each of l's keys to l.Value for l.TTL, if
// each is free or holds the value already (a retry, or lock.WithToken:
// its TTL is reset), and none otherwise, starting as l.Start says. With
// l.Fences it also increments each counter, gives it the lifetime
// l.FenceTTL, and returns their new values, the fencing tokens. With l.GuardKey it runs only on a node that has been
// up for l.Quarantine by that record, and returns ErrRestarting on a
// younger node; it has no form without scripts. With l.Waiter's ID, it
// grants the lock only when every key's queue is empty or headed by the
// waiter, and queues the waiter otherwise (see queue.go); a user whose ACL
// denies the queues, or a Server without scripts, gets the acquisition
// unqueued.
//
// When another value holds a key, it returns strategy.ErrNotObtained; for
// a lock of several keys, or a waiter's, wrapped in a *strategy.KeyError
// that names the key, with the holder's TTL and the waiter's place in the
// Result.
func Acquire(l Lock) Call {
	c := Call{l: l, op: opAcquire}
	if !c.setFirst() {
		c.script, c.keys, c.args = l.acquireCall()
	}
	return c
}

// setFirst reports whether the acquisition starts with a bare SET.
func (c Call) setFirst() bool {
	l := c.l
	return c.op == opAcquire && l.Keys == nil && l.Start != ByScript && l.Fences == nil && l.GuardKey == "" && l.Waiter.ID == ""
}

// acquireCall returns the acquire script's call.
func (l Lock) acquireCall() (*driver.Script, []string, []any) {
	n := len(l.Keys) // 0: Key alone, whose script replies with a number
	ttl := l.TTL.Milliseconds()
	switch {
	case l.Waiter.ID != "":
		return queuedScript, l.queueKeys(), l.Waiter.args(l, takeMode)
	case l.GuardKey != "":
		return guardedScript, l.keysAnd(0, l.GuardKey), []any{l.Value, ttl, n, l.Quarantine.Milliseconds()}
	case l.Fences != nil:
		return acquireScript, l.keysAnd(0, l.Fences...), []any{l.Value, ttl, n, fenceMS(l.FenceTTL)}
	}
	return acquireScript, l.keys(), []any{l.Value, ttl, n}
}

// fenceMS returns the lifetime of a fencing counter, d, in whole ms for
// PEXPIRE, rounded up so that a lifetime under a millisecond is not taken
// for none; 0 for none.
func fenceMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Delete is the Call that deletes each of l's keys that holds l.Value, and
// returns the errors of those that do not (see keyErrors). With l.Queued,
// it also wakes the head of the queue of each key it deletes that has one
// (see NewQueue); a user whose ACL does not allow the queues gets the
// delete alone. With l.Hint, it publishes the hint on the channel of each
// key it deletes that has one, best effort; without scripts, as a command
// of its own after the delete.
func Delete(l Lock) Call {
	n := max(len(l.Keys), 1)
	all, args := l.Keys, []any(nil)
	mask := []byte(nil) // one character per key; a lock of one key's, boxed once (masks)
	if n == 1 {
		one := new(struct { // its keys and arguments, in one allocation
			keys [3]string
			args [5]any
		})
		all, args = append(one.keys[:0], l.Key), one.args[:0]
	} else {
		args, mask = make([]any, 0, 4+n), []byte(strings.Repeat("0", n))
		if l.Queued {
			all = l.keysAnd(2 * n)
		}
	}
	queued := false
	if l.Queued {
		for i, k := range all[:n] {
			if q, ok := NewQueue(k, l.Sharded); ok {
				all, queued = append(all, q.Q, q.W), true
				if mask != nil {
					mask[i] = '1'
				}
			}
		}
	}
	var m any
	switch {
	case mask != nil:
		m = string(mask)
	case queued:
		m = masks[1]
	default:
		m = masks[0]
	}
	args = append(args, l.Value, m, shard(l.Sharded))
	if l.Hint != "" {
		args = append(args, boxHint(l.Hint))
		for _, k := range all[:n] {
			ch, _ := WakeChannel(k)
			args = append(args, ch)
		}
	}
	return Call{l: l, op: opDelete, script: deleteScript, keys: all, args: args}
}

// lastHint is the hint that boxHint boxed last.
var lastHint atomic.Pointer[any]

// boxHint returns h as an argument of a script: the one boxed last when it
// is the same, as every release's is, so that it allocates nothing.
func boxHint(h string) any {
	if p := lastHint.Load(); p != nil && (*p).(string) == h {
		return *p
	}
	v := any(h)
	lastHint.Store(&v)
	return v
}

// masks are deleteScript's masks of a lock of one key, without a queue
// and with one, boxed once.
var masks = [2]any{"0", "1"}

// PExpire is the Call that sets the TTL of each of l's keys to l.TTL if
// every one holds l.Value, and changes nothing otherwise; it then returns
// the errors of the keys that did not (see keyErrors).
func PExpire(l Lock) Call {
	return Call{l: l, op: opPExpire, script: pexpireScript, keys: l.keys(), args: []any{l.Value, l.TTL.Milliseconds()}}
}

// PTTL is the Call that returns the least TTL of l's keys (Result.TTL) if
// every one holds l.Value, ignoring those without an expiry (negative when
// none has one), and otherwise the errors of those that do not (see
// keyErrors).
func PTTL(l Lock) Call {
	return Call{l: l, op: opPTTL, script: pttlScript, keys: l.keys(), args: []any{l.Value}}
}

// Set is the Call that replaces l.Value with next if l's key, one, holds
// it, expiring after l.TTL (no expiry when it is 0).
func Set(l Lock, next string) Call {
	return Call{l: l, op: opSet, next: next, script: setScript, keys: l.keys(), args: []any{l.Value, next, l.TTL.Milliseconds()}}
}

// run sends the call on conn, with scripts. An acquisition starts as its
// Start says. A SET whose connection was dead (it may have been applied) is
// followed by the script, which finds our value if it was.
func (c Call) run(ctx context.Context, conn driver.Conn) (Result, error) {
	if c.script == nil {
		if done, err := c.l.setNX(ctx, conn); done {
			return Result{}, err
		}
		c.script, c.keys, c.args = c.l.acquireCall()
	}
	switch {
	case c.op == opAcquire && c.l.Waiter.ID != "":
		r, err := c.l.Waiter.run(ctx, conn, c.l, takeMode, c.keys, c.args)
		if denied(err) { // a user that never waits need not be allowed the queues
			c.l.Waiter = Waiter{}
			c.l.Start = ByScript
			return Acquire(c.l).run(ctx, conn)
		}
		return r, err
	case c.op == opDelete && c.l.Queued:
		r, err := c.send(ctx, conn)
		if denied(err) {
			c.l.Queued = false
			return Delete(c.l).send(ctx, conn)
		}
		return r, err
	}
	return c.send(ctx, conn)
}

// setNX sends l's bare SET NX PX, and reports done with its answer unless
// it was refused (with l.Start not BySetOnly) or its connection was dead.
func (l Lock) setNX(ctx context.Context, conn driver.Conn) (done bool, err error) {
	ok, err := conn.SetNX(ctx, l.Key, l.Value, l.TTL)
	switch {
	case err == nil && ok:
		return true, nil
	case err != nil && !(neterr.Dead(err) && ctx.Err() == nil):
		return true, err
	case err == nil && l.Start == BySetOnly:
		return true, strategy.ErrNotObtained
	}
	return false, nil
}

// send runs the call's script, sending it once more when its connection
// was dead, and turns its reply into the call's answer: a number for a
// lock of one key (an acquisition's: of Key alone), an array of them for
// several.
func (c Call) send(ctx context.Context, conn driver.Conn) (Result, error) {
	if c.l.Keys == nil || c.op != opAcquire && len(c.l.Keys) == 1 {
		n, err := resend(ctx, func() (int64, error) { return c.script.Int(ctx, conn, c.keys, c.args...) })
		return c.reply(n, err)
	}
	n, err := runInts(ctx, conn, c.script, c.keys, c.args...)
	if err != nil {
		return Result{}, err
	}
	return c.replies(n)
}

// reply is the answer of a lock of one key whose script replied n, or
// failed with err.
func (c Call) reply(n int64, err error) (Result, error) {
	if c.op != opAcquire {
		if err := owned(n, err); err != nil {
			if c.l.Keys != nil && errors.Is(err, strategy.ErrNotHeld) {
				err = errors.Join(&strategy.KeyError{Key: c.l.Keys[0], Err: err}) // as keyErrors
			}
			return Result{}, err
		}
		if c.op == opPTTL {
			return Result{TTL: time.Duration(n) * time.Millisecond}, nil
		}
		return Result{}, nil
	}
	switch {
	case err != nil:
		return Result{}, err
	case n == restarting:
		return Result{}, ErrRestarting
	case n == 0:
		return Result{}, strategy.ErrNotObtained
	case c.l.Fences != nil:
		return Result{Fences: []int64{n}}, nil
	}
	return Result{}, nil
}

// replies is the answer of a lock of several keys whose script replied n.
func (c Call) replies(n []int64) (Result, error) {
	keys := c.l.Keys
	if c.op == opAcquire {
		switch {
		case len(n) == 1+len(c.l.Fences) && n[0] == 1:
			return Result{Fences: n[1:]}, nil
		case len(n) == 1 && n[0] == restarting:
			return Result{}, ErrRestarting
		case len(n) == 3 && n[0] == 0 && 1 <= n[1] && n[1] <= int64(len(keys)):
			held := &strategy.KeyError{Key: keys[n[1]-1], Err: strategy.ErrNotObtained}
			return Result{HolderTTL: time.Duration(max(n[2], 0)) * time.Millisecond}, held
		}
		return Result{}, fmt.Errorf("acquire of %d keys: got reply %v, want {1, fences...} or {0, key, pttl}", len(keys), n)
	}
	if len(n) != len(keys) {
		return Result{}, fmt.Errorf("script of %d keys: got %d replies, want one per key", len(keys), len(n))
	}
	if err := keyErrors(keys, n); err != nil {
		return Result{}, err
	}
	if c.op != opPTTL {
		return Result{}, nil
	}
	least := int64(-1)
	for _, m := range n {
		if m >= 0 && (least < 0 || m < least) {
			least = m
		}
	}
	return Result{TTL: time.Duration(least) * time.Millisecond}, nil
}

// resend returns send's result, sending once more when its connection was
// dead, while ctx lasts: a pool can hand out a connection that the server
// closed while it sat idle, for example across a restart, and the error
// would then be a bare EOF rather than the answer of the live server.
func resend[T any](ctx context.Context, send func() (T, error)) (T, error) {
	r, err := send()
	if err != nil && neterr.Dead(err) && ctx.Err() == nil {
		r, err = send()
	}
	return r, err
}

// owned turns a script reply into nil, ErrExpired, ErrTaken or err.
func owned(n int64, err error) error {
	switch {
	case err != nil:
		return err
	case n == noKey:
		return strategy.ErrExpired
	case n == otherOwner:
		return strategy.ErrTaken
	}
	return nil
}

// keyErrors returns one *strategy.KeyError per key whose state is noKey
// (wrapping strategy.ErrExpired) or otherOwner (strategy.ErrTaken), joined
// with errors.Join, in the order of keys; nil when there is none.
func keyErrors(keys []string, states []int64) error {
	var errs []error
	for i, n := range states {
		if err := owned(n, nil); err != nil {
			errs = append(errs, &strategy.KeyError{Key: keys[i], Err: err})
		}
	}
	return errors.Join(errs...)
}

// runInts runs s, sending it once more when its connection was dead (see
// resend), and returns its reply: an array of integers.
func runInts(ctx context.Context, c driver.Conn, s *driver.Script, keys []string, args ...any) ([]int64, error) {
	reply, err := resend(ctx, func() (any, error) { return s.Run(ctx, c, keys, args...) })
	if err != nil {
		return nil, err
	}
	n, ok := ints(reply)
	if !ok {
		return nil, fmt.Errorf("script %.8s: got reply %v, want an array of integers", s.SHA1(), reply)
	}
	return n, nil
}

// ints returns reply as integers, if it is an array of them.
func ints(reply any) ([]int64, bool) {
	r, ok := reply.([]any)
	if !ok {
		return nil, false
	}
	n := make([]int64, len(r))
	for i, v := range r {
		if n[i], ok = v.(int64); !ok {
			return nil, false
		}
	}
	return n, true
}

// CheckConn returns driver.Check's complaint about c, the argument name, as
// an *strategy.ArgumentError named name whose reason is the driver's plain
// error (the built-in drivers' name their client and the option to
// change); a driver written elsewhere that returns an *ArgumentError of its
// own has it returned as it is.
func CheckConn(name string, c driver.Conn) error {
	err := driver.Check(c)
	var ae *strategy.ArgumentError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	}
	return &strategy.ArgumentError{Name: name, Reason: err.Error()}
}
