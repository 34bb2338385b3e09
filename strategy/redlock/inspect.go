package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/internal/scan"
	"github.com/locksmith-go/lock/strategy"
)

// Inspect implements [strategy.Strategy]. It reads the key, and its TTL, on
// every node at once, each bounded by the node timeout (500ms unless
// [WithNodeTimeout] sets it), and reports each node's answer through
// strategy.ReportNode, as the other operations do. State.Nodes gives every
// node's answer, in the order given to New.
//
// The lock is held when a quorum of nodes hold values with one
// fingerprint; Fingerprint and Metadata are then the holder's, and TTL the
// time until fewer than a quorum of nodes will hold it, as Locker's TTL
// computes it. The Verdict says "held on 3 of 5 nodes (quorum 3)", "free"
// (no node holds a value), or "no quorum: held on 1 of 5 nodes" (an
// acquisition or a clean-up under way, or a lock expiring node by node).
// When too few nodes answered to tell, it returns the State, with Nodes,
// and a [*QuorumError] whose Op is "inspect".
func (s *redlock) Inspect(ctx context.Context, key string) (strategy.State, error) {
	st, _, err := s.inspect(ctx, key)
	return st, err
}

// Break implements [strategy.Breaker]. It reads the lock on every node as
// Inspect does, then deletes, on each node whose value has the fingerprint
// (any value when fingerprint is ""), that value, with the compare-and-
// delete of Release, which publishes the release. When a node did not
// answer, the reading or the delete, it returns a [*QuorumError] whose Op
// is "break", after it broke the lock on the nodes that did: the node that
// did not may hold its copy until it expires. Otherwise it returns
// ErrExpired when no node held a value, and ErrTaken when the nodes held
// only another holder's.
func (s *redlock) Break(ctx context.Context, key, fingerprint string) (strategy.State, error) {
	st, readings, err := s.inspect(ctx, key)
	if readings == nil {
		return st, err
	}
	del := func(ctx context.Context, i int, n node) error {
		switch ns := st.Nodes[i]; {
		case ns.Err != nil:
			return ns.Err
		case !ns.Held:
			return strategy.ErrExpired
		case fingerprint != "" && ns.Fingerprint != fingerprint:
			return strategy.ErrTaken
		}
		if err := notify.DeleteWaking(ctx, n.srv, n.raw, key, readings[i].Value); err != nil {
			return err
		}
		cas.MarkBroken(ctx, n.raw, key, readings[i].Value, readings[i].TTL)
		return nil
	}
	res, _, _ := s.fanOut(ctx, s.opTimeout(), del, after{}, nil)
	defer report(ctx, res)
	switch t := tallyOf(res); {
	case t.failed+t.pending > 0:
		return st, &QuorumError{Op: "break", Quorum: s.quorum, Nodes: res}
	case t.ok > 0:
		return st, nil
	case t.taken > 0:
		return st, strategy.ErrTaken
	}
	return st, strategy.ErrExpired
}

// inspect reads the lock on every node, and returns its State and each
// node's reading; nil readings when no node could be reached.
func (s *redlock) inspect(ctx context.Context, key string) (strategy.State, []cas.Reading, error) {
	timeout := s.opTimeout()
	if err := s.contact(ctx, timeout); err != nil {
		return strategy.State{}, nil, err
	}
	readings := make([]cas.Reading, len(s.nodes))
	res, _, _ := s.fanOut(ctx, timeout, func(ctx context.Context, i int, n node) (err error) {
		readings[i], err = n.srv.Inspect(ctx, key, "", cas.Queue{})
		return err
	}, after{}, nil)
	defer report(ctx, res)

	st := strategy.State{Nodes: make([]strategy.NodeState, len(res))}
	holders := map[string][]int{} // the nodes holding each fingerprint
	unanswered := 0
	var top []int // the nodes of the most widely held fingerprint
	for i, r := range res {
		ns := strategy.NodeState{Node: r.Node, Err: r.Err}
		switch {
		case !answered(r.Outcome):
			unanswered++
		case readings[i].Exists:
			ns.Held, ns.TTL = true, readings[i].TTL
			ns.Fingerprint, ns.Metadata = readings[i].Holder()
			holders[ns.Fingerprint] = append(holders[ns.Fingerprint], i)
			if h := holders[ns.Fingerprint]; len(h) > len(top) {
				top = h
			}
		}
		st.Nodes[i] = ns
	}
	n, held := len(res), len(top)
	switch {
	case held >= s.quorum:
		first := st.Nodes[top[0]]
		st.Held, st.Fingerprint, st.Metadata = true, first.Fingerprint, first.Metadata
		ttls := make([]time.Duration, held)
		for j, i := range top {
			ttls[j] = st.Nodes[i].TTL
		}
		st.TTL = s.quorumTTL(ttls)
		st.Verdict = fmt.Sprintf("held on %d of %d nodes (quorum %d)", held, n, s.quorum)
	case held+unanswered >= s.quorum:
		st.Verdict = fmt.Sprintf("unknown: held on %d of %d nodes, and %d did not answer (quorum %d)", held, n, unanswered, s.quorum)
		return st, readings, &QuorumError{Op: "inspect", Quorum: s.quorum, Nodes: res}
	case held == 0:
		st.Verdict = "free"
	default:
		st.Verdict = fmt.Sprintf("no quorum: held on %d of %d nodes", held, n)
	}
	return st, readings, nil
}

// quorumTTL returns, of the TTLs of the nodes that hold a lock (at least a
// quorum of them), the time until fewer than a quorum will: the quorum-th
// longest. A negative TTL (no expiry) outlasts every other; the result is
// negative if a quorum have none. TTL and Inspect use it.
func (s *redlock) quorumTTL(ttls []time.Duration) time.Duration {
	ttls = slices.Clone(ttls)
	for i, ttl := range ttls {
		if ttl < 0 {
			ttls[i] = math.MaxInt64
		}
	}
	slices.Sort(ttls)
	if ttl := ttls[len(ttls)-s.quorum]; ttl != math.MaxInt64 {
		return ttl
	}
	return -1
}

var _ strategy.Lister = (*redlock)(nil)

// List implements [strategy.Lister]: it SCANs the nodes in turn until N −
// quorum + 1 of them answered the whole scan, since a key that a quorum
// holds is on one of any N − quorum + 1 nodes, so that a node down is
// passed over. It returns the nodes' errors when fewer answered. It skips
// the restart guard's record (locksmith:redlock:up-since). A node that does
// not answer holds the scan until ctx ends.
func (s *redlock) List(ctx context.Context, prefix string, count int, yield func(key string) bool) error {
	need := len(s.nodes) - s.quorum + 1
	var errs []error
	for _, n := range s.nodes {
		more := true
		err := scan.Prefix(ctx, n.raw, prefix, count, func(key string) bool {
			more = key == guardKey || yield(key)
			return more
		})
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", n.name, err))
		case !more:
			return nil
		default:
			need--
		}
		if need == 0 || ctx.Err() != nil {
			break
		}
	}
	if need > 0 {
		return errors.Join(append(errs, ctx.Err())...)
	}
	return nil
}
