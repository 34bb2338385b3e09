package single

import (
	"context"
	"errors"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/scan"
	"github.com/locksmith-go/lock/strategy"
)

// Inspect implements [strategy.Strategy]. It reads, in one script, the
// key's value, its TTL, the fencing counter at [FenceKey] (none for a key
// that FenceKey refuses, or that the user's ACL does not allow: a user that
// never fences need not be allowed the counters) and the length of the
// wait queue, and sets Held, TTL, Fingerprint, Metadata, Fence, Waiters and
// Verdict ("free" or "held"). A key of another type gives the server's
// WRONGTYPE error.
//
// A key that holds a semaphore or a read-write lock (lock.WithPermits, lock.WithRead, lock.WithWrite)
// is read as one, in a second script: Permits or ReadWrite, Holders (with
// their fingerprints, metadata, leases and permits), Waiters, the write
// side's Fence, and a Verdict such as "semaphore: 2 of 3 permits held".
func (s *single) Inspect(ctx context.Context, key string) (strategy.State, error) {
	st, _, err := s.inspect(ctx, key)
	if s.isShared(err) {
		st, _, err = s.inspectShared(ctx, key)
	}
	return st, err
}

// isShared reports whether err, the error of a plain lock's read, says the
// key is of another type, which may be a shared lock: a server that runs
// scripts can then read it as one.
func (s *single) isShared(err error) bool {
	return err != nil && s.srv.Scripts() && isWrongType(err)
}

// Break implements [strategy.Breaker]: it reads the lock as Inspect does,
// and releases the value it read as Release does, waking the head of the
// queue.
//
// Of a semaphore or a read-write lock, it ends the lease of the holder whose
// fingerprint is fingerprint, or of every holder when fingerprint is "",
// as their Release would, waking the head of the queue.
func (s *single) Break(ctx context.Context, key, fingerprint string) (strategy.State, error) {
	read := func(ctx context.Context) (strategy.State, cas.Reading, error) { return s.inspect(ctx, key) }
	st, err := cas.Break(ctx, s.conn, key, fingerprint, read, func(ctx context.Context, value string) error {
		return s.Release(ctx, key, value)
	})
	if s.isShared(err) {
		return s.breakShared(ctx, key, fingerprint)
	}
	return st, err
}

// breakShared is Break of a shared lock.
func (s *single) breakShared(ctx context.Context, key, fingerprint string) (strategy.State, error) {
	st, r, err := s.inspectShared(ctx, key)
	if err != nil {
		return st, err
	}
	if !st.Held {
		return st, strategy.ErrExpired
	}
	k, _ := cas.NewShared(key, s.sharded) // inspectShared named them
	var errs []error
	broke := false
	for i, h := range r.Holders {
		if fingerprint == "" || st.Holders[i].Fingerprint == fingerprint {
			broke = true
			switch err := k.Release(ctx, s.conn, h.Value, false); {
			case err == nil:
				cas.MarkBroken(ctx, s.conn, key, h.Value, h.TTL)
			case !errors.Is(err, strategy.ErrExpired):
				errs = append(errs, s.srv.NeedsScripts(err, sharedLocks))
			}
		}
	}
	if !broke {
		return st, strategy.ErrTaken
	}
	return st, errors.Join(errs...)
}

func (s *single) inspect(ctx context.Context, key string) (strategy.State, cas.Reading, error) {
	fenceKey, _ := FenceKey(key) // "" when refused: no counter can exist
	q, _ := s.queue(key)         // the zero Queue when the key has none
	r, err := s.srv.Inspect(ctx, key, fenceKey, q)
	if err != nil {
		return strategy.State{}, r, err
	}
	st := strategy.State{Held: r.Exists, TTL: r.TTL, Fence: r.Fence, Waiters: r.Queued, Waited: r.Waited, Verdict: "free"}
	if r.Exists {
		st.Fingerprint, st.Metadata = r.Holder()
		st.Verdict = "held"
	}
	return st, r, nil
}

var _ strategy.Lister = (*single)(nil)

// List implements [strategy.Lister]: it SCANs the server, or every master
// of a Cluster in turn, and skips the companion keys of the locks (their
// queues, fencing counters and shared locks' state, named {key}:q,
// {key}:w, {key}:fence, {key}:fences and {key}:shared, or key:q and so on
// for a key with a hash tag): a lock of a key named so is not listed.
func (s *single) List(ctx context.Context, prefix string, count int, yield func(key string) bool) error {
	return scan.Prefix(ctx, s.conn, prefix, count, func(key string) bool {
		return cas.IsCompanion(key) || yield(key)
	})
}
