// Package redlock implements Redlock, the lock of the Redis distlock
// specification over N independent Redis masters: a lock counts only when a
// quorum of the nodes granted it within its validity, so it survives the
// loss of a minority of the nodes, where single does not survive a failover
// that loses the key.
//
//	locker, err := redlock.New([]driver.Conn{goredis.New(c1), goredis.New(c2), goredis.New(c3)})
//	...
//	lk, err := locker.Obtain(ctx, "payments:settle", 10*time.Second,
//		lock.WithRetry(lock.Exponential(10*time.Millisecond, 200*time.Millisecond)))
//
// Redlock's safety rests on assumptions that a single Redis does not need:
// clocks that do not jump, bounded process pauses after the lock is
// granted, and the delayed-restart rule: a node that crashed must stay
// unavailable for longer than the largest TTL in use ([WithRestartGuard]
// enforces it from the clients). It issues no fencing tokens
// (lock.WithFencing is refused with an *strategy.ArgumentError named
// "fencing"), and its waiters race for the next quorum, with no queue.
// Prefer an odd N: 4 nodes, like 3, survive one failure. When no quorum is
// reached, the error is a [*QuorumError] that gives each node's outcome.
//
// The repository's docs/strategies.md, section "Redlock: surviving the loss
// of nodes", gives each step, option and error, the safety caveats and the
// nodes without scripts; docs/design/redlock.md says why it works as it does.
package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/background"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/drift"
	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/strategy"
)

// noFencing is why WithFencing is refused; docs/design/redlock.md says
// more.
const noFencing = "not supported by redlock: no counter spans independent nodes without consensus; " +
	"use the single strategy for fencing tokens, or have the resource compare-and-set on the lock's unique token"

// redlock is the Redlock [strategy.Strategy] over independent nodes.
type redlock struct {
	nodes       []node
	addr        string // the nodes' names, joined by commas
	quorum      int
	driftFactor float64
	nodeTimeout time.Duration // 0: derived from the TTL
	guard       time.Duration // restart quarantine; 0: off
	plain       []bool        // plain[i]: node i is marked driver.WithoutScripts
	now         func() time.Time

	// inflight holds, by key and value, the fan-out of each lock obtained
	// while some of its nodes' acquires were still on their way, until
	// they returned: Release deletes on such a node only after its
	// acquire, and a Refresh that finds the lock lost deletes there then.
	inflight fans
	// releasing holds, by key (with no value), the fan-out of each Release
	// that returned at a quorum while some nodes' deletes were still on
	// their way, until they returned: an Acquire of that key acquires on
	// such a node only after the delete there returned (see Release).
	releasing fans

	// The first contact with each node (contact.go).
	peers   []peer
	known   atomic.Int32  // how many peers are known
	mu      sync.Mutex    // guards peers (but known), dup and changed
	dup     error         // two nodes found to be one server
	changed chan struct{} // closed, and replaced, whenever a contact ends

	// bg counts the calls to nodes that outlive the call that made them,
	// for Drain.
	bg background.Group
}

// Drain implements [strategy.Drainer]: it waits for the calls to nodes
// that outlived the call that made them (the nodes that had not answered
// when a quorum had, and the clean-ups after them), each bounded by the
// node timeout or by strategy.CleanupTimeout.
func (s *redlock) Drain() { s.bg.Wait() }

type node struct {
	name string
	raw  driver.Conn // the connection given to New
	conn driver.Conn // raw, gated by the first contact
	srv  cas.Server  // conn's operations: scripts, or without scripts
	wake notify.Wake // how a release on the node wakes waiters there
	work *workers    // run the node's part of each fan-out (fanout.go)
}

var (
	_ strategy.Strategy = (*redlock)(nil)
	_ strategy.Notifier = (*redlock)(nil)
)

// Option configures a Strategy.
type Option func(*redlock)

// WithQuorum sets how many nodes must grant the lock. It must be a majority,
// N/2+1, which is the default, or more, up to N.
func WithQuorum(q int) Option { return func(s *redlock) { s.quorum = q } }

// WithDriftFactor sets the clock-drift factor: validity = TTL − elapsed −
// (TTL × factor + 2ms). It must be in [0, 1); the default is 0.01, the
// factor of the specification.
func WithDriftFactor(f float64) Option { return func(s *redlock) { s.driftFactor = f } }

