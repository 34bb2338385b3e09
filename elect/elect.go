// Package elect elects one leader among the processes that campaign on a
// key, with terms numbered by fencing tokens, over a lock.Locker of the
// single strategy.
//
//	e, err := elect.New(locker, "{billing}:leader", elect.WithIdentity("web-3"))
//	...
//	err = e.Run(ctx, func(ctx context.Context, t *elect.Term) error {
//		return schedule(ctx, t.Number()) // ctx ends a stop grace before the lease could pass on
//	})
//
// [Elector.Run] campaigns, calls lead while this process leads, releases
// the lease only after lead returned, and campaigns again. [Elector.Campaign]
// returns a held [Term] for those who drive the steps themselves. Followers
// read the leader with [Elector.Leader], watch it with [Elector.Observe],
// and check themselves with [Elector.IsLeader]. A term's number strictly
// increases from one term to the next: pass it to the resources the
// leader writes, which refuse a smaller one. The repository's
// docs/election.md is the guide.
package elect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/internal/reach"
	"github.com/locksmith-go/lock/strategy"
)

var (
	// ErrNotLeader means this candidate does not lead: IsLeader outside a
	// term, and the error of a term that ended ([Term.Err]), which also
	// matches why it ended.
	ErrNotLeader = errors.New("elect: not the leader")

	// ErrResigned is the error of a term that was resigned ([Term.Resign],
	// or Run's release after lead returned). It matches ErrNotLeader.
	ErrResigned = fmt.Errorf("%w: resigned", ErrNotLeader)

	// ErrStepDown is the error of a term whose lease came within the stop
	// grace of its end ([WithStopGrace]) before a refresh confirmed it: the
	// leader stepped down, so that its work ends before anyone else can be
	// elected. It matches ErrNotLeader and lock.ErrLapsed, and the last
	// refresh's error when one failed.
	ErrStepDown = fmt.Errorf("%w: stepped down: %w", ErrNotLeader, lock.ErrLapsed)

	// ErrNoLeader is the error of [Elector.Leader] when nobody leads.
	ErrNoLeader = errors.New("elect: no leader")
)

// Elector campaigns for the leadership of one key, and reads who holds it.
// It is safe for concurrent use. Build it with [New].
type Elector struct {
	locker   *lock.Locker
	key      string
	identity string
	lease    time.Duration
	grace    time.Duration
	interval time.Duration
	hooks    []*Hooks

	mu      sync.Mutex
	current *Term // the term this Elector holds, for IsLeader
}

// Option configures an Elector.
type Option func(*options)

type options struct {
	identity string
	lease    time.Duration
	grace    time.Duration
	interval time.Duration
	hooks    []*Hooks
}

// WithIdentity sets the candidate's identity: metadata that the leader's
// key carries, which [Elector.Leader] and [Elector.Observe] report and
// Inspect shows. It names the leader for people; it grants nothing: two
// candidates with one identity are two candidates. The default is the
// host name and the process id, "host pid=123".
func WithIdentity(identity string) Option {
	return func(o *options) { o.identity = identity }
}

// WithLease sets the lease: the TTL of the leader's key, refreshed every
// third of it. A leader that crashes is replaced within one lease (plus
// one interval, [WithInterval]). It must be at least 30ms; the default is
// 15s, as client-go's.
func WithLease(d time.Duration) Option {
	return func(o *options) { o.lease = d }
}

// WithStopGrace sets how long before the lease could pass to another
// candidate the leader's work is told to stop: the context that Run gives
// lead, and [Term.Done], end that long before [Term.ValidUntil] when no
// refresh confirmed the lease in time, so that the work has the grace to
// wind down before another leader can start. It must be under half the
// lease; the default is a fifth of it (3s of 15s).
func WithStopGrace(d time.Duration) Option {
	return func(o *options) { o.grace = d }
}

// WithInterval sets how often a candidate that heard no release tries
// again, and how often [Elector.Observe] reads the leader. A release wakes
// the next candidate at once, whatever the interval. The default is a
// tenth of the lease, at most 1s.
func WithInterval(d time.Duration) Option {
	return func(o *options) { o.interval = d }
}

// WithHooks installs hooks, for instrumentation such as the otel
// package's; several are applied outermost first.
func WithHooks(h *Hooks) Option {
	return func(o *options) {
		if h != nil {
			o.hooks = append(o.hooks, h)
		}
	}
}

