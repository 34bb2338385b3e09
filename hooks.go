package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/internal/scope"
	"github.com/locksmith-go/lock/strategy"
)

// Hooks intercept what a Locker and its locks do, for instrumentation: the
// otel package implements them, and so can a logger or a test. Install them
// with [WithHooks]. Every field is optional. A wrapping hook must call next
// exactly once and return what it returned; it may pass on a derived
// context.
//
// Events carry the *Lock they concern; a hook must never record its token.
// Hooks run within the lock's operations, on the goroutine of auto-refresh,
// or on that of the validity timer: they must not call the lock's Refresh,
// Release, TTL, SetMetadata or StopRefresh, which wait for those.
//
// A hook's panic within Obtain, Inspect, Break, Refresh, Release, TTL or
// SetMetadata goes on to the caller, with its own value, and leaves the
// Locker and the lock consistent, so that a recover around the call keeps
// them working (docs/locking.md says what is undone; a lock whose Ended
// hook panicked still closes Done). On the package's own goroutines (auto-refresh, the
// validity timer, background clean-ups, [Do]'s release) a panic ends the
// program, as in any goroutine.
type Hooks struct {
	// Obtain wraps a whole Obtain call, waiting included.
	Obtain func(ctx context.Context, e Event, next func(context.Context) (*Lock, error)) (*Lock, error)
	// Attempt wraps one attempt of Obtain; e.Attempt is its number. next
	// returns nil when the attempt obtained the lock, an error matching
	// ErrNotObtained when the lock was held, or another error. The
	// former is a *NotObtainedError, which names the holder that the
	// attempt read back: with an Attempt hook set, an Obtain reads each
	// holder it meets (see NotObtainedError), for such hooks to record.
	Attempt func(ctx context.Context, e Event, next func(context.Context) error) error
	// Op wraps Refresh (auto-refresh's too), Release, TTL, Downgrade and
	// SetMetadata (e.Op "metadata") on a held lock (e.Lock), and each clean-up (e.Op "cleanup",
	// e.Lock nil) that deletes what a failed attempt may have written: next
	// returns nil once it is done, or why it gave up (see strategy.CleanUp).
	// It wraps Inspect and Break too (e.Op "inspect" or "break", e.Lock
	// nil).
	Op func(ctx context.Context, e Event, next func(context.Context) error) error
	// Wait reports the progress of an Obtain that waits: e.Op "enqueued"
	// when it first joined the lock's queue (e.Rank its place, 1 for the
	// head); "woken" each time it wakes to try again (e.Reason: message,
	// subscribed, resubscribed or timer); and "missed" when an attempt
	// after a timer obtained a lock that its holder had released without
	// the message reaching this waiter (a lost notification: the waiter's
	// timer was due before the holder's key would have expired).
	Wait func(ctx context.Context, e Event)
	// Node reports one node's answer (e.Node, e.Outcome, e.Err) within an
	// attempt or an operation of a multi-node strategy.
	Node func(ctx context.Context, e Event)
	// Batch wraps one batched refresh (e.Op "batch"), which refreshes
	// several auto-refreshed locks at once, each within its own Op hooks
	// (e.Op "refresh"): e.Keys is how many locks it carries, and e.Links
	// the contexts that those locks' Op hooks passed to their next, for a
	// tracer to link the batch's span to theirs. It runs once per batch
	// for each Hooks among its locks', on the batch's context, which
	// carries the deadline of the batch and none of the locks' values. See
	// Lock.StartRefresh.
	Batch func(ctx context.Context, e Event, next func(context.Context) error) error
	// Ended reports, once per lock, that a held lock ended: released
	// (e.Err nil), or lost (e.Err matches ErrNotHeld): found gone by
	// Refresh, Release or TTL, or lapsed (ErrLapsed) while watched, after
	// it was held for e.Held.
	Ended func(e Event)
	// Trace returns the trace context that an Obtain stores in its lock's
	// value (its stamp; see strategy.State.Trace) at acquire time, for
	// those who find the lock held to link to: the W3C trace-id and
	// parent-id, in lower-case hexadecimal, joined by "-". It is asked once
	// per Obtain, with the context the Obtain hooks passed on. The first
	// hook whose Trace returns such a context gives it; anything else
	// ("" for none) stores none. The otel package returns its lock.obtain
	// span's.
	Trace func(ctx context.Context) string
}