// WithNodeTimeout sets how long one node may take to answer a command on an
// open connection. It must be less than every TTL used. The default is
// derived from the TTL: the TTL × 0.05, from 500ms to 1s, and at most half
// the TTL. The floor leaves a process starved of CPU on a loaded machine,
// or under the race detector, the time to read a node's answer on an open
// connection; the ceiling bounds what a paused or partitioned node costs an
// attempt, whatever the TTL (the TTL × 0.05 of a 100-year TTL is 5 years).
// A value set here has no ceiling; the caller's context bounds every call.
// Release and TTL, which carry no TTL, use it too, or 500ms by default.
func WithNodeTimeout(d time.Duration) Option { return func(s *redlock) { s.nodeTimeout = d } }

// guardKey is the key in which each node records, under [WithRestartGuard],
// when a client first found it empty.
const guardKey = "locksmith:redlock:up-since"

// WithRestartGuard enforces the delayed-restart rule from the clients' side:
// a node counts only once it has been up, without the key
// locksmith:redlock:up-since, for at least maxTTL, which must be at least
// the largest TTL in use. The first client to reach a node that restarted
// empty (or was flushed) records the server's time in that key, and until
// maxTTL has passed the node answers "restarting" and grants nothing: the
// locks it lost have expired on the other nodes by then. A new deployment
// waits maxTTL too, unless an operator seeds the key with 0 on each node
// (SET locksmith:redlock:up-since 0); a user's ACL must allow it. The nodes must not be
// Cluster clients (the acquire script names two keys). The default is off:
// follow the rule operationally instead.
func WithRestartGuard(maxTTL time.Duration) Option { return func(s *redlock) { s.guard = maxTTL } }

// New returns a [lock.Locker] that takes Redlock locks on the nodes, which
// must be independent masters (not replicas of each other, nor members of
// one cluster), over any mix of drivers.
func New(nodes []driver.Conn, opts ...Option) (*lock.Locker, error) {
	s, err := newStrategy(nodes, opts...)
	if err != nil {
		return nil, err
	}
	return lock.New(s), nil
}

// newStrategy returns the strategy over the nodes, which New gives
// lock.New.
func newStrategy(nodes []driver.Conn, opts ...Option) (*redlock, error) {
	if len(nodes) == 0 {
		return nil, &strategy.ArgumentError{Name: "nodes", Reason: "must list at least one node"}
	}
	s := &redlock{quorum: len(nodes)/2 + 1, driftFactor: drift.DefaultFactor, now: time.Now,
		peers: make([]peer, len(nodes)), changed: make(chan struct{}), plain: make([]bool, len(nodes))}
	names := make([]string, len(nodes))
	for i, c := range nodes {
		var ae *strategy.ArgumentError
		if errors.As(cas.CheckConn("conn", c), &ae) {
			return nil, &strategy.ArgumentError{Name: fmt.Sprintf("nodes[%d]", i), Reason: ae.Reason}
		}
		names[i] = cmp.Or(driver.Addr(c), fmt.Sprintf("node %d", i))
		n := node{name: names[i], raw: c, conn: gated{c, s, i}, wake: notify.Waking(c), work: &workers{jobs: make(chan job)}}
		for _, m := range s.nodes {
			if m.raw == c || (m.name == n.name && driver.Addr(c) != "") {
				return nil, &strategy.ArgumentError{Name: fmt.Sprintf("nodes[%d]", i), Reason: fmt.Sprintf("lists %s again: each node must be an independent master, listed once", n.name)}
			}
		}
		s.nodes = append(s.nodes, n)
		s.plain[i] = driver.ScriptsOff(c)
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, &strategy.ArgumentError{Name: "option", Reason: "must not be nil"}
		}
		opt(s)
	}
	n := len(nodes)
	switch {
	case s.quorum < n/2+1 || s.quorum > n:
		return nil, &strategy.ArgumentError{Name: "quorum", Reason: fmt.Sprintf("must be a majority of the %d nodes, from %d to %d, got %d", n, n/2+1, n, s.quorum)}
	case !(s.driftFactor >= 0 && s.driftFactor < 1):
		return nil, &strategy.ArgumentError{Name: "drift factor", Reason: fmt.Sprintf("must be in [0, 1), got %v", s.driftFactor)}
	case s.nodeTimeout < 0:
		return nil, &strategy.ArgumentError{Name: "node timeout", Reason: fmt.Sprintf("must be positive, got %v", s.nodeTimeout)}
	case s.guard < 0:
		return nil, &strategy.ArgumentError{Name: "restart guard", Reason: fmt.Sprintf("must not be negative, got %v", s.guard)}
	case s.guard > 0 && slices.Contains(s.plain, true):
		return nil, &strategy.ArgumentError{Name: "restart guard", Reason: "WithRestartGuard's acquisition is a script: it cannot be used with nodes marked driver.WithoutScripts"}
	}
	for i := range s.nodes {
		var err error
		if s.nodes[i].srv, err = cas.NewServer(fmt.Sprintf("nodes[%d]", i), s.nodes[i].conn, s.plain[i]); err != nil {
			return nil, err
		}
	}
	s.addr = strings.Join(names, ",") // asked for by every hook event
	return s, nil
}

