package redlock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/strategy"
)

var _ strategy.Batcher = (*redlock)(nil)

// Batches implements [strategy.Batcher]: a Strategy batches the refreshes
// of its auto-refreshed locks, on nodes with scripts or without.
func (s *redlock) Batches() bool { return true }

// RefreshBatch implements [strategy.Batcher]: Refresh for every lock of the
// batch at once. Each node gets one script (cas.PExpireBatch) that extends
// every lock it holds, each with its own value and TTL, and answers per
// lock; over a node that is a Cluster client, one script per hash slot;
// one per cas.PerScript locks of a larger group; all in one round trip
// over a node's driver that pipelines (driver.Pipeliner). A node without
// scripts gets a transaction instead of each script, as single's does
// without scripts. All the nodes are sent theirs at once, bounded by
// the node timeout, as Refresh's are, and each lock's Grant and Err are
// what Refresh would return for it alone: nil with a quorum of nodes that
// extended it and validity left (its TTL, less the time since the batch
// was sent and the drift allowance); ErrExpired or ErrTaken when so many
// nodes found it gone or taken that no quorum can hold it; a *QuorumError,
// whose Nodes are that lock's answers, otherwise. A lock whose TTL Refresh
// would refuse (one the drift uses up, or not above the node timeout) gets
// that *strategy.ArgumentError and is not sent.
//
// Locks whose TTLs give them different node timeouts (the default one is
// derived from the TTL, see [WithNodeTimeout]) go in one script per node
// timeout, side by side, so that each lock's nodes are bounded by its own;
// a batch whose locks share a TTL, or with WithNodeTimeout, sends one.
//
// Each node's answer to the batch is reported once per node timeout (one
// fan-out), as one Refresh reports its own, with strategy.ReportNode on
// ctx: "ok" when the node answered, whatever it answered for each lock,
// or why it did not (timeout, refused, error); a lock's answers are in
// its *QuorumError. As Refresh, it writes nothing on the nodes that did
// not extend a lock.
func (s *redlock) RefreshBatch(ctx context.Context, batch []strategy.Refresh) {
	var gs []*batchGroup
	for i := range batch {
		timeout, allowance, err := s.timeouts(batch[i].TTL)
		if err != nil {
			batch[i].Grant, batch[i].Err = strategy.Grant{}, err
			continue
		}
		j := slices.IndexFunc(gs, func(g *batchGroup) bool { return g.timeout == timeout })
		if j < 0 {
			j = len(gs)
			gs = append(gs, &batchGroup{timeout: timeout})
		}
		g := gs[j]
		g.at, g.allowance = append(g.at, i), append(g.allowance, allowance)
	}
	if len(gs) == 1 {
		s.refreshGroup(ctx, batch, gs[0])
		return
	}
	var wg sync.WaitGroup
	for _, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.refreshGroup(ctx, batch, g)
		}()
	}
	wg.Wait()
}

// batchGroup is the locks of a batch that share a node timeout: their
// indexes in the batch, and each one's drift allowance.
type batchGroup struct {
	timeout   time.Duration
	at        []int
	allowance []time.Duration
}

// refreshGroup extends the locks of g on every node, one fan-out with g's
// node timeout, and sets their Grant and Err.
func (s *redlock) refreshGroup(ctx context.Context, batch []strategy.Refresh, g *batchGroup) {
	keys, values := make([]string, len(g.at)), make([]string, len(g.at))
	ttls := make([]time.Duration, len(g.at))
	for j, i := range g.at {
		keys[j], values[j], ttls[j] = batch[i].Key, batch[i].Value, batch[i].TTL
	}
	// replies[i] is node i's answer for each lock, written by its op
	// before it returns: read only for the nodes whose answer fanOut
	// received (see eachAnswered), never for one it gave up on, whose op
	// may still be running.
	replies := make([][]error, len(s.nodes))
	// The keys' groups for one script each, split once for every node: all
	// the keys, or one group per hash slot on a node that is a Cluster
	// client.
	whole, slots := cas.Groups(keys, false), [][]int(nil)
	if s.sharded() {
		slots = cas.Groups(keys, true)
	}
	start := s.now()
	res, _, _ := s.fanOut(ctx, g.timeout, func(ctx context.Context, i int, n node) error {
		gs := whole
		if n.wake == notify.SPublish {
			gs = slots
		}
		errs, err := extendEach(ctx, n, cas.PExpireBatch(keys, values, ttls, gs))
		replies[i] = errs
		return err
	}, after{}, nil)
	defer report(ctx, res)

	nodes := make([]NodeError, len(g.at)*len(res))
	for j, i := range g.at {
		lockRes := make([]*NodeError, len(res))
		for k, r := range res {
			ne := &nodes[j*len(res)+k]
			if eachAnswered(r) {
				err := replies[k][j]
				*ne = NodeError{Node: r.Node, Outcome: outcome(err)}
				if answered(ne.Outcome) {
					ne.answer = err
				} else {
					ne.Err = err
				}
			} else {
				*ne = *r
			}
			lockRes[k] = ne
		}
		batch[i].Grant, batch[i].Err = s.extended(lockRes, start, batch[i].TTL, g.allowance[j])
		s.dropLost(ctx, holding{key: batch[i].Key, value: batch[i].Value}, lockRes, g.timeout, batch[i].Err)
	}
}

// eachAnswered reports whether r, a node's result in refreshGroup's
// fan-out, is the node's own answer, with one error per lock: its op
// returned nil, or a *partialError.
func eachAnswered(r *NodeError) bool {
	if r.Outcome == OK {
		return true
	}
	_, ok := r.Err.(*partialError)
	return ok
}

// partialError is the error of a node, a Cluster client, that answered for
// the locks of some hash slots and not for those of others: err is the
// first unanswered slot's.
type partialError struct{ err error }

func (e *partialError) Error() string { return "some hash slots did not answer: " + e.err.Error() }
func (e *partialError) Unwrap() error { return e.err }

// extendEach runs b, the locks' extension (cas.PExpireBatch), on n, and
// returns each lock's error, or nil and the call's error when the node did
// not answer. A hash slot that did not answer, on a node that is a Cluster
// client, gives each of its locks the call's error, and the node's error
// is then a *partialError.
func extendEach(ctx context.Context, n node, b cas.Batch) ([]error, error) {
	errs, answered := n.srv.Batch(ctx, b, cas.Ack{})
	first := slices.Index(answered, false)
	switch {
	case first < 0:
		return errs, nil
	case !slices.Contains(answered, true):
		return nil, errs[first]
	}
	return errs, &partialError{errs[first]}
}
