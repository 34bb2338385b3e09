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
// or on that of the timer that watches a lock's validity: they must not
// call the lock's Refresh, Release, TTL or StopRefresh, which wait for
// those.
type Hooks struct {
	// Obtain wraps a whole Obtain call, waiting included.
	Obtain func(ctx context.Context, e Event, next func(context.Context) (*Lock, error)) (*Lock, error)
	// Attempt wraps one attempt of Obtain; e.Attempt is its number. next
	// returns nil when the attempt obtained the lock, an error matching
	// ErrNotObtained when the lock was held, or another error.
	Attempt func(ctx context.Context, e Event, next func(context.Context) error) error
	// Op wraps Refresh (auto-refresh's too), Release and TTL (e.Op) on a
	// held lock (e.Lock), and each clean-up (e.Op "cleanup", e.Lock nil)
	// that deletes what a failed attempt may have written: next returns
	// nil once it is done, or why it gave up (see strategy.CleanUp). It
	// wraps Inspect too (e.Op "inspect", e.Lock nil).
	Op func(ctx context.Context, e Event, next func(context.Context) error) error
	// Node reports one node's answer (e.Node, e.Outcome, e.Err) within an
	// attempt or an operation of a multi-node strategy.
	Node func(ctx context.Context, e Event)
	// Ended reports, once per lock, that a held lock ended: released
	// (e.Err nil), or lost (e.Err matches ErrNotHeld): found gone by
	// Refresh, Release or TTL, or lapsed (ErrLapsed) while watched, after
	// it was held for e.Held.
	Ended func(e Event)
}

// Event describes what a hook intercepts.
type Event struct {
	Strategy string        // the strategy's name, such as "single"
	Server   string        // the server address(es), where the strategy knows them
	Op       string        // obtain, attempt, refresh, release, ttl, cleanup, inspect or node
	Key      string        // the lock's key
	TTL      time.Duration // the TTL asked for (obtain, attempt, refresh)
	Attempt  int           // the attempt's number, from 1
	Lock     *Lock         // the lock (refresh, release, ttl, ended)
	Node     string        // the node (node)
	Outcome  string        // the node's answer (node)
	Err      error         // the node's error (node), or why the lock ended
	Held     time.Duration // how long the lock was held (ended)
}

// WithHooks installs hooks for one Obtain and the lock it returns; several
// are applied outermost first. Wrappers such as the otel package add theirs
// this way, so they work on any Locker built by New.
func WithHooks(h *Hooks) Option {
	return func(o *options) {
		if h == nil {
			o.errs = append(o.errs, &ArgumentError{Name: "hooks", Reason: "must not be nil"})
			return
		}
		o.hooks = append(o.hooks, h)
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

// describe returns a strategy's name and server: its String and Addr
// methods, where it has them.
func describe(s strategy.Strategy) (name, server string) {
	if n, ok := s.(fmt.Stringer); ok {
		name = n.String()
	} else {
		name = fmt.Sprintf("%T", s)
	}
	if a, ok := s.(interface{ Addr() string }); ok {
		server = a.Addr()
	}
	return name, server
}

func (hs hookList) event(s strategy.Strategy, op, key string) Event {
	name, server := describe(s)
	return Event{Strategy: name, Server: server, Op: op, Key: key}
}

// obtain runs next through the Obtain hooks.
func (hs hookList) obtain(ctx context.Context, e Event, next func(context.Context) (*Lock, error)) (*Lock, error) {
	return hs.obtainFrom(0, ctx, e, next)
}

func (hs hookList) obtainFrom(i int, ctx context.Context, e Event, next func(context.Context) (*Lock, error)) (*Lock, error) {
	for ; i < len(hs); i++ {
		if f := hs[i].Obtain; f != nil {
			if hs[i+1:].hasObtain() {
				next = hs.obtainNext(i+1, e, next)
			}
			return f(ctx, e, next)
		}
	}
	return next(ctx)
}

// obtainNext returns the rest of the chain after hook i. (A function of its
// own, so that its closure does not move e to the heap on every call.)
func (hs hookList) obtainNext(i int, e Event, next func(context.Context) (*Lock, error)) func(context.Context) (*Lock, error) {
	return func(ctx context.Context) (*Lock, error) { return hs.obtainFrom(i, ctx, e, next) }
}

func (hs hookList) hasObtain() bool {
	for _, h := range hs {
		if h.Obtain != nil {
			return true
		}
	}
	return false
}

// wrap runs next through the Attempt or Op hooks (pick chooses which), with
// the hooks in the context for ReportNode and CleanUp when s reports nodes.
func (hs hookList) wrap(ctx context.Context, s strategy.Strategy, e Event, pick func(*Hooks) func(context.Context, Event, func(context.Context) error) error, next func(context.Context) error) error {
	if r, ok := s.(strategy.NodeReporter); ok && r.ReportsNodes() {
		ctx = scope.With(ctx, &hookScope{hs, s})
	}
	return hs.wrapFrom(0, ctx, e, pick, next)
}

func (hs hookList) wrapFrom(i int, ctx context.Context, e Event, pick func(*Hooks) func(context.Context, Event, func(context.Context) error) error, next func(context.Context) error) error {
	for ; i < len(hs); i++ {
		if f := pick(hs[i]); f != nil {
			for j := i + 1; j < len(hs); j++ {
				if pick(hs[j]) != nil {
					next = hs.wrapNext(i+1, e, pick, next)
					break
				}
			}
			return f(ctx, e, next)
		}
	}
	return next(ctx)
}

// wrapNext returns the rest of the chain after hook i, as obtainNext does.
func (hs hookList) wrapNext(i int, e Event, pick func(*Hooks) func(context.Context, Event, func(context.Context) error) error, next func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error { return hs.wrapFrom(i, ctx, e, pick, next) }
}

func attemptHook(h *Hooks) func(context.Context, Event, func(context.Context) error) error {
	return h.Attempt
}

func opHook(h *Hooks) func(context.Context, Event, func(context.Context) error) error { return h.Op }

func (hs hookList) ended(e Event) {
	for _, h := range hs {
		if h.Ended != nil {
			h.Ended(e)
		}
	}
}