// Quorum returns how many nodes must grant a lock.
func (s *redlock) Quorum() int { return s.quorum }

// ReportsNodes implements [strategy.NodeReporter]: each node's answer reaches
// the Node hooks (the otel package records them as span events).
func (s *redlock) ReportsNodes() bool { return true }

// String returns the strategy's name, "redlock".
func (s *redlock) String() string { return "redlock" }

// Shared implements [strategy.Sharer] to refuse semaphores and read-write
// locks with an *strategy.ArgumentError whose reason says why; a node that
// restarted empty would, besides, forget its holders.
func (s *redlock) Shared(sh strategy.Sharing) (strategy.SharedStrategy, error) {
	return nil, &strategy.ArgumentError{Name: sh.Option(), Reason: "semaphores and read-write locks are not supported by redlock: " +
		"their holders are counted atomically on one server, which a quorum of independent masters cannot do " +
		"(two clients could each count a free permit on a different majority); use the single strategy", Err: errors.ErrUnsupported}
}

// Addr returns the nodes' names, joined by commas.
func (s *redlock) Addr() string { return s.addr }

// The default node timeout is the TTL × 0.05, as in redsync, from
// minNodeTimeout to maxNodeTimeout, and at most half the TTL (see
// WithNodeTimeout).
const (
	minNodeTimeout = 500 * time.Millisecond
	maxNodeTimeout = time.Second
)

// timeouts returns the per-node timeout and the drift allowance for ttl, or
// an error if ttl leaves no validity after the allowance, or the node
// timeout is not less than ttl.
func (s *redlock) timeouts(ttl time.Duration) (timeout, allowance time.Duration, err error) {
	allowance, err = drift.Allowance(ttl, s.driftFactor)
	if err != nil {
		return 0, 0, err
	}
	timeout = cmp.Or(s.nodeTimeout, min(max(ttl/20, minNodeTimeout), maxNodeTimeout, ttl/2))
	if timeout >= ttl || timeout <= 0 {
		return 0, 0, &strategy.ArgumentError{Name: "node timeout", Reason: fmt.Sprintf("must be less than the TTL: %v is not less than %v", timeout, ttl)}
	}
	return timeout, allowance, nil
}

// Acquire implements [strategy.Strategy].
func (s *redlock) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	// A first attempt starts with a bare SET NX PX (see Cost in
	// docs/design/redlock.md, and cas.StartOf); the guarded acquire is a
	// script of its own.
	return s.acquire(ctx, r, cas.Lock{Key: r.Key, Value: r.Value(), TTL: r.TTL, Start: cas.StartOf(r)})
}

// onEach returns the op of a fan-out that runs call on each node: one call
// for every node (the drivers do not modify its arguments).
func onEach(call cas.Call) func(ctx context.Context, i int, n node) error {
	return func(ctx context.Context, _ int, n node) error {
		_, err := n.srv.Run(ctx, call)
		return err
	}
}

