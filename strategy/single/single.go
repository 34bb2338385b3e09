// Package single implements the single-instance lock: one key on one Redis
// deployment, a server, a Sentinel group or a Cluster. It is the default
// strategy, the simplest, and the one with fencing tokens ([FenceKey]), a
// queue of waiters, semaphores and read-write locks.
//
//	locker, err := single.New(goredis.New(client))
//	...
//	lk, err := locker.Obtain(ctx, "report:daily", 30*time.Second, lock.WithFencing())
//
// It is safe as long as the deployment does not lose writes: one server, or
// a Cluster (each key lives on one master). A failover to a replica that had
// not received the key can let a second client in: [WithReplicas] narrows
// that window; use the redlock strategy when it is not enough. Over a conn
// marked driver.WithoutScripts, or a server found to refuse scripts, it
// sends conditional commands and transactions, over a driver that pins a
// connection (New refuses another); its waiters then poll, and semaphores
// and read-write locks are refused.
//
// The repository's docs/strategies.md, sections "single: one server, or one
// deployment" and "single without scripts", says what it sends and refuses;
// docs/waiting.md how its waiters queue; docs/multi-key.md what ObtainMany
// guarantees; and docs/safety.md its fencing tokens and replica
// acknowledgement.
package single

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/drift"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/strategy"
)

// single is the single-instance [strategy.Strategy] over one [driver.Conn].
type single struct {
	conn    driver.Conn
	notify  bool    // conn can subscribe, and scripts run: waiters queue and are woken
	sharded bool    // conn's channels are shard channels: conn is a Cluster client, and a lock of several keys takes them slot by slot
	wakeTo  string  // random: names this Strategy's wake-up channel, and prefixes its waiters' ids
	ack     cas.Ack // WithReplicas; Replicas == 0: no WAIT

	fenceTTL    time.Duration // WithFenceTTL's lifetime of a fencing counter; 0: none
	fenceTTLSet bool          // WithFenceTTL was given; otherwise a counter lives defaultFenceTTL × the TTL

	noScripts bool       // conn is marked driver.WithoutScripts
	srv       cas.Server // conn's operations, with scripts or (noScripts) without
}

// ReplicaError is the error of an acquisition or refresh that fewer
// replicas than [WithReplicas] asks for acknowledged. Match it with
// errors.As.
type ReplicaError = strategy.ReplicaError

// Option configures a Strategy.
type Option func(*single)

// WithReplicas makes an acquisition, and every refresh, count only once n
// replicas acknowledge it: after the write, the Strategy sends WAIT n
// timeout on the same connection, its timeout cut to what is left of the
// call's context, never past it. 0 replicas (the default) sends no WAIT;
// n > 0 needs a positive timeout and a driver that can pin a connection
// ([driver.Pinner]), or New refuses with an *strategy.ArgumentError.
//
// An acquisition that fewer replicas acknowledge is undone (the key it
// wrote is deleted) and fails at once with a [*ReplicaError], which does
// not match lock.ErrNotObtained. A refresh that fewer acknowledge fails
// with a *ReplicaError, and the lock keeps the validity of its last
// confirmed refresh. It costs one more round trip per acquisition and
// refresh, and up to timeout when replicas lag. It is not consensus: the
// repository's docs/safety.md, section "Replica acknowledgement", says
// which failovers it covers and which it does not.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(s *single) { s.ack = cas.Ack{Replicas: n, Timeout: timeout} }
}

// defaultFenceTTL is how many times the TTL of the acquisition that
// increments it a fencing counter lives, without WithFenceTTL.
const defaultFenceTTL = 100

// WithFenceTTL sets how long the fencing counter of a key ([FenceKey]) lives
// after the last acquisition with lock.WithFencing, which resets it: d > 0
// for d, 0 for ever (the counter never expires, one small key per name
// ever fenced). Without it, a counter lives 100 × the TTL of that
// acquisition. New refuses a negative d with an *strategy.ArgumentError.
//
// A counter may expire safely: a missing one restarts from the server's
// clock in microseconds, past every token it issued, as long as the clock
// does not step back and the name is not fenced more than once per
// microsecond on average. The repository's docs/safety.md, section "How
// long a counter lives", says why.
func WithFenceTTL(d time.Duration) Option {
	return func(s *single) { s.fenceTTL, s.fenceTTLSet = d, true }
}

