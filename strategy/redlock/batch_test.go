package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// batchOf obtains n locks of key prefix+i for ttl through a Locker over s,
// waits until every one of servers holds each (an Obtain returns at the
// quorum), and returns a batch that refreshes each to next, with the value
// it is held under, as a node stores it.
func batchOf(t *testing.T, s *redlock.Strategy, servers []*redistest.Server, prefix string, n int, ttl, next time.Duration) []strategy.Refresh {
	t.Helper()
	l := lock.New(s)
	batch := make([]strategy.Refresh, n)
	for i := range batch {
		lk, err := l.Obtain(context.Background(), prefix+":"+strconv.Itoa(i), ttl)
		if err != nil {
			t.Fatalf("Obtain: %v", err)
		}
		if wrong := heldEverywhere(t, servers, []string{lk.Key()}, lk.Token()); len(wrong) > 0 {
			t.Fatalf("after Obtain: %q, want the token on every node", wrong)
		}
		batch[i] = strategy.Refresh{Key: lk.Key(), Value: command(t, servers[0], "GET", lk.Key()), TTL: next}
	}
	return batch
}

// pttl returns key's remaining TTL on srv, or -1 when it has none.
func pttl(t *testing.T, srv *redistest.Server, key string) time.Duration {
	t.Helper()
	ms, err := strconv.ParseInt(command(t, srv, "PTTL", key), 10, 64)
	if err != nil {
		t.Fatalf("PTTL %q on %s: %v", key, srv.Addr, err)
	}
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// extendedTo checks that every node of servers holds key with a TTL above
// want less a generous second.
func extendedTo(t *testing.T, servers []*redistest.Server, key string, want time.Duration) {
	t.Helper()
	for _, srv := range servers {
		if got := pttl(t, srv, key); got <= want-time.Second || got > want {
			t.Errorf("PTTL %q on %s = %v, want near %v", key, srv.Addr, got, want)
		}
	}
}

func newStrategy(t *testing.T, servers []*redistest.Server, opts ...redlock.Option) *redlock.Strategy {
	t.Helper()
	s, err := redlock.NewStrategy(connect(t, servers, redistest.Drivers()...), opts...)
	if err != nil {
		t.Fatalf("NewStrategy: %v", err)
	}
	return s
}

func TestRefreshBatch(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	s := newStrategy(t, servers)

	t.Run("batches with scripts on every node", func(t *testing.T) {
		if !s.Batches() {
			t.Errorf("Batches() = false, want true")
		}
	})

	t.Run("a node without scripts extends the batch by a transaction", func(t *testing.T) {
		d := driverNamed("goredis-resp3")
		s, err := redlock.NewStrategy(matrix.Marked(connect(t, servers, d), 1))
		if err != nil {
			t.Fatal(err)
		}
		if !s.Batches() {
			t.Errorf("Batches() with node 1 without scripts = false, want true")
		}
		batch := batchOf(t, s, servers, conformance.Key(t), 4, 10*time.Second, time.Minute)
		plant(t, servers[1:], batch[2].Key, "another owner")
		s.RefreshBatch(ctx, batch)
		if err := batch[2].Err; !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Err of the lock taken on nodes 1 and 2 = %v, want ErrTaken", err)
		}
		if got := command(t, servers[1], "GET", batch[2].Key); got != "another owner" {
			t.Errorf("GET of the taken key on the node without scripts = %q, want %q: untouched", got, "another owner")
		}
		for _, i := range []int{0, 1, 3} {
			if batch[i].Err != nil {
				t.Errorf("Err of lock %d = %v, want nil", i, batch[i].Err)
			}
			extendedTo(t, servers, batch[i].Key, time.Minute)
		}
	})

	t.Run("every lock held on every node is extended", func(t *testing.T) {
		batch := batchOf(t, s, servers, conformance.Key(t), 10, 10*time.Second, time.Minute)
		s.RefreshBatch(ctx, batch)
		for _, r := range batch {
			if r.Err != nil {
				t.Errorf("Err of %q = %v, want nil", r.Key, r.Err)
			}
			if want := time.Minute/100 + 2*time.Millisecond; r.Grant.Drift != want {
				t.Errorf("Grant.Drift of %q = %v, want %v", r.Key, r.Grant.Drift, want)
			}
			extendedTo(t, servers, r.Key, time.Minute)
		}
	})

	t.Run("locks of different node timeouts are each extended", func(t *testing.T) {
		batch := batchOf(t, s, servers, conformance.Key(t), 4, 10*time.Second, 0)
		for i := range batch {
			batch[i].TTL = []time.Duration{2 * time.Second, time.Minute}[i%2] // node timeouts 500ms and 1s
		}
		s.RefreshBatch(ctx, batch)
		for _, r := range batch {
			if r.Err != nil {
				t.Errorf("Err of %q (TTL %v) = %v, want nil", r.Key, r.TTL, r.Err)
			}
			extendedTo(t, servers, r.Key, r.TTL)
		}
	})

	t.Run("a TTL that Refresh refuses is that lock's ArgumentError, and not sent", func(t *testing.T) {
		batch := batchOf(t, s, servers, conformance.Key(t), 3, 10*time.Second, time.Minute)
		batch[1].TTL = 2 * time.Millisecond // the drift uses it up
		s.RefreshBatch(ctx, batch)
		_, want := s.Refresh(ctx, batch[1].Key, batch[1].Value, batch[1].TTL)
		var ae *strategy.ArgumentError
		if !errors.As(batch[1].Err, &ae) || batch[1].Err.Error() != want.Error() {
			t.Errorf("Err of the lock with a 2ms TTL = %v, want Refresh's %v", batch[1].Err, want)
		}
		if got := pttl(t, servers[0], batch[1].Key); got > 10*time.Second {
			t.Errorf("PTTL of the refused lock = %v, want at most its 10s: not sent", got)
		}
		for _, i := range []int{0, 2} {
			if batch[i].Err != nil {
				t.Errorf("Err of lock %d = %v, want nil", i, batch[i].Err)
			}
			extendedTo(t, servers, batch[i].Key, time.Minute)
		}
	})

	t.Run("a lock taken on a quorum of nodes is taken, deleted where it was extended, the others extended", func(t *testing.T) {
		batch := batchOf(t, s, servers, conformance.Key(t), 5, 10*time.Second, time.Minute)
		plant(t, servers[1:], batch[2].Key, "another owner")
		s.RefreshBatch(ctx, batch)
		if err := batch[2].Err; !errors.Is(err, lock.ErrTaken) || !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Err of the taken lock = %v, want ErrTaken, matching ErrNotHeld", err)
		}
		for i, r := range batch {
			if i == 2 {
				continue
			}
			if r.Err != nil {
				t.Errorf("Err of lock %d = %v, want nil", i, r.Err)
			}
			extendedTo(t, servers, r.Key, time.Minute)
		}
		if got := command(t, servers[1], "GET", batch[2].Key); got != "another owner" {
			t.Errorf("GET of the taken key = %q, want %q: untouched", got, "another owner")
		}
		eventuallyNone(t, servers[:1], batch[2].Key)
	})

	t.Run("a lock gone from a quorum of nodes has expired", func(t *testing.T) {
		batch := batchOf(t, s, servers, conformance.Key(t), 3, 10*time.Second, time.Minute)
		for _, srv := range servers[:2] {
			command(t, srv, "DEL", batch[0].Key)
		}
		s.RefreshBatch(ctx, batch)
		if err := batch[0].Err; !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Err of the deleted lock = %v, want ErrExpired", err)
		}
		for _, r := range batch[1:] {
			if r.Err != nil {
				t.Errorf("Err of %q = %v, want nil", r.Key, r.Err)
			}
		}
	})

	t.Run("a lock taken on a minority of nodes is still held", func(t *testing.T) {
		batch := batchOf(t, s, servers, conformance.Key(t), 3, 10*time.Second, time.Minute)
		plant(t, servers[2:], batch[1].Key, "another owner")
		s.RefreshBatch(ctx, batch)
		for _, r := range batch {
			if r.Err != nil {
				t.Errorf("Err of %q = %v, want nil", r.Key, r.Err)
			}
		}
		extendedTo(t, servers[:2], batch[1].Key, time.Minute)
	})
}