// Event describes what a hook intercepts.
type Event struct {
	Strategy string            // the strategy's name, such as "single"
	Server   string            // the server address(es), where the strategy knows them
	Op       string            // obtain, attempt, refresh, release, ttl, downgrade, metadata, cleanup, inspect, break, node, enqueued, woken, missed, batch or ended
	Key      string            // the lock's key; a multi-key lock's first; "" for a batch
	Keys     int               // how many keys a multi-key lock (Locker.ObtainMany) has; 0 for one key; the locks of a batch
	Permits  int               // a semaphore's limit (WithPermits); 0 for other locks
	Side     string            // a read-write lock's side, "read" or "write" (WithRead, WithWrite); "" for other locks
	TTL      time.Duration     // the TTL asked for (obtain, attempt, refresh, metadata)
	Attempt  int               // the attempt's number, from 1
	Lock     *Lock             // the lock (refresh, release, ttl, downgrade, metadata, ended)
	Node     string            // the node (node)
	Outcome  string            // the node's answer (node)
	Err      error             // the node's error (node), or why the lock ended
	Held     time.Duration     // how long the lock was held (ended)
	Rank     int               // the waiter's place in the queue, 1 for the head (enqueued)
	Reason   string            // why the waiter woke: message, subscribed, resubscribed or timer (woken)
	Links    []context.Context // the contexts of the Op hooks of a batch's locks (batch)
}

// WithHooks installs hooks for one Obtain and the lock it returns; several
// are applied outermost first. Wrappers such as the otel package add theirs
// this way, so they work on any Locker built by New. [Hooks] says what a
// hook's panic does.
func WithHooks(h *Hooks) Option {
	alone := hookList{h} // the list of a call with no other hooks, shared: its capacity is its length, so that appending to it copies it
	return func(o *options) {
		switch {
		case h == nil:
			o.errs = append(o.errs, &ArgumentError{Name: "hooks", Reason: "must not be nil"})
		case o.hooks == nil:
			o.hooks = alone
		default:
			o.hooks = append(o.hooks, h)
		}
	}
}

// hookScope is what the context of a call of a strategy that reports
// nodes carries, for strategy.ReportNode and strategy.CleanUp: the hooks,
// and the strategy the events name.
type hookScope struct {
	hs hookList
	s  strategy.Strategy
}

// Node runs the Node hooks.
func (sc *hookScope) Node(ctx context.Context, node, outcome string, err error) {
	for _, h := range sc.hs {
		if h.Node != nil {
			h.Node(ctx, Event{Op: "node", Node: node, Outcome: outcome, Err: err})
		}
	}
}

// Op runs fn through the Op hooks.
func (sc *hookScope) Op(ctx context.Context, op, key string, fn func(context.Context) error) error {
	return sc.hs.wrap(ctx, sc.s, sc.hs.event(sc.s, op, key), opHook, fn)
}

// hookList is the hooks of one Obtain and its lock, outermost first.
type hookList []*Hooks

// addresser is driver.Addresser, which the root package does not import: a
// strategy that reports its servers' addresses, as a driver.Conn does.
type addresser interface{ Addr() string }

// describe returns a strategy's name and server: its String method and its
// Addr method (see addresser), where it has them.
func describe(s strategy.Strategy) (name, server string) {
	if n, ok := s.(fmt.Stringer); ok {
		name = n.String()
	} else {
		name = fmt.Sprintf("%T", s)
	}
	if a, ok := s.(addresser); ok {
		server = a.Addr()
	}
	return name, server
}

func (hs hookList) event(s strategy.Strategy, op, key string) Event {
	name, server := describe(s)
	e := Event{Strategy: name, Server: server, Op: op, Key: key}
	if sh, ok := s.(strategy.SharedStrategy); ok {
		switch sh := sh.Sharing(); {
		case sh.Read:
			e.Side = "read"
		case sh.Write:
			e.Side = "write"
		default:
			e.Permits = sh.Permits
		}
	}
	return e
}