// fenceLife returns how long a fencing counter lives after an acquisition
// for ttl: WithFenceTTL's, or defaultFenceTTL × ttl, at most the longest
// Duration.
func (s *single) fenceLife(ttl time.Duration) time.Duration {
	switch {
	case s.fenceTTLSet:
		return s.fenceTTL
	case ttl > math.MaxInt64/defaultFenceTTL:
		return math.MaxInt64
	}
	return defaultFenceTTL * ttl
}

var (
	_ strategy.Strategy  = (*single)(nil)
	_ strategy.Notifier  = (*single)(nil)
	_ strategy.Relabeler = (*single)(nil)
	_ strategy.Fencer    = (*single)(nil)
)

// newStrategy returns the strategy over conn, which New gives lock.New.
func newStrategy(conn driver.Conn, opts ...Option) (*single, error) {
	if err := cas.CheckConn("conn", conn); err != nil {
		return nil, err
	}
	s := &single{conn: conn}
	for _, opt := range opts {
		if opt == nil {
			return nil, &strategy.ArgumentError{Name: "option", Reason: "must not be nil"}
		}
		opt(s)
	}
	if s.fenceTTL < 0 {
		return nil, &strategy.ArgumentError{Name: "fence ttl", Reason: fmt.Sprintf("must not be negative, got %v", s.fenceTTL)}
	}
	switch n, t := s.ack.Replicas, s.ack.Timeout; {
	case n < 0:
		return nil, &strategy.ArgumentError{Name: "replicas", Reason: fmt.Sprintf("must not be negative, got %d", n)}
	case n > 0 && t <= 0:
		return nil, &strategy.ArgumentError{Name: "replica timeout", Reason: fmt.Sprintf("must be positive, got %v", t)}
	case n > 0:
		if err := driver.Pinnable(conn); err != nil {
			return nil, &strategy.ArgumentError{Name: "replicas", Reason: fmt.Sprintf(
				"WithReplicas sends WAIT over the connection of each write, which %T cannot: %v", conn, err)}
		}
	}
	s.noScripts = driver.ScriptsOff(conn)
	if sub, ok := conn.(driver.Subscriber); ok {
		s.sharded = sub.Sharded()
		if !s.noScripts { // the queue of waiters lives in scripts
			s.notify, s.wakeTo = true, rand.Text()
		}
	}
	if !s.noScripts {
		s.srv = cas.Detecting(conn)
		return s, nil
	}
	var err error
	s.srv, err = cas.NewServer("conn", conn, true)
	return s, err
}

// New returns a [lock.Locker] that locks keys on conn.
func New(conn driver.Conn, opts ...Option) (*lock.Locker, error) {
	s, err := newStrategy(conn, opts...)
	if err != nil {
		return nil, err
	}
	return lock.New(s), nil
}

// String returns the strategy's name, "single".
func (s *single) String() string { return "single" }

// Addr returns the server's address, where the driver knows it.
func (s *single) Addr() string { return driver.Addr(s.conn) }

// Acquire implements [strategy.Strategy]. It refuses a TTL that the drift
// allowance uses up with an [*strategy.ArgumentError]. A key (or fencing
// counter) of another type gives the server's WRONGTYPE error; a key that
// holds a semaphore or a read-write lock (lock.WithPermits, lock.WithRead, lock.WithWrite), an error
// matching strategy.ErrMismatch that says which, having written nothing.
func (s *single) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	g, err := s.acquireOne(ctx, r)
	if err == nil || !s.srv.Scripts() || !isWrongType(err) {
		return g, err
	}
	if sh, ok := cas.NewShared(r.Key, s.sharded); ok {
		if rd, ierr := sh.Inspect(ctx, s.conn); ierr == nil && rd.Type == "zset" && rd.Limit != "" {
			// The attempt failed at the key's GET, before any write. (A
			// counter of another type fails it after the key's SET.)
			return strategy.Grant{Undone: true}, cas.Mismatch(rd.Limit, "plain")
		}
	}
	return g, err
}

