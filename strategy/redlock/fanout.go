package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locksmith-go/lock/strategy"
)

// Outcome is what one node answered.
type Outcome int

// The outcomes of one node.
const (
	Pending    Outcome = iota // not waited for: the quorum was decided without it
	OK                        // granted (or, for Refresh, Release and TTL: held by us)
	Taken                     // held by another owner
	Expired                   // the key is gone (Refresh, Release, TTL)
	Timeout                   // no answer within the node timeout
	Refused                   // the connection was refused: the node is down
	Restarting                // restarted too recently to rejoin (WithRestartGuard)
	Failed                    // a Redis or transport error
)

var outcomeNames = [...]string{"pending", "ok", "taken", "expired", "timeout", "refused", "restarting", "error"}

// String returns the outcome's name in lower case, as the QuorumError
// message and the lock.node span events give it: "ok", "taken", "timeout",
// and so on.
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return outcomeNames[o]
}

// NodeError is one node's part in a [QuorumError].
type NodeError struct {
	Node    string  // the node's address (driver.Addresser), or "node i"
	Outcome Outcome // what the node answered
	Err     error   // the node's error; nil for OK, Taken, Expired and Pending

	// answer is the error of a node that answered Taken or Expired: for a
	// lock of several keys, the *strategy.KeyErrors that name the keys it
	// found held, gone or taken (see lost).
	answer error
}

// Error returns "redlock: <node>: <outcome>", followed by the node's error
// when there is one.
func (e *NodeError) Error() string {
	if e.Err == nil {
		return "redlock: " + e.Node + ": " + e.Outcome.String()
	}
	return "redlock: " + e.Node + ": " + e.Outcome.String() + ": " + e.Err.Error()
}

// Unwrap returns the node's error, so that errors.Is and errors.As see it.
func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError reports an operation that no quorum of nodes carried out,
// with each node's outcome; for Break, which acts on every node it can,
// the nodes that did not answer. For Obtain it matches
// strategy.ErrNotObtained when at most N − quorum nodes failed (timed out,
// refused, restarting or erred), so that a quorum is still possible and the
// lock is just held elsewhere, or when the quorum answered too late: the
// retry policy applies. Otherwise no quorum is possible and Obtain fails at
// once.
//
// It is a timeout (its Timeout method), so that the call's error matches
// lock.ErrNoAnswer when it does not match ErrNotObtained and some node
// timed out, whatever the others answered; it never matches both. The
// repository's docs/strategies.md, its paragraph "Fail fast, and explain",
// says which applies when.
//
// errors.As finds the first failing node's *NodeError, and the errors of
// the nodes below it.
type QuorumError struct {
	Op     string       // obtain, refresh, release, ttl, inspect or break
	Quorum int          // nodes needed
	Nodes  []*NodeError // every node, in the order given to New
	// Elapsed and TTL are set when a quorum answered but too late: the
	// validity, TTL − Elapsed − drift, was not positive.
	Elapsed, TTL time.Duration
}

// Error says which operation failed and why, how many nodes gave each
// outcome, and each failing node's error.
func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s: ", e.Op)
	switch {
	case e.Elapsed > 0:
		fmt.Fprintf(&b, "a quorum answered after %v, leaving no validity of the %v TTL", e.Elapsed.Round(time.Millisecond), e.TTL)
	case e.Op == "break":
		b.WriteString("not every node answered: a node that did not may hold the lock until it expires there")
	default:
		fmt.Fprintf(&b, "no quorum (%d of %d nodes needed)", e.Quorum, len(e.Nodes))
	}
	counts := map[Outcome]int{}
	for _, n := range e.Nodes {
		counts[n.Outcome]++
	}
	sep := ": "
	for o := range Outcome(len(outcomeNames)) {
		if counts[o] > 0 {
			fmt.Fprintf(&b, "%s%d %v", sep, counts[o], o)
			sep = ", "
		}
	}
	for _, n := range e.Nodes {
		if n.Err != nil {
			fmt.Fprintf(&b, "; %s: %v", n.Node, n.Err)
		}
	}
	return b.String()
}

// ErrorType returns "no_quorum", the error.type telemetry records. The
// otel package asks any error for such a method, so that a strategy's own
// errors get their own error.type without otel importing the strategy.
func (e *QuorumError) ErrorType() string { return "no_quorum" }