// acquire makes one attempt to lock r, taking l on each node (guarded under
// WithRestartGuard): Acquire's, with r.Key, or AcquireKeys's, with r.Keys.
// When no quorum is reached, the error is a *QuorumError; wrapped in a
// *strategy.KeyError when the nodes that found the lock held name a key
// (see lost).
func (s *redlock) acquire(ctx context.Context, r strategy.Request, l cas.Lock) (strategy.Grant, error) {
	if r.Fencing {
		return strategy.Grant{Undone: true}, &strategy.ArgumentError{Name: "fencing", Reason: noFencing, Err: errors.ErrUnsupported}
	}
	timeout, allowance, err := s.timeouts(r.TTL)
	if err != nil {
		return strategy.Grant{Undone: true}, err
	}
	if err := s.contact(ctx, timeout); err != nil {
		return strategy.Grant{Undone: true}, err
	}
	if s.guard > 0 {
		l.GuardKey, l.Quarantine = guardKey, s.guard
	}
	take := onEach(cas.Acquire(l))
	if prior := s.releases(r); prior != nil {
		// On a node where this Strategy's release of a key is still on its
		// way, the acquire goes once that release returned there, so that
		// its delete cannot land after our write, nor its old token answer
		// "taken"; the other nodes go at once (see Release).
		acquire := take
		take = func(ctx context.Context, i int, n node) error {
			for _, f := range prior {
				if err := f.returnedOn(ctx, i); err != nil {
					return err
				}
			}
			return acquire(ctx, i, n)
		}
	}
	start := s.now()
	h, ttl := holding{r.Key, r.Keys, r.Value()}, r.TTL // what the closures below need of r, which is too large for them to copy
	// Each node whose attempt is part of a failure is released right after
	// that attempt returns, so a late SET cannot outlive its release; a node
	// still on its way when the caller's context ends is released in the
	// background. A node that granted it needs one answered delete (its
	// grant was the first answer, see strategy.CleanUp); one that refused wrote
	// nothing.
	undo := after{needed: func(err error, failed bool) bool {
		o := outcome(err)
		return failed && o != Taken && o != Restarting
	}, do: func(ctx context.Context, _ int, n node, err error, _ bool) {
		if outcome(err) == OK {
			drop(ctx, n, h, timeout)
			return
		}
		_ = strategy.CleanUp(ctx, h.key, func(ctx context.Context) error { return undoOn(ctx, n, h) })
	}}
	var elapsed time.Duration // set when a quorum answered too late
	res, failed, f := s.fanOut(ctx, timeout, take, undo, func(t tally) decision {
		switch {
		case t.ok >= s.quorum:
			if e := s.now().Sub(start); ttl-e-allowance <= 0 {
				elapsed = e // the lock expired, or will, before it could be used
				return failure
			}
			return success
		case t.ok+t.pending < s.quorum:
			if t.timeout > 0 && t.pending > 0 {
				// The others answer within the node timeout too: whether
				// the lock is held elsewhere or nodes did not answer
				// (ErrNotObtained or ErrNoAnswer) is theirs to tell.
				return undecided
			}
			return failure
		}
		return undecided
	})
	defer report(ctx, res)
	if !failed && slices.ContainsFunc(res, func(n *NodeError) bool { return n.Outcome == Pending }) {
		f.track(&s.inflight, h.key, h.value, nil)
	}
	// On failure every node has been, or is being, released by fanOut.
	cleaned := strategy.Grant{Undone: true}
	switch {
	case !failed:
		return strategy.Grant{Drift: allowance}, nil
	case elapsed > 0:
		return cleaned, &QuorumError{Op: "obtain", Quorum: s.quorum, Nodes: res, Elapsed: elapsed, TTL: r.TTL}
	case ctx.Err() != nil:
		return cleaned, ctx.Err()
	}
	qe := &QuorumError{Op: "obtain", Quorum: s.quorum, Nodes: res}
	if held := lost(res); len(held) > 0 {
		return cleaned, &strategy.KeyError{Key: held[0].Key, Err: qe}
	}
	return cleaned, qe
}

// releases returns the fan-outs of this Strategy's releases of r's keys
// that are still on their way, or nil.
func (s *redlock) releases(r strategy.Request) []*fan {
	keys := r.Keys
	if keys == nil {
		keys = []string{r.Key}
	}
	var prior []*fan
	for _, k := range keys {
		if f := s.releasing.load(lockName{key: k}); f != nil {
			prior = append(prior, f)
		}
	}
	return prior
}