// isWrongType reports whether err is the server's refusal of a command on a
// key of another type.
func isWrongType(err error) bool { return strings.Contains(err.Error(), "WRONGTYPE") }

// acquireOne is Acquire, but for what a key of another type gives.
func (s *single) acquireOne(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	d, err := drift.Allowance(r.TTL, drift.DefaultFactor)
	if err != nil {
		return strategy.Grant{Undone: true}, err
	}
	var fenceKey string
	if r.Fencing {
		if fenceKey, err = FenceKey(r.Key); err != nil {
			return strategy.Grant{Undone: true}, err
		}
	}
	if s.ack.Replicas == 0 {
		return s.acquire(ctx, s.srv, r, d, fenceKey)
	}
	return s.acquireAcked(ctx, r, d, fenceKey)
}

// acquireAcked is acquireOne when replicas must acknowledge the lock: a
// function of its own, since its closure moves r to the heap (a Request is
// larger than the closures' copies), which an acquisition without replicas
// is spared.
func (s *single) acquireAcked(ctx context.Context, r strategy.Request, d time.Duration, fenceKey string) (strategy.Grant, error) {
	var g strategy.Grant
	err := cas.Acked(ctx, s.conn, r.Key, s.ack, func(c driver.Conn) (err error) {
		g, err = s.acquire(ctx, s.srv.Over(c), r, d, fenceKey)
		return err
	})
	if errors.As(err, new(*ReplicaError)) {
		// The master has the lock, too few replicas do: undo it. Should the
		// undo fail, the Locker deletes it in the background.
		g.Undone = s.Release(ctx, r.Key, r.Value()) == nil
	}
	return g, err
}

// acquire makes one attempt on srv, with the drift allowance d and, for a
// fenced request, the counter fenceKey.
func (s *single) acquire(ctx context.Context, srv cas.Server, r strategy.Request, d time.Duration, fenceKey string) (strategy.Grant, error) {
	l := cas.Lock{Key: r.Key, Value: r.Value(), TTL: r.TTL, Start: cas.StartOf(r), Sharded: s.sharded}
	if r.Fencing {
		l.Fences, l.FenceTTL = []string{fenceKey}, s.fenceLife(r.TTL)
	}
	if r.Waiter != "" {
		if _, ok := s.queue(r.Key); ok {
			l.Waiter = cas.Waiter{ID: s.member(r.Waiter), Poll: r.Poll, Patience: r.Patience}
		}
	}
	res, err := srv.Run(ctx, cas.Acquire(l))
	g := strategy.Grant{Drift: d, Position: res.Position, HolderTTL: res.HolderTTL, Holder: res.HolderState()}
	if res.Fences != nil {
		g.Fence = res.Fences[0]
	}
	return g, err
}

// queue returns the wait queue of key, if waiters of key can be woken: the
// driver can subscribe, the server runs scripts, and key has companion
// names in its Cluster slot.
func (s *single) queue(key string) (cas.Queue, bool) {
	if !s.queues() {
		return cas.Queue{}, false
	}
	return cas.NewQueue(key, s.sharded)
}

// Listen implements [strategy.Notifier]. It returns nil when the driver
// cannot subscribe, or key has no companion names in its Cluster slot (a
// key with '}' but no hash tag): its waiters poll. Each Strategy has a
// wake-up channel of its own for each lock, {key}:wake:<random>, so that a
// release's message reaches the one subscriber whose waiter it wakes, not
// every process that waits for the lock.
func (s *single) Listen(key, id string) strategy.Listener { return s.listen(key, s.member(id)) }

// listen returns the Listener of the waiter whose id in key's queue is
// member, or nil when its waiters cannot be woken (see Listen).
func (s *single) listen(key, member string) strategy.Listener {
	if !s.queues() {
		return nil
	}
	channel, ok := cas.WakeChannelOf(key, s.wakeTo)
	if !ok {
		return nil
	}
	if w := notify.Listen([]driver.Conn{s.conn}, channel, member); w != nil {
		return w
	}
	return nil
}