// Is reports whether target is strategy.ErrNotObtained and the failure was
// contention rather than failing nodes.
func (e *QuorumError) Is(target error) bool {
	if target != strategy.ErrNotObtained || e.Op != "obtain" {
		return false
	}
	if e.Elapsed > 0 {
		return true
	}
	return tallyOf(e.Nodes).failed <= len(e.Nodes)-e.Quorum
}

// Timeout reports whether the operation failed for want of answers: it
// does not match strategy.ErrNotObtained, no quorum answered too late, and
// some node timed out. A call that failed for it matches lock.ErrNoAnswer,
// as for a network timeout.
func (e *QuorumError) Timeout() bool {
	if e.Elapsed > 0 || e.Is(strategy.ErrNotObtained) {
		return false
	}
	return slices.ContainsFunc(e.Nodes, func(n *NodeError) bool { return n.Outcome == Timeout })
}

// Unwrap returns the failing nodes' errors.
func (e *QuorumError) Unwrap() []error {
	var errs []error
	for _, n := range e.Nodes {
		if n.Err != nil {
			errs = append(errs, n)
		}
	}
	return errs
}

// tally counts the nodes by outcome; failed counts every node that timed
// out, was refused, restarting or erred, and timeout those that timed out.
type tally struct{ ok, taken, expired, failed, timeout, pending int }

func (t *tally) add(o Outcome) {
	switch o {
	case OK:
		t.ok++
	case Taken:
		t.taken++
	case Expired:
		t.expired++
	case Pending:
		t.pending++
	default:
		t.failed++
		if o == Timeout {
			t.timeout++
		}
	}
}

// tallyOf counts the nodes of res by outcome.
func tallyOf(res []*NodeError) (t tally) {
	for _, r := range res {
		t.add(r.Outcome)
	}
	return t
}

type decision int

const (
	undecided decision = iota
	success
	failure
)

type answer struct {
	i   int
	err error
}

// slot is one node's part of a fan: its answer, which fanOut records, and
// whether its op returned, which the op sets. They share an allocation.
type slot struct {
	NodeError
	returned atomic.Bool
	// With an after: got says that fanOut took the node's answer before the
	// outcome was known, and err is what its op returned.
	got bool
	err error
}

// fan is the state that one fanOut shares with its goroutines.
type fan struct {
	ctx     context.Context // every node's, bounded by the timeout
	cancel  context.CancelFunc
	running atomic.Int32 // nodes whose op has not returned; the last cancels ctx
	answers chan answer
	slots   []slot        // slots[i] is node i's
	idle    chan struct{} // closed once every op has returned
	// With an after: undone gets the index of each node that fanOut
	// followed up, once its after ran.
	undone chan int
	// mu guards allReturned and tracked: the set that holds f, under the lock
	// names of tracked.keys (or tracked.key alone) with tracked.value,
	// until every op returned (see track); and, with an after, decided,
	// set once the outcome is known, with failed. A node whose op returns
	// before that hands its answer to fanOut, which follows it up; one
	// that returns after follows itself up.
	mu          sync.Mutex
	decided     bool
	failed      bool
	allReturned bool // every op returned
	tracked     tracking
}

// tracking is where a fan is tracked: see fan.track.
type tracking struct {
	set        *fans
	key, value string
	keys       []string
}

// lockName names a lock in a set of fans: its key, and for
// Strategy.inflight its value, which holds the attempt's own token.
type lockName struct{ key, value string }

// fans is a set of fan-outs with ops still on their way, by lock name: a
// mutex and a map, which, unlike a sync.Map, allocates nothing per entry
// to box the name or the fan.
type fans struct {
	mu sync.Mutex
	m  map[lockName]*fan
}

// load returns the fan under name, or nil.
func (fs *fans) load(name lockName) *fan {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.m[name]
}

// track puts f in set, under the name of key (or of each of keys) with
// value, until every op of f has returned, when the last one takes it out:
// not at all if they have already.
func (f *fan) track(set *fans, key, value string, keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.allReturned {
		return
	}
	f.tracked = tracking{set, key, value, keys}
	f.tracked.each(func(name lockName) {
		if set.m == nil {
			set.m = map[lockName]*fan{}
		}
		set.m[name] = f
	})
}

// each calls fn under t.set's mutex with the name of t.key, or of each of
// t.keys, with t.value.
func (t tracking) each(fn func(lockName)) {
	t.set.mu.Lock()
	defer t.set.mu.Unlock()
	if t.keys == nil {
		fn(lockName{t.key, t.value})
		return
	}
	for _, k := range t.keys {
		fn(lockName{k, t.value})
	}
}