// holding is a lock held, or tried, with a value: its key, or for a lock
// of several keys, Key the first of its Keys.
type holding struct {
	key   string
	keys  []string
	value string
}

// undoOn deletes what an attempt of h may have written on n.
func undoOn(ctx context.Context, n node, h holding) error {
	_, err := n.srv.Run(ctx, cas.Delete(cas.Lock{Key: h.key, Keys: h.keys, Value: h.value}))
	return err
}

// drop deletes what the lock h holds on n, a node that granted or extended
// it when the lock as a whole is not ours: one delete within timeout, and
// strategy.CleanUp when that gets no answer.
func drop(ctx context.Context, n node, h holding, timeout time.Duration) {
	del := func(ctx context.Context) error { return undoOn(ctx, n, h) }
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	err := del(dctx)
	cancel()
	if err == nil || errors.Is(err, strategy.ErrNotHeld) {
		return
	}
	_ = strategy.CleanUp(ctx, h.key, del)
}

// dropLost deletes, in the background, the lock h when
// the refresh found it lost (err matches strategy.ErrNotHeld: so many nodes
// found it gone or taken that no quorum holds it), from the nodes that
// extended it (res's OK ones), and from those where its acquire was still
// on its way, once that returned. Left there, our token would count against
// every contender's quorum until its TTL ends.
func (s *redlock) dropLost(ctx context.Context, h holding, res []*NodeError, timeout time.Duration, err error) {
	if !errors.Is(err, strategy.ErrNotHeld) {
		return
	}
	acq := s.inflight.load(lockName{h.key, h.value})
	for i, ne := range res {
		acquiring := acq != nil && !acq.slots[i].returned.Load()
		if ne.Outcome != OK && !acquiring {
			continue
		}
		go func(n node, done func()) {
			defer done()
			if acquiring {
				<-acq.idle // within the acquire's node timeout, for a driver that honours its context
			}
			drop(ctx, n, h, timeout)
		}(s.nodes[i], s.bg.Start())
	}
}

// Refresh implements [strategy.Strategy]: it extends on all nodes, and succeeds
// only with a quorum, within the new validity. When it finds the lock lost,
// it deletes it, in the background, from the nodes that it extended, and
// from those where the lock's acquire was still on its way, once that
// returned.
func (s *redlock) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	return s.refresh(ctx, holding{key: key, value: value}, ttl)
}

// refresh extends the lock h (h.key alone, or h.keys) for ttl on every
// node, as Refresh does.
func (s *redlock) refresh(ctx context.Context, h holding, ttl time.Duration) (strategy.Grant, error) {
	timeout, allowance, err := s.timeouts(ttl)
	if err != nil {
		return strategy.Grant{}, err
	}
	start := s.now()
	res, _, _ := s.fanOut(ctx, timeout, onEach(cas.PExpire(cas.Lock{Key: h.key, Keys: h.keys, Value: h.value, TTL: ttl})), after{}, nil)
	defer report(ctx, res)
	g, err := s.extended(res, start, ttl, allowance)
	s.dropLost(ctx, h, res, timeout, err)
	return g, err
}

// extended turns the node results of a refresh of a lock for ttl, sent at
// start, into what Refresh returns: the error of checkHeld when no quorum
// extended it, a *QuorumError when the quorum answered too late to leave
// any validity (TTL − elapsed − allowance), and otherwise the Grant with
// the drift allowance. Refresh and RefreshBatch (for each of its locks)
// share it.
func (s *redlock) extended(res []*NodeError, start time.Time, ttl, allowance time.Duration) (strategy.Grant, error) {
	if err := s.checkHeld("refresh", res); err != nil {
		return strategy.Grant{}, err
	}
	if elapsed := s.now().Sub(start); elapsed >= ttl-allowance {
		return strategy.Grant{}, &QuorumError{Op: "refresh", Quorum: s.quorum, Nodes: res, Elapsed: elapsed, TTL: ttl}
	}
	return strategy.Grant{Drift: allowance}, nil
}