// member returns the id in the queue of the waiter id: the Strategy's
// channel name, a dot, and id.
func (s *single) member(id string) string { return s.wakeTo + "." + id }

// Leave implements [strategy.Notifier].
func (s *single) Leave(ctx context.Context, key, id string) error {
	q, ok := s.queue(key)
	if !ok {
		return nil
	}
	w := cas.Waiter{ID: s.member(id)}
	if err := w.Leave(ctx, s.conn, cas.Lock{Key: q.Key, Sharded: q.Sharded}, false); !s.srv.Refuses(err) {
		return err
	}
	return nil // without scripts, no queue
}

// queues reports whether the waiters of the Strategy's locks queue: the
// driver can subscribe, and the server runs scripts (see cas.Detecting).
func (s *single) queues() bool { return s.notify && s.srv.Scripts() }

// FenceKey returns the key of the counter that issues the fencing tokens of
// key (see lock.WithFencing). It is in key's Redis Cluster hash slot, so
// that one script can update both: key + ":fence" when key has a hash tag
// ({...} with something inside), "{" + key + "}:fence" otherwise. A key
// with no hash tag that contains '}' has no such name: FenceKey refuses it
// with an *strategy.ArgumentError; give the key a hash tag.
func FenceKey(key string) (string, error) {
	name, ok := cas.Companion(key, "fence")
	if !ok {
		return "", &strategy.ArgumentError{Name: "key", Reason: "fencing needs a counter key in the key's Cluster hash slot, " +
			"and a key with '}' but no hash tag has none that can be named: give it a hash tag, such as {orders}:42"}
	}
	return name, nil
}

// Refresh implements [strategy.Strategy]. It refuses a TTL that the drift
// allowance uses up, as Acquire does.
func (s *single) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	return s.renew(ctx, key, ttl, cas.PExpire(cas.Lock{Key: key, Value: value, TTL: ttl}))
}

// Relabel implements [strategy.Relabeler] (lock.Lock.SetMetadata): a
// compare-and-set of next, in a script or, without scripts, SET IFEQ or a
// transaction, with Refresh's drift allowance and, with [WithReplicas],
// its acknowledgement: a relabel that too few replicas acknowledged fails
// with a *ReplicaError.
func (s *single) Relabel(ctx context.Context, key, value, next string, ttl time.Duration) (strategy.Grant, error) {
	return s.renew(ctx, key, ttl, cas.Set(cas.Lock{Key: key, Value: value, TTL: ttl}, next))
}

// Fences implements [strategy.Fencer]: Acquire issues fencing tokens, with
// scripts or without (see [FenceKey] for the keys it refuses).
func (s *single) Fences() bool { return true }

// renew sends call, which resets key's expiry to ttl (Refresh's or
// Relabel's), unless the drift allowance uses ttl up, and waits for the
// replicas of WithReplicas to acknowledge it.
func (s *single) renew(ctx context.Context, key string, ttl time.Duration, call cas.Call) (strategy.Grant, error) {
	d, err := drift.Allowance(ttl, drift.DefaultFactor)
	if err != nil {
		return strategy.Grant{}, err
	}
	if s.ack.Replicas == 0 {
		_, err := s.srv.Run(ctx, call)
		return strategy.Grant{Drift: d}, err
	}
	return strategy.Grant{Drift: d}, cas.Acked(ctx, s.conn, key, s.ack, func(c driver.Conn) error {
		_, err := s.srv.Over(c).Run(ctx, call)
		return err
	})
}

// Release implements [strategy.Strategy].
func (s *single) Release(ctx context.Context, key, value string) error {
	_, err := s.srv.Run(ctx, cas.Delete(cas.Lock{Key: key, Value: value, Queued: s.queues(), Sharded: s.sharded}))
	return err
}

// TTL implements [strategy.Strategy].
func (s *single) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	r, err := s.srv.Run(ctx, cas.PTTL(cas.Lock{Key: key, Value: value}))
	return r.TTL, err
}