// returnedOn waits until the op of f, a fan-out on its way (nil: none), on
// node i returned, within ctx, so that what the caller sends to the node
// lands after it: a release of a lock deletes on the node after its
// acquire's write, and an acquire of a key writes after the delete of its
// last release. The nodes whose ops returned, a quorum, go on at once; the
// others once every op of f returned, within the node timeout.
func (f *fan) returnedOn(ctx context.Context, i int) error {
	if f == nil || f.slots[i].returned.Load() {
		return nil
	}
	select {
	case <-f.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// forget marks every op of f returned, and takes f out of the set that
// tracks it, under the names that still name f.
func (f *fan) forget() {
	f.mu.Lock()
	f.allReturned = true
	t := f.tracked
	f.mu.Unlock()
	if t.set == nil {
		return
	}
	t.each(func(name lockName) {
		if t.set.m[name] == f {
			delete(t.set.m, name)
		}
	})
}

// after is a fan-out's follow-up on node i, whose op returned err, once
// the outcome of the fan-out is known (failed): do runs where needed says
// so. It runs right after the node's op returned, on the node's goroutine,
// or, for a node that answered before the outcome was known, on a
// goroutine of its own once it is known; the fan-out waits for it on the
// nodes that answered, and not for the others. The zero after does
// nothing.
type after struct {
	needed func(err error, failed bool) bool
	do     func(ctx context.Context, i int, n node, err error, failed bool)
}

func (f *fan) run(ctx context.Context, i int, n node, op func(ctx context.Context, i int, n node) error, then after) {
	err := op(f.ctx, i, n)
	f.slots[i].returned.Store(true)
	if f.running.Add(-1) == 0 {
		f.cancel()
		close(f.idle)
		f.forget()
	}
	if then.do == nil {
		f.answers <- answer{i, err}
		return
	}
	f.mu.Lock()
	decided, failed := f.decided, f.failed
	if !decided {
		f.answers <- answer{i, err} // buffered for every node: never blocks
	}
	f.mu.Unlock()
	if decided && then.needed(err, failed) {
		then.do(ctx, i, n, err, failed)
	}
}

// follow runs then for node i, whose answer fanOut took, and sends i on
// undone; done ends its count in the Strategy's background work.
func (f *fan) follow(ctx context.Context, done func(), i int, n node, then after, failed bool) {
	defer done()
	then.do(ctx, i, n, f.slots[i].err, failed)
	f.undone <- i
}

// fanOut runs op on every node at once, bounded by timeout (by the context
// it gets, one deadline for all the nodes, and by a timer, in case a driver
// does not honour the context) and by ctx. With decide, it returns as soon
// as decide settles the outcome; without, once every node answered or
// timed out. With then, it follows up each node where then is needed, once
// the outcome is known and never before the node's own op returned (so that
// a clean-up can never precede a late write), and waits for it on the nodes
// that answered OK, Taken or Expired, while ctx allows; the others go on in
// the background, which is safe because every attempt has its own token. A
// node whose answer needs no follow-up costs nothing more: its goroutine is
// free as soon as it answered. The fan it returns tells when each op
// returned. It does not report the nodes' answers: its caller defers
// [report].
func (s *redlock) fanOut(ctx context.Context, timeout time.Duration,
	op func(ctx context.Context, i int, n node) error, then after, decide func(tally) decision,
) (res []*NodeError, failed bool, f *fan) {
	f = &fan{answers: make(chan answer, len(s.nodes)), slots: make([]slot, len(s.nodes)), idle: make(chan struct{})}
	res = make([]*NodeError, len(s.nodes))
	for i, n := range s.nodes {
		f.slots[i].NodeError = NodeError{Node: n.name, Outcome: Pending}
		res[i] = &f.slots[i].NodeError
	}
	f.ctx, f.cancel = context.WithTimeout(ctx, timeout)
	f.running.Store(int32(len(s.nodes)))
	if then.do != nil {
		f.undone = make(chan int, len(s.nodes))
	}
	for i, n := range s.nodes {
		n.work.do(job{f: f, ctx: ctx, i: i, n: n, op: op, then: then, done: s.bg.Start()}) // the job may outlive the call
	}

	t := tally{pending: len(s.nodes)}
	// A node gets half its timeout again past the deadline of f.ctx to
	// return, before fanOut gives up on it: the timer starts then, if an op
	// is still running, so that a fan-out whose nodes all answered in time
	// makes none.
	expired := f.ctx.Done()
	var late <-chan time.Time
	record := func(a answer) {
		f.slots[a.i].got, f.slots[a.i].err = true, a.err
		if res[a.i].Outcome != Pending {
			return // given up on (timedOut), but answered before the outcome was known
		}
		o := outcome(a.err)
		res[a.i].Outcome = o
		if answered(o) {
			res[a.i].answer = a.err
		} else {
			res[a.i].Err = a.err
		}
		t.pending--
		t.add(o)
	}
	// drain records the answers already sent.
	drain := func() {
		for {
			select {
			case a := <-f.answers:
				record(a)
			default:
				return
			}
		}
	}
	timedOut := func(err error) {
		// A starved process can find the timer and answers ready at once,
		// and select picks at random: take the answers that came first.
		drain()
		for _, r := range res {
			if r.Outcome == Pending {
				r.Outcome, r.Err = Timeout, err
				t.pending--
				t.failed++
			}
		}
	}
	done := ctx.Done()
	d := undecided
	for t.pending > 0 && d == undecided {
		select {
		case a := <-f.answers:
			record(a)
		case <-expired: // f.ctx's deadline, or every op returned (the last cancels it)
			expired = nil
			if f.running.Load() > 0 {
				timer := time.NewTimer(timeout / 2)
				defer timer.Stop()
				late = timer.C
			}
		case <-late:
			timedOut(errNodeTimeout)
		case <-done: // the caller's deadline, for a driver that does not honour it
			timedOut(ctx.Err())
		}
		if decide != nil {
			d = decide(t)
		}
	}
	failed = d == failure
	if then.do != nil {
		f.mu.Lock()
		f.decided, f.failed = true, failed
		f.mu.Unlock()
		// Every answer sent before the outcome was known is fanOut's to
		// follow up: those it took, and those still queued.
		drain()
		wait := 0
		for i := range f.slots {
			sl := &f.slots[i]
			if !sl.got || !then.needed(sl.err, failed) {
				continue
			}
			if answered(sl.Outcome) {
				wait++
			}
			go f.follow(ctx, s.bg.Start(), i, s.nodes[i], then, failed)
		}
		for wait > 0 {
			select {
			case i := <-f.undone:
				if answered(res[i].Outcome) {
					wait--
				}
			case <-done:
				wait = 0 // the rest goes on in the background
			}
		}
	}
	return res, failed, f
}

// report reports each node's answer to the Node hooks (see
// strategy.ReportNode). Every caller of fanOut defers it, so that the hooks
// run once the call has recorded its state (the fan-outs still on their
// way, in inflight and releasing): a hook that panics leaves the Strategy
// consistent.
func report(ctx context.Context, res []*NodeError) {
	for _, r := range res {
		strategy.ReportNode(ctx, r.Node, r.Outcome.String(), r.Err)
	}
}

// answered reports whether a node gave an answer about the key.
func answered(o Outcome) bool { return o == OK || o == Taken || o == Expired }

// job is one node's part of a fan-out: fan.run's arguments.
type job struct {
	f    *fan
	ctx  context.Context
	i    int
	n    node
	op   func(ctx context.Context, i int, n node) error
	then after
	done func() // ends the job's count in its Strategy's background work
}

// workerIdle is how long a worker waits for another job before it ends.
const workerIdle = 100 * time.Millisecond

// workers run one node's jobs on goroutines that outlive a fan-out, so that
// a Strategy in steady use starts none per node per call, and a worker's
// stack, grown by the client library's call path, serves the next call.
type workers struct{ jobs chan job } // unbuffered: a send finds an idle worker

// do runs j on an idle worker, or on a new one when none is idle: a job
// never waits for another.
func (w *workers) do(j job) {
	select {
	case w.jobs <- j:
	default:
		go w.work(j)
	}
}

// work runs j, then the jobs it is handed, until workerIdle passes without
// one.
func (w *workers) work(j job) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		j.f.run(j.ctx, j.i, j.n, j.op, j.then)
		j.done()
		j = job{} // drop the fan-out's references while idle
		idle.Reset(workerIdle)
		select {
		case j = <-w.jobs:
		case <-idle.C:
			return
		}
	}
}
