// Package single implements the single-instance lock: one key on one Redis
// deployment, a server or a Cluster.
//
//	locker, err := single.New(goredis.New(client))
//	...
//	lk, err := locker.Obtain(ctx, "report:daily", 30*time.Second, lock.WithFencing())
//
// It runs Lua scripts (EVALSHA, falling back to EVAL): SET key token NX PX
// ttl to acquire (or, when the key already holds our token, PEXPIRE), and
// compare-and-delete, compare-and-pexpire and compare-and-pttl to release,
// refresh and read the TTL, so that no client ever deletes or extends a
// lock it does not own. Over a conn marked driver.WithoutScripts, for a
// server that forbids scripts, it does the same with conditional commands
// and transactions, over a driver that pins a connection (driver.Pinner;
// New refuses another); its waiters then poll, in no particular order, and
// semaphores and read-write locks, which only scripts have, are refused.
// Over a conn not so marked, a Strategy finds a server that refuses
// scripts at its first contact, before it writes anything, does the same
// there, and tries scripts again a minute later. The repository's
// docs/strategies.md ("single without scripts") says what each operation
// sends.
//
// The lock's local validity (Lock.ValidUntil) allows for clock drift
// between the client and the server, as the Redis documentation asks: it
// ends TTL × 1% + 2ms early, so that it comes before the server's expiry
// even when the server's clock runs a little fast. A TTL that this allowance
// uses up (about 2.02ms or less) is refused with an *strategy.ArgumentError,
// before anything is written.
//
// With lock.WithFencing, the acquisition also increments, in the same
// script, a counter at [FenceKey] and returns its value as the lock's
// fencing token: larger for every new holder, across releases, expiries and
// crashed holders. The counter never expires.
//
// Over a driver that can subscribe (driver.Subscriber), an Obtain that
// waits joins an advisory FIFO queue of the lock's waiters ({key}:q and
// {key}:w, in the key's Cluster slot), and a release wakes the head of the
// queue by a message on the channel of the head's Strategy
// ({key}:wake:<random>). The lock is granted by the same SET NX as ever, so
// a lost message costs time, never exclusion. See the repository's
// docs/waiting.md guide, and lock.WithPolling to turn it off.
//
// lock.Locker.ObtainMany locks several keys as one lock, all of them or none,
// with single's value under each key (so that bsm/redislock sees each one
// held), through ObtainMany: on one server, or with every key
// in one Cluster slot (give them one hash tag), one script takes every key
// or none, and with lock.WithFencing increments each key's counter. Over a
// Cluster client (go-redis's *redis.ClusterClient, a rueidis Cluster
// client) with keys in several slots, it takes them slot by slot, in the
// order of the slots, each slot's keys in one script, and deletes what the
// earlier slots took when a later one finds a key held: exclusive per key
// and free of deadlock, but not atomic across slots, so that another client
// may see some of the keys held for a moment. A refresh extends every key
// or none (per slot, on a Cluster). A release deletes each key the lock
// still holds and wakes its queue's head. Without scripts, one
// transaction per server or slot does the same.
//
// It is safe as long as the Redis deployment it talks to does not lose
// writes: one server, or a Cluster (each key lives on one master). A failover
// to a replica that had not received the key can let a second client in.
// [WithReplicas] narrows that window; use the redlock strategy when it is
// not enough.
package single

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
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
// timeout on the same connection, and WAIT counts the replicas that
// received that connection's writes. WAIT's timeout is cut to what is left
// of the call's context, never past it. 0 replicas (the default) sends no
// WAIT; n > 0 needs a positive timeout, and a driver that can pin a
// connection ([driver.Pinner]: redigo; go-redis's *redis.Client,
// standalone or failover, *redis.ClusterClient and *redis.Ring; every
// rueidis client), or New refuses with an *strategy.ArgumentError.
// On a Cluster, the write and WAIT go to the master of the key's slot, and
// WAIT counts that master's replicas.
//
// An acquisition that fewer replicas acknowledge is undone (the key it
// wrote is deleted, as a release does) and fails with a [*ReplicaError],
// which does not match lock.ErrNotObtained: the lock was free, so it is
// not retried as a busy lock would be; Obtain returns it at once. A
// refresh that fewer acknowledge fails with a *ReplicaError, and the lock
// keeps the validity of its last confirmed refresh: auto-refresh retries
// it, as it does a refresh that got no answer, until that validity ends,
// and the lock is then lost.
//
// It is not consensus. WAIT only tells that n replicas had the write when
// it replied: a failover can still promote a replica that does not (one
// that did not acknowledge, with n smaller than the number of replicas),
// a partition can leave an old master taking writes, and a replica can
// lose what it acknowledged in a restart. See docs/safety.md's "Replica
// acknowledgement". It costs one more round trip per acquisition and
// refresh, and up to timeout when replicas lag.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(s *single) { s.ack = cas.Ack{Replicas: n, Timeout: timeout} }
}

var (
	_ strategy.Strategy = (*single)(nil)
	_ strategy.Notifier = (*single)(nil)
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
	var g strategy.Grant
	err = cas.Acked(ctx, s.conn, r.Key, s.ack, func(c driver.Conn) (err error) {
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
		l.Fences = []string{fenceKey}
	}
	if r.Waiter != "" {
		if _, ok := s.queue(r.Key); ok {
			l.Waiter = cas.Waiter{ID: s.member(r.Waiter), Poll: r.Poll, Patience: r.Patience}
		}
	}
	res, err := srv.Run(ctx, cas.Acquire(l))
	g := strategy.Grant{Drift: d, Position: res.Position, HolderTTL: res.HolderTTL}
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
	d, err := drift.Allowance(ttl, drift.DefaultFactor)
	if err != nil {
		return strategy.Grant{}, err
	}
	call := cas.PExpire(cas.Lock{Key: key, Value: value, TTL: ttl})
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