func TestRefreshBatchNodesDown(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	s := newStrategy(t, servers)
	batch := batchOf(t, s, servers, conformance.Key(t), 5, 10*time.Second, time.Minute)

	t.Run("a node down: every lock extended on the quorum", func(t *testing.T) {
		servers[0].Kill()
		s.RefreshBatch(ctx, batch)
		for _, r := range batch {
			if r.Err != nil {
				t.Errorf("Err of %q with 1 of 3 nodes down = %v, want nil", r.Key, r.Err)
			}
			extendedTo(t, servers[1:], r.Key, time.Minute)
		}
	})

	t.Run("a quorum of nodes down: each lock fails as Refresh does", func(t *testing.T) {
		servers[1].Kill()
		s.RefreshBatch(ctx, batch)
		_, want := s.Refresh(ctx, batch[0].Key, batch[0].Value, batch[0].TTL)
		var wqe *redlock.QuorumError
		if !errors.As(want, &wqe) {
			t.Fatalf("Refresh with 2 of 3 nodes down = %v, want a *QuorumError", want)
		}
		for _, r := range batch {
			var qe *redlock.QuorumError
			if !errors.As(r.Err, &qe) || qe.Op != wqe.Op || qe.Quorum != wqe.Quorum {
				t.Errorf("Err of %q with 2 of 3 nodes down = %v, want a *QuorumError as Refresh's %v", r.Key, r.Err, want)
				continue
			}
			if errors.Is(r.Err, lock.ErrNotHeld) {
				t.Errorf("errors.Is(Err, ErrNotHeld) = true, want false: the nodes did not answer")
			}
			if got, want := outcomes(qe), outcomes(wqe); got != want {
				t.Errorf("node outcomes of %q = %s, want Refresh's %s", r.Key, got, want)
			}
		}
	})
}

