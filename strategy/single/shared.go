package single

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/drift"
	"github.com/locksmith-go/lock/strategy"
)

var (
	_ strategy.Sharer     = (*single)(nil)
	_ strategy.Notifier   = (*shared)(nil)
	_ strategy.Downgrader = writer{}
)

// Shared implements [strategy.Sharer]: semaphores (lock.WithPermits) and
// read-write locks (lock.WithRead, lock.WithWrite) on one server, or on a
// Cluster, where every key of a name is in its slot. See the repository's
// docs/semaphores.md. It refuses them over a conn marked
// driver.WithoutScripts (each step must reap expired holders and count
// the rest atomically, which only a script does) and with [WithReplicas]
// (not implemented for them), with an *strategy.ArgumentError. On a
// server that refuses scripts, their operations fail with an error that
// says so, which matches errors.ErrUnsupported.
func (s *single) Shared(sh strategy.Sharing) (strategy.SharedStrategy, error) {
	name := sh.Option()
	switch {
	case s.noScripts:
		return nil, &strategy.ArgumentError{Name: name, Reason: "semaphores and read-write locks need scripts (each step reaps " +
			"expired holders and counts the others atomically): not supported over a conn marked driver.WithoutScripts", Err: errors.ErrUnsupported}
	case s.ack.Replicas > 0:
		return nil, &strategy.ArgumentError{Name: name, Reason: "semaphores and read-write locks are not supported by single WithReplicas", Err: errors.ErrUnsupported}
	}
	if err := s.srv.NeedsScripts(nil, sharedLocks); err != nil {
		return nil, err
	}
	v := &shared{s: s, sh: sh, mode: cas.Mode(sh)}
	if sh.Write {
		return writer{v}, nil
	}
	return v, nil
}

// sharedLocks names what the operations of shared are, in the error of a
// server that refuses scripts.
const sharedLocks = "semaphores and read-write locks"

// shared is the Strategy of one shape of shared locks over a Strategy's
// connection.
type shared struct {
	s    *single
	sh   strategy.Sharing
	mode string // cas.Mode(sh)
}

// writer is the Strategy of a read-write lock's write side: shared, and a
// strategy.Downgrader.
type writer struct{ *shared }

func (v *shared) String() string { return "single" }

// Sharing implements [strategy.SharedStrategy].
func (v *shared) Sharing() strategy.Sharing { return v.sh }

// keys returns the keys of the shared lock on key, or why it has none.
func (v *shared) keys(key string) (cas.Shared, error) {
	k, ok := cas.NewShared(key, v.s.sharded)
	if !ok {
		return k, &strategy.ArgumentError{Name: "key", Reason: "a semaphore or read-write lock needs companion keys in the key's Cluster hash slot, " +
			"and a key with '}' but no hash tag has none that can be named: give it a hash tag, such as {orders}:42"}
	}
	return k, nil
}

func (v *shared) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	d, err := drift.Allowance(r.TTL, drift.DefaultFactor)
	if err != nil {
		return strategy.Grant{Undone: true}, err
	}
	k, err := v.keys(r.Key)
	if err != nil {
		return strategy.Grant{Undone: true}, err
	}
	sr := cas.SharedRequest{Sharing: v.sh, Value: r.Value(), TTL: r.TTL, Fencing: r.Fencing, FenceTTL: v.s.fenceLife(r.TTL)}
	if r.Waiter != "" && v.s.queues() {
		sr.Waiter, sr.Poll, sr.Patience = v.member(r.Waiter), r.Poll, r.Patience
	}
	fence, permit, e, err := k.Acquire(ctx, v.s.conn, sr)
	refused := v.s.srv.NeedsScripts(err, sharedLocks)
	// A mismatch, or a refusal of scripts, wrote nothing: no clean-up.
	return strategy.Grant{Fence: fence, Permit: permit, Drift: d, Position: e.Position, HolderTTL: e.HolderTTL,
		Undone: errors.Is(err, strategy.ErrMismatch) || refused != err}, refused
}