// Release implements [strategy.Strategy]: it releases on all nodes, and
// each node's release wakes the lock's waiters there (see Waiting in
// docs/design/redlock.md). On a node whose acquire was still on its way
// when the quorum was reached, it releases once that acquire returned.
//
// It returns once a quorum of nodes confirmed the release, or every node
// answered or timed out: the other nodes' releases go on in the
// background, bounded by the node timeout, and one that gives no answer in
// time is retried in the background (see [strategy.CleanUp]), so that no
// key outlives a Release that returned nil longer than that clean-up
// takes. Returning at the quorum is safe for exclusion: once a quorum no
// longer holds our token, the lock is free, which any contender must learn
// from a quorum of its own; until the remaining nodes' deletes land, each
// of them holds our token only until its TTL ends, and counts against a
// contender's quorum exactly as a node that missed our release would.
//
// Those stragglers would answer "taken" to an Obtain of the same key right
// after, which, with a node down besides, would find no quorum: an Acquire
// of a key that this Strategy is still releasing acquires on a node whose
// delete is still on its way once that delete returned, within the node
// timeout, and on the other nodes at once. So a stalled node costs the
// next Obtain of the key nothing while a quorum of the others answer. The
// old delete and the new write, both waiting on a stalled node, are safe
// in either order: the delete removes only the old token, and a write that
// lands first finds the old token and writes nothing (see "No wait for a
// stalled node" in docs/design/redlock.md). A contender in another process
// may find the stragglers, for about a round trip, as it finds any holder:
// its retry policy applies. A process that exits right after Release
// leaves them until their TTL ends, on a minority of the nodes.
func (s *redlock) Release(ctx context.Context, key, value string) error {
	return s.release(ctx, key, nil, value)
}

// release deletes the lock on key alone (keys nil), or on keys (key is the
// first), held with value, on every node, as Release does: with the node's
// call of notify.DeleteWakingCall, built once for each way the nodes wake
// waiters.
func (s *redlock) release(ctx context.Context, key string, keys []string, value string) error {
	var calls [notify.Wakes]*cas.Call
	for _, n := range s.nodes {
		if calls[n.wake] == nil {
			c := notify.DeleteWakingCall(n.wake, key, keys, value)
			calls[n.wake] = &c
		}
	}
	acq := s.inflight.load(lockName{key, value})
	op := func(ctx context.Context, i int, n node) error {
		if err := acq.returnedOn(ctx, i); err != nil {
			return err
		}
		_, err := n.srv.Run(ctx, *calls[n.wake])
		return err
	}
	res, _, f := s.fanOut(ctx, s.opTimeout(), op, after{needed: func(err error, _ bool) bool { return !answered(outcome(err)) },
		do: func(ctx context.Context, i int, n node, _ error, _ bool) {
			_ = strategy.CleanUp(ctx, key, func(ctx context.Context) error { return op(ctx, i, n) })
		}}, func(t tally) decision {
		if t.ok >= s.quorum {
			return success
		}
		return undecided
	})
	defer report(ctx, res)
	if slices.ContainsFunc(res, func(n *NodeError) bool { return n.Outcome == Pending }) {
		f.track(&s.releasing, key, "", keys)
	}
	return s.checkHeld("release", res)
}

// Listen implements [strategy.Notifier]: the waiter id hears the releases
// of key on every node whose driver can subscribe. It returns nil when none
// can, or key has no channel (a key with '}' but no hash tag), and the
// waiter polls.
func (s *redlock) Listen(key, id string) strategy.Listener {
	conns := make([]driver.Conn, len(s.nodes))
	for i, n := range s.nodes {
		conns[i] = n.raw
	}
	return notify.ListenLock(conns, key, id)
}

// Leave implements [strategy.Notifier]: Redlock keeps no queue (see
// docs/design/redlock.md), so there is nothing to leave.
func (s *redlock) Leave(context.Context, string, string) error { return nil }

// TTL implements [strategy.Strategy]: the time until fewer than a quorum of
// nodes will hold the lock.
func (s *redlock) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	return s.ttl(ctx, cas.PTTL(cas.Lock{Key: key, Value: value}))
}