// outcomes returns the nodes' outcomes of e, in order.
func outcomes(e *redlock.QuorumError) string {
	var o []redlock.Outcome
	for _, n := range e.Nodes {
		o = append(o, n.Outcome)
	}
	return fmt.Sprint(o)
}

// TestBatchedAutoRefresh: the auto-refreshed locks of a Redlock Locker are
// refreshed in batches, and stay held for several TTLs.
func TestBatchedAutoRefresh(t *testing.T) {
	const n, ttl = 50, 600 * time.Millisecond
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	l := newLocker(t, connect(t, servers, redistest.Drivers()...))
	var batches, carried atomic.Int64
	hooks := &lock.Hooks{Batch: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
		batches.Add(1)
		carried.Add(int64(e.Keys))
		return next(ctx)
	}}
	prefix := conformance.Key(t)
	locks := make([]*lock.Lock, n)
	keys := make([]string, n)
	for i := range locks {
		lk, err := l.Obtain(ctx, prefix+":"+strconv.Itoa(i), ttl, lock.WithHooks(hooks))
		if err != nil {
			t.Fatalf("Obtain %d: %v", i, err)
		}
		locks[i], keys[i] = lk, lk.Key()
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatalf("StartRefresh %d: %v", i, err)
		}
	}
	time.Sleep(3 * ttl)
	for i, lk := range locks {
		if err := lk.Err(); err != nil {
			t.Errorf("lock %d after %v: Err() = %v, want nil", i, 3*ttl, err)
		}
	}
	if b, c := batches.Load(), carried.Load(); b == 0 || c <= b {
		t.Errorf("batches = %d carrying %d locks, want some, carrying more than one lock each on average", b, c)
	}
	t.Logf("%d batches carried %d refreshes", batches.Load(), carried.Load())
	for i, lk := range locks {
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release %d = %v, want nil", i, err)
		}
	}
	if got := remaining(servers, keys); len(got) != 0 {
		t.Errorf("keys left after Release = %q, want none", got)
	}
}

// TestRefreshBatchOverACluster: a node that is a Cluster client gets one
// script per hash slot, and each lock the answer of its own slot.
func TestRefreshBatchOverACluster(t *testing.T) {
	ctx := context.Background()
	cluster := redistest.StartCluster(t, 3)
	servers := redistest.Start(t, 2)
	conns := append([]driver.Conn{goredis.New(redistest.GoRedisCluster(t, cluster.Addrs()))},
		connect(t, servers, redistest.Drivers()...)...)
	s, err := redlock.NewStrategy(conns)
	if err != nil {
		t.Fatal(err)
	}
	owner := func(key string) *redistest.Server { return cluster.Owner(t, cluster.KeySlot(t, key)) }
	l := lock.New(s)
	prefix := conformance.Key(t)
	batch := make([]strategy.Refresh, 20)
	for i := range batch {
		lk, err := l.Obtain(ctx, prefix+":"+strconv.Itoa(i), 10*time.Second)
		if err != nil {
			t.Fatalf("Obtain: %v", err)
		}
		nodes := append([]*redistest.Server{owner(lk.Key())}, servers...)
		if wrong := heldEverywhere(t, nodes, []string{lk.Key()}, lk.Token()); len(wrong) > 0 {
			t.Fatalf("after Obtain: %q, want the token on every node", wrong)
		}
		batch[i] = strategy.Refresh{Key: lk.Key(), Value: command(t, servers[0], "GET", lk.Key()), TTL: time.Minute}
	}
	const taken = 7
	plant(t, []*redistest.Server{owner(batch[taken].Key), servers[0]}, batch[taken].Key, "another owner")
	s.RefreshBatch(ctx, batch)
	for i, r := range batch {
		if i == taken {
			if !errors.Is(r.Err, lock.ErrTaken) {
				t.Errorf("Err of the lock taken on the cluster and a node = %v, want ErrTaken", r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("Err of %q = %v, want nil", r.Key, r.Err)
		}
		extendedTo(t, append([]*redistest.Server{owner(r.Key)}, servers...), r.Key, time.Minute)
	}
}