func (v *shared) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	d, err := drift.Allowance(ttl, drift.DefaultFactor)
	if err != nil {
		return strategy.Grant{}, err
	}
	k, err := v.keys(key)
	if err != nil {
		return strategy.Grant{}, err
	}
	return strategy.Grant{Drift: d}, v.s.srv.NeedsScripts(k.Refresh(ctx, v.s.conn, value, ttl), sharedLocks)
}

func (v *shared) Release(ctx context.Context, key, value string) error {
	k, err := v.keys(key)
	if err != nil {
		return err
	}
	return v.s.srv.NeedsScripts(k.Release(ctx, v.s.conn, value, false), sharedLocks)
}

func (v *shared) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	k, err := v.keys(key)
	if err != nil {
		return 0, err
	}
	ttl, err := k.TTL(ctx, v.s.conn, value)
	return ttl, v.s.srv.NeedsScripts(err, sharedLocks)
}

func (v *shared) Inspect(ctx context.Context, key string) (strategy.State, error) {
	return v.s.Inspect(ctx, key)
}

// member returns the id in the queue of the waiter id: the Strategy's
// channel name, a dot, the mode's letter, and id.
func (v *shared) member(id string) string { return v.s.wakeTo + "." + v.mode + id }

// Listen implements [strategy.Notifier], as the plain strategy's Listen does.
func (v *shared) Listen(key, id string) strategy.Listener { return v.s.listen(key, v.member(id)) }

// Leave implements [strategy.Notifier].
func (v *shared) Leave(ctx context.Context, key, id string) error {
	k, err := v.keys(key)
	if err != nil || !v.s.queues() {
		return nil
	}
	if err := k.Leave(ctx, v.s.conn, v.member(id)); !v.s.srv.Refuses(err) {
		return err
	}
	return nil
}

// Downgrade implements [strategy.Downgrader].
func (w writer) Downgrade(ctx context.Context, key, value string) error {
	k, err := w.keys(key)
	if err != nil {
		return err
	}
	return w.s.srv.NeedsScripts(k.Release(ctx, w.s.conn, value, true), sharedLocks)
}

// inspectShared reads the shared lock on key.
func (s *single) inspectShared(ctx context.Context, key string) (strategy.State, cas.SharedReading, error) {
	k, ok := cas.NewShared(key, s.sharded)
	if !ok {
		return strategy.State{}, cas.SharedReading{}, fmt.Errorf("the key holds a shared lock, which a key with '}' but no hash tag cannot")
	}
	r, err := k.Inspect(ctx, s.conn)
	if err != nil {
		return strategy.State{}, r, s.srv.NeedsScripts(err, sharedLocks)
	}
	if r.Type != "zset" && r.Type != "none" {
		return strategy.State{}, r, fmt.Errorf("WRONGTYPE the key holds a %s: neither a lock nor a semaphore or read-write lock", r.Type)
	}
	st := strategy.State{Held: len(r.Holders) > 0, Waiters: r.Queued, Fence: r.Fence, ReadWrite: r.Limit == "rw", Verdict: "free"}
	if !st.ReadWrite {
		st.Permits, _ = strconv.Atoi(r.Limit)
	}
	readers := 0
	for _, h := range r.Holders {
		token, metadata := strategy.SplitValue(h.Value)
		hd := strategy.Holder{Fingerprint: strategy.Fingerprint(token), Metadata: metadata, TTL: h.TTL, Permit: max(h.Permit, 0), Write: h.Write}
		st.Holders = append(st.Holders, hd)
		st.TTL = max(st.TTL, h.TTL)
		if h.Write {
			st.Fingerprint, st.Metadata = hd.Fingerprint, hd.Metadata
		} else {
			readers++
		}
	}
	switch {
	case !st.Held:
	case st.Permits > 0:
		st.Verdict = fmt.Sprintf("semaphore: %d of %d permits held", len(st.Holders), st.Permits)
	case st.Fingerprint != "":
		st.Verdict = "read-write: held by a writer"
	default:
		st.Verdict = fmt.Sprintf("read-write: held by %d readers", readers)
	}
	return st, r, nil
}