// New returns an Elector for key over l, whose strategy must number terms:
// issue fencing tokens (lock.WithFencing), as the single strategy does.
// Another strategy (redlock, setnx-getset) gives an *lock.ArgumentError
// named "locker" that matches errors.ErrUnsupported; an invalid option,
// one named after it. Nothing is sent.
func New(l *lock.Locker, key string, opts ...Option) (*Elector, error) {
	if l == nil {
		return nil, &lock.ArgumentError{Name: "locker", Reason: "must not be nil"}
	}
	if key == "" {
		return nil, &lock.ArgumentError{Name: "key", Reason: "must not be empty"}
	}
	if f, ok := reach.Strategy(l).(strategy.Fencer); !ok || !f.Fences() {
		return nil, &lock.ArgumentError{Name: "locker", Err: errors.ErrUnsupported,
			Reason: "its strategy issues no fencing tokens, which number the terms: use the single strategy"}
	}
	o := options{lease: 15 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.grace == 0 {
		o.grace = o.lease / 5
	}
	if o.interval == 0 {
		o.interval = min(o.lease/10, time.Second)
	}
	if o.identity == "" {
		host, _ := os.Hostname()
		o.identity = host + " pid=" + strconv.Itoa(os.Getpid())
	}
	switch {
	case o.lease < 30*time.Millisecond:
		return nil, &lock.ArgumentError{Name: "lease", Reason: fmt.Sprintf("must be at least 30ms, got %v", o.lease)}
	case o.grace < 0 || o.grace >= o.lease/2:
		return nil, &lock.ArgumentError{Name: "stop grace", Reason: fmt.Sprintf("must be under half the lease, %v, got %v", o.lease/2, o.grace)}
	case o.interval < time.Millisecond:
		return nil, &lock.ArgumentError{Name: "interval", Reason: fmt.Sprintf("must be at least 1ms, got %v", o.interval)}
	case len(o.identity) > 0 && o.identity[0] == 0x1e:
		return nil, &lock.ArgumentError{Name: "identity", Reason: "must not start with the byte 0x1e"}
	}
	return &Elector{locker: l, key: key, identity: o.identity, lease: o.lease, grace: o.grace,
		interval: o.interval, hooks: o.hooks}, nil
}

// Key returns the key the Elector campaigns on.
func (e *Elector) Key() string { return e.key }

// Identity returns the identity the Elector campaigns with ([WithIdentity]).
func (e *Elector) Identity() string { return e.identity }

// Lease returns the lease ([WithLease]).
func (e *Elector) Lease() time.Duration { return e.lease }

// StopGrace returns the stop grace ([WithStopGrace]).
func (e *Elector) StopGrace() time.Duration { return e.grace }

// Interval returns how often a candidate tries again and an observer
// reads ([WithInterval]).
func (e *Elector) Interval() time.Duration { return e.interval }

// Campaign waits until this candidate is elected, and returns its term,
// held, with a lease that has more than the stop grace left: a lock
// obtained so late that it lapsed on the way, or nearly, is released and
// campaigned for again. Candidates wait in a queue, in turn, and a
// release wakes the next at once. The term is refreshed in the
// background until it ends: call [Term.Resign] when done.
//
// It returns an error when ctx ends first (matching ctx's error), when
// Redis fails (matching lock.ErrNoAnswer when it did not answer), and
// when the Locker is closed; a cancelled campaign leaves no key and no
// place in the queue behind it.
func (e *Elector) Campaign(ctx context.Context) (*Term, error) {
	if ctx == nil {
		return nil, &lock.ArgumentError{Name: "ctx", Reason: "must not be nil"}
	}
	return e.hookList().campaign(ctx, e, e.campaign)
}

// campaign is Campaign, within its hooks.
func (e *Elector) campaign(ctx context.Context) (*Term, error) {
	for {
		w := &watcher{}
		lk, err := e.locker.Obtain(ctx, e.key, e.lease, lock.WithFencing(), lock.WithMetadata(e.identity),
			lock.WithRetry(lock.Linear(e.interval)), lock.WithHooks(w.hooks()))
		if err != nil {
			return nil, err
		}
		elected := time.Now()
		if time.Until(lk.ValidUntil()) <= e.grace {
			// It lapsed on its way, or nearly: no work could run in it. Its
			// release, bounded, goes on in the background, so that the
			// campaign keeps its ctx's deadline.
			go func() {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), strategy.CleanupTimeout)
				defer cancel()
				_ = lk.Release(rctx)
			}()
			continue
		}
		t := newTerm(e, lk, w, elected)
		e.mu.Lock()
		e.current = t
		e.mu.Unlock()
		// The term's refreshes outlive the campaign's ctx, and keep its
		// values (a trace).
		if err := lk.StartRefresh(context.WithoutCancel(ctx)); err != nil {
			t.end(err)
			continue
		}
		go t.watch()
		e.hookList().elected(ctx, t, w.handover(elected))
		return t, nil
	}
}