// wrap runs next through the Attempt or Op hooks (pick chooses which), with
// the hooks in the context for ReportNode and CleanUp when s reports nodes.
func (hs hookList) wrap(ctx context.Context, s strategy.Strategy, e Event, pick func(*Hooks) (opFunc, bool), next func(context.Context) error) error {
	if r, ok := s.(strategy.NodeReporter); ok && r.ReportsNodes() {
		ctx = scope.With(ctx, &hookScope{hs, s})
	}
	_, err := chain(ctx, hs, pick, e, next)
	return err
}

// chain runs next through the hooks that pick finds set in hs, the first
// outermost: each runs the rest of the chain as its next. Only the inner
// hooks' nexts are closures, which move e to the heap: the outermost hook
// is called directly, so that a chain of one hook, such as the otel
// package's, allocates nothing.
func chain[W wrapper[N, R], N, R any](ctx context.Context, hs hookList, pick func(*Hooks) (W, bool), e Event, next N) (R, error) {
	var outer W // until a hook is found, the nil one, whose call runs next
	found := false
	for i := len(hs) - 1; i >= 0; i-- {
		if w, ok := pick(hs[i]); ok {
			if found {
				next = outer.bind(e, next)
			}
			outer, found = w, true
		}
	}
	return outer.call(ctx, e, next)
}

// wrapper is a hook that chain nests: an obtainFunc, or an opFunc. N is the
// type of its next, and R what it returns besides an error.
type wrapper[N, R any] interface {
	// call runs the hook around next; a nil hook runs next alone.
	call(ctx context.Context, e Event, next N) (R, error)
	// bind returns the hook around next, as a next for the hook outside it.
	bind(e Event, next N) N
}

// obtainFunc is an Obtain hook, and opFunc an Attempt or Op hook.
type (
	obtainFunc func(context.Context, Event, func(context.Context) (*Lock, error)) (*Lock, error)
	opFunc     func(context.Context, Event, func(context.Context) error) error
)

func (f obtainFunc) call(ctx context.Context, e Event, next func(context.Context) (*Lock, error)) (*Lock, error) {
	if f == nil {
		return next(ctx)
	}
	return f(ctx, e, next)
}

func (f obtainFunc) bind(e Event, next func(context.Context) (*Lock, error)) func(context.Context) (*Lock, error) {
	return func(ctx context.Context) (*Lock, error) { return f(ctx, e, next) }
}

func (f opFunc) call(ctx context.Context, e Event, next func(context.Context) error) (struct{}, error) {
	if f == nil {
		return struct{}{}, next(ctx)
	}
	return struct{}{}, f(ctx, e, next)
}

func (f opFunc) bind(e Event, next func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error { return f(ctx, e, next) }
}

// obtainHook, attemptHook and opHook pick a hook for chain, and report
// whether it is set.
func obtainHook(h *Hooks) (obtainFunc, bool) { return h.Obtain, h.Obtain != nil }
func attemptHook(h *Hooks) (opFunc, bool)    { return h.Attempt, h.Attempt != nil }
func opHook(h *Hooks) (opFunc, bool)         { return h.Op, h.Op != nil }
func batchHook(h *Hooks) (opFunc, bool)      { return h.Batch, h.Batch != nil }

// runWait runs the Wait hooks.
func (hs hookList) runWait(ctx context.Context, e Event) {
	for _, h := range hs {
		if h.Wait != nil {
			h.Wait(ctx, e)
		}
	}
}

// attempted reports whether an Attempt hook is set, which sees each
// attempt's error: a refusal's *NotObtainedError, with the holder.
func (hs hookList) attempted() bool {
	for _, h := range hs {
		if h.Attempt != nil {
			return true
		}
	}
	return false
}

// trace returns the trace context that the Trace hooks give an Obtain
// whose context is ctx: the first valid one, or "".
func (hs hookList) trace(ctx context.Context) string {
	for _, h := range hs {
		if h.Trace == nil {
			continue
		}
		if t := h.Trace(ctx); validTrace(t) {
			return t
		}
	}
	return ""
}

// runEnded runs the Ended hooks.
func (hs hookList) runEnded(e Event) {
	for _, h := range hs {
		if h.Ended != nil {
			h.Ended(e)
		}
	}
}