// ttl returns the time until fewer than a quorum of nodes will hold a
// lock, whose remaining time on a node call reads, as TTL does.
func (s *redlock) ttl(ctx context.Context, call cas.Call) (time.Duration, error) {
	ttls := make([]time.Duration, len(s.nodes))
	res, _, _ := s.fanOut(ctx, s.opTimeout(), func(ctx context.Context, i int, n node) error {
		r, err := n.srv.Run(ctx, call)
		ttls[i] = r.TTL
		return err
	}, after{}, nil)
	defer report(ctx, res)
	if err := s.checkHeld("ttl", res); err != nil {
		return 0, err
	}
	var held []time.Duration
	for i, r := range res {
		if r.Outcome == OK {
			held = append(held, ttls[i])
		}
	}
	return s.quorumTTL(held), nil
}

// opTimeout bounds one node's answer to Release, TTL, Inspect and Break,
// which carry no TTL: the configured node timeout, or 500ms. TTL, Inspect
// and Break wait for every node, and Release for a quorum, its other
// deletes going on in the background (a refused connection answers at
// once; a paused node costs the whole bound), and a loaded machine must
// not turn a slow answer into a failed release.
func (s *redlock) opTimeout() time.Duration {
	return cmp.Or(s.nodeTimeout, 500*time.Millisecond)
}

// checkHeld turns the node results of an operation on a held lock into nil
// (a quorum holds it), ErrExpired, ErrBroken (a node found a Break's mark)
// or ErrTaken (so many nodes say it is not ours that no quorum can), or a
// QuorumError (too many nodes failed to
// tell). For a lock of several keys, the error is those of the keys that
// the most nodes found gone or taken (see lost).
func (s *redlock) checkHeld(op string, res []*NodeError) error {
	switch t := tallyOf(res); {
	case t.ok >= s.quorum:
		return nil
	case t.taken+t.expired > len(res)-s.quorum:
		if keys := lost(res); len(keys) > 0 {
			joined := make([]error, len(keys))
			for i, k := range keys {
				joined[i] = k
			}
			return errors.Join(joined...)
		}
		switch {
		case t.taken > 0:
			return strategy.ErrTaken
		case slices.ContainsFunc(res, func(r *NodeError) bool { return errors.Is(r.answer, strategy.ErrBroken) }):
			return strategy.ErrBroken
		}
		return strategy.ErrExpired
	}
	return &QuorumError{Op: op, Quorum: s.quorum, Nodes: res}
}

// lost returns, for a lock of several keys, the errors of the keys that
// the most nodes name, sorted by key: one node's *strategy.KeyError for
// each, one that wraps ErrTaken if a node found the key taken. A node that
// answered Taken or Expired answered with a *strategy.KeyError, or several,
// joined, one per key it found held, gone or taken. It returns none for a
// lock of one key, whose errors name no key.
func lost(res []*NodeError) []*strategy.KeyError {
	found := map[string]*strategy.KeyError{}
	count := map[string]int{}
	most := 0
	for _, r := range res {
		if r.Outcome != Taken && r.Outcome != Expired {
			continue
		}
		for _, ke := range strategy.KeyErrors(r.answer) {
			if found[ke.Key] == nil || errors.Is(ke.Err, strategy.ErrTaken) {
				found[ke.Key] = ke
			}
			count[ke.Key]++
			most = max(most, count[ke.Key])
		}
	}
	var keys []string
	for k, n := range count {
		if n == most {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]*strategy.KeyError, len(keys))
	for i, k := range keys {
		out[i] = found[k]
	}
	return out
}

// errNodeTimeout is the error of a node that did not answer within the node
// timeout, though its driver did not return.
var errNodeTimeout error = unanswered("redlock: node did not answer within the node timeout")

// unanswered is the error of a node that did not answer. It is a timeout
// (its Timeout method), as a network timeout is, so that a call that failed
// for it matches lock.ErrNoAnswer.
type unanswered string

func (e unanswered) Error() string { return string(e) }
func (unanswered) Timeout() bool   { return true }

// outcome classifies one node's answer.
func outcome(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, strategy.ErrNotObtained), errors.Is(err, strategy.ErrTaken):
		return Taken
	case errors.Is(err, strategy.ErrExpired):
		return Expired
	case errors.Is(err, cas.ErrRestarting):
		return Restarting
	case errors.Is(err, errNodeTimeout), errors.Is(err, errNoContact), neterr.Timeout(err):
		return Timeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	}
	return Failed
}