// Run campaigns, calls lead with the term once elected, and campaigns
// again after lead returned, until ctx ends.
//
// lead's context ends when the term does: a stop grace before the lease
// could pass to another candidate, unless a refresh confirmed it in time
// ([WithStopGrace], [Term.Done]), or when ctx ends; context.Cause says
// why. Run releases the lease only after lead returned, so the next
// leader never starts while lead runs, and a lead that returns past the
// end of the lease is reported as an overrun (Hooks.Ended). The release
// waits as lock.Hold's does: 1s at most, and no later than 100ms past
// ctx's deadline, the rest in the background.
//
// When lead returns an error other than its context's, Run resigns and
// returns it. When ctx ends, Run returns its error. A Redis error that
// may pass (no answer, a server loading its data, a failover) ends a
// campaign, which Run starts again after an interval; any other (an
// ACL's NOPERM, a closed Locker) is returned. A panic in lead releases the
// lease and goes on.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, t *Term) error) error {
	switch {
	case ctx == nil:
		return &lock.ArgumentError{Name: "ctx", Reason: "must not be nil"}
	case lead == nil:
		return &lock.ArgumentError{Name: "lead", Reason: "must not be nil"}
	}
	for {
		t, err := e.Campaign(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && passes(err):
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(e.interval):
			}
			continue
		case err != nil:
			return err
		}
		if err := e.lead(ctx, t, lead); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// lead runs lead in term t, and releases t's lease after it returned. It
// returns lead's error unless that is its context's.
func (e *Elector) lead(ctx context.Context, t *Term, lead func(ctx context.Context, t *Term) error) error {
	var leadErr error
	defer t.end(ErrResigned) // lead returned, or panicked: the term is over, released or not
	_ = lock.Hold(ctx, t.lk, func(hctx context.Context) error {
		lctx, cancel := t.Context(hctx)
		defer cancel()
		t.lead()
		defer t.returned() // before the release, even after a panic
		leadErr = lead(lctx, t)
		if leadErr != nil && lctx.Err() != nil && (errors.Is(leadErr, lctx.Err()) || errors.Is(leadErr, context.Cause(lctx))) {
			leadErr = nil // it stopped because its term or ctx ended
		}
		return leadErr
	})
	return leadErr
}

// passes reports whether err, a Campaign's, may pass by itself, so that a
// campaign started again could succeed.
func passes(err error) bool {
	var a *lock.ArgumentError
	switch {
	case errors.As(err, &a), errors.Is(err, lock.ErrClosed):
		return false
	case errors.Is(err, lock.ErrNoAnswer), neterr.Unanswered(err):
		return true
	}
	return !neterr.Final(err)
}

// IsLeader returns nil while this Elector holds a term, and otherwise an
// error matching ErrNotLeader (or ctx's error, when ctx is done). It reads
// no server: it is the leader's own count of its lease, on its monotonic
// clock, which ends a stop grace before another candidate can be elected.
// It has the form of gocron's Elector interface.
func (e *Elector) IsLeader(ctx context.Context) error {
	if ctx == nil {
		return &lock.ArgumentError{Name: "ctx", Reason: "must not be nil"}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	t := e.current
	e.mu.Unlock()
	if t == nil {
		return ErrNotLeader
	}
	return t.Err()
}

// Leader is what [Elector.Leader] read of the leadership.
type Leader struct {
	// Term is the leader's term, or, when nobody leads, the last term
	// elected (zero if none ever was).
	Term int64
	// Identity is the leader's identity ([WithIdentity]), as it last
	// proclaimed it ([Term.Proclaim]).
	Identity string
	// Fingerprint identifies the leader's lease without revealing its
	// token (see lock.State).
	Fingerprint string
	// TTL is the time the leader's lease has left, as the server counts it.
	TTL time.Duration
	// HeldFor is how long the leader has led, by the stamp of its term.
	HeldFor time.Duration
}

// Leader reads who leads, in one round trip: the term, the identity and
// the time left. When nobody does, it returns the last term elected and
// an error matching ErrNoLeader. A key held without a term (obtained
// without lock.WithFencing, outside an Elector) reads as the last term's.
func (e *Elector) Leader(ctx context.Context) (Leader, error) {
	if ctx == nil {
		return Leader{}, &lock.ArgumentError{Name: "ctx", Reason: "must not be nil"}
	}
	st, err := e.locker.Inspect(ctx, e.key)
	switch {
	case err != nil:
		return Leader{}, err
	case !st.Held:
		return Leader{Term: st.Fence}, ErrNoLeader
	}
	return Leader{Term: st.Fence, Identity: st.Metadata, Fingerprint: st.Fingerprint, TTL: st.TTL, HeldFor: st.HeldFor}, nil
}

// ended forgets t as the current term, if it is.
func (e *Elector) ended(t *Term) {
	e.mu.Lock()
	if e.current == t {
		e.current = nil
	}
	e.mu.Unlock()
}
