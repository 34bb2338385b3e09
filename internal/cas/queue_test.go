package cas_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// patience is a waiter's patience in the tests where no waiter may be
// taken for dead: far longer than any test runs.
const patience = time.Minute

// queueTest is one server, one driver and a key of its own.
type queueTest struct {
	t   *testing.T
	ctx context.Context
	srv *redistest.Server
	c   driver.Conn
	q   cas.Queue
}

// newQueueTest returns a queueTest for t, bounded by a hang detector.
func newQueueTest(t *testing.T, srv *redistest.Server, d redistest.Driver) queueTest {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	key := fmt.Sprintf("queue:%s:%d", t.Name(), time.Now().UnixNano())
	q, ok := cas.NewQueue(key, false)
	if !ok {
		t.Fatalf("NewQueue(%q): got no queue, want one", key)
	}
	return queueTest{t, ctx, srv, d.Conn(t, srv.Addr), q}
}

// hold takes the lock for id, with value "v-"+id, outside the queue.
func (qt queueTest) hold(id string) {
	qt.t.Helper()
	if err := acquire(qt.ctx, qt.c, qt.q.Key, "v-"+id, patience, cas.ByScript); err != nil {
		qt.t.Fatalf("Acquire(%q) = %v, want nil", "v-"+id, err)
	}
}

// try is one attempt of the waiter id, for value "v-"+id.
func (qt queueTest) try(id string, patience time.Duration) (cas.Result, error) {
	_, e, err := acquireQueued(qt.ctx, qt.c, qt.q, "", "v-"+id, id, patience, patience, patience)
	return e, err
}

// queue makes an attempt of id that must leave it queued, at position.
func (qt queueTest) queue(id string, patience time.Duration, position int) cas.Result {
	qt.t.Helper()
	e, err := qt.try(id, patience)
	if !errors.Is(err, strategy.ErrNotObtained) || e.Position != position {
		qt.t.Fatalf("AcquireQueued(%s) = %+v, %v; want position %d and ErrNotObtained", id, e, err, position)
	}
	return e
}

// grant makes an attempt of id that must obtain the lock.
func (qt queueTest) grant(id string) {
	qt.t.Helper()
	if e, err := qt.try(id, patience); err != nil {
		qt.t.Fatalf("AcquireQueued(%s) = %+v, %v; want the lock", id, e, err)
	}
}

// release releases value, which must hold the lock.
func (qt queueTest) release(value string) {
	qt.t.Helper()
	if err := deleteQueued(qt.ctx, qt.c, qt.q, value); err != nil {
		qt.t.Fatalf("DeleteQueued(%q) = %v, want nil", value, err)
	}
}

// command runs a command on the server.
func (qt queueTest) command(args ...string) string {
	qt.t.Helper()
	reply, err := qt.srv.Command(qt.ctx, args...)
	if err != nil {
		qt.t.Fatalf("%v: %v", args, err)
	}
	return reply
}

// entry returns the due time and poll interval (ms) of id's entry in the
// queue's hash, which must be the current version's "due:joined:poll".
func (qt queueTest) entry(id string) (due, poll int64) {
	qt.t.Helper()
	e := qt.command("HGET", qt.q.W, id)
	var joined int64
	if _, err := fmt.Sscanf(e, "%d:%d:%d", &due, &joined, &poll); err != nil || joined <= 0 {
		qt.t.Fatalf("HGET %s %s = %q, want due:joined:poll", qt.q.W, id, e)
	}
	return due, poll
}

// now returns the server's clock, in Unix milliseconds.
func (qt queueTest) now() int64 {
	qt.t.Helper()
	var sec, usec int64
	if _, err := fmt.Sscanf(qt.command("TIME"), "%d %d", &sec, &usec); err != nil {
		qt.t.Fatalf("TIME: %v", err)
	}
	return sec*1000 + usec/1000
}

// exists returns how many of keys exist.
func (qt queueTest) exists(keys ...string) int {
	qt.t.Helper()
	n, _ := strconv.Atoi(qt.command(append([]string{"EXISTS"}, keys...)...))
	return n
}

// subscribe subscribes to the queue's channel with a go-redis PubSub and
// waits for the confirmation.
func (qt queueTest) subscribe() *redis.PubSub {
	qt.t.Helper()
	ps := redistest.GoRedis(qt.t, qt.srv.Addr, 3).Subscribe(qt.ctx, channelOf(qt.q))
	qt.t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(qt.ctx); err != nil {
		qt.t.Fatalf("SUBSCRIBE %s: %v", channelOf(qt.q), err)
	}
	return ps
}

// heard reads the next message of ps, which must wake id.
func (qt queueTest) heard(ps *redis.PubSub, id string) {
	qt.t.Helper()
	m, err := ps.ReceiveMessage(qt.ctx)
	if err != nil || m.Payload != id {
		qt.t.Fatalf("the next message on %s: got %v, %v; want %q", channelOf(qt.q), m, err, id)
	}
}

// TestQueue: the queue scripts, on a real server, over every driver.
func TestQueue(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			t.Run("a free key with an empty queue is granted", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				qt.grant("a")
				if got := qt.command("GET", qt.q.Key); got != "v-a" {
					t.Errorf("GET key = %q, want %q", got, "v-a")
				}
				if n := qt.exists(qt.q.Q, qt.q.W); n != 0 {
					t.Errorf("queue keys left after a grant: %d, want 0", n)
				}
			})

			t.Run("a waiter behind a holder learns its position and the holder's TTL", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				qt.hold("h")
				e := qt.queue("a", patience, 1)
				if e.HolderTTL <= 0 || e.HolderTTL > patience {
					t.Errorf("HolderTTL = %v, want in (0, %v]", e.HolderTTL, patience)
				}
				qt.queue("b", patience, 2)
			})

			t.Run("waiters are granted in ticket order only", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				qt.hold("h")
				for i, id := range []string{"a", "b", "c"} {
					qt.queue(id, patience, i+1)
				}
				qt.release("v-h")
				if e := qt.queue("c", patience, 3); e.HolderTTL != 0 {
					t.Errorf("HolderTTL of a waiter behind another head, the key free = %v, want 0", e.HolderTTL)
				}
				qt.queue("b", patience, 2)
				qt.grant("a")
				qt.queue("c", patience, 2)
				qt.release("v-a")
				qt.grant("b")
				qt.release("v-b")
				qt.grant("c")
			})

			t.Run("a release publishes the head's id", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				ps := qt.subscribe()
				qt.hold("h")
				qt.queue("a", patience, 1)
				qt.queue("b", patience, 2)
				qt.release("v-h")
				qt.heard(ps, "a")
			})

			t.Run("a head that does not come back within its patience is pruned and the next woken", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				ps := qt.subscribe()
				qt.hold("h")
				qt.queue("a", 100*time.Millisecond, 1) // dies
				qt.queue("b", patience, 2)
				qt.release("v-h")
				qt.heard(ps, "a")
				time.Sleep(200 * time.Millisecond) // past a's patience, by the server's clock too
				qt.queue("c", patience, 2)         // finds a dead, the key free, b the head: wakes b
				qt.heard(ps, "b")
				qt.grant("b")
			})

			t.Run("the head's leaving wakes the next when the key is free", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				ps := qt.subscribe()
				qt.hold("h")
				qt.queue("a", patience, 1)
				qt.queue("b", patience, 2)
				qt.release("v-h")
				qt.heard(ps, "a")
				if err := leave(qt.ctx, qt.c, qt.q, "a"); err != nil {
					t.Fatalf("Leave(a) = %v, want nil", err)
				}
				qt.heard(ps, "b")
				qt.grant("b")
			})

			t.Run("a waiter's leaving while the key is held wakes no one", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				ps := qt.subscribe()
				qt.hold("h")
				qt.queue("a", patience, 1)
				qt.queue("b", patience, 2)
				if err := leave(qt.ctx, qt.c, qt.q, "a"); err != nil {
					t.Fatalf("Leave(a) = %v, want nil", err)
				}
				qt.queue("b", patience, 1)
				qt.release("v-h")
				qt.heard(ps, "b") // the first message: Leave published none
			})

			t.Run("the queue's keys expire within the longest patience", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				qt.hold("h")
				qt.queue("a", 2*time.Second, 1)
				qt.queue("b", 5*time.Second, 2)
				for _, k := range []string{qt.q.Q, qt.q.W} {
					ms, _ := strconv.Atoi(qt.command("PTTL", k))
					if ms <= 0 || ms > 5000 {
						t.Errorf("PTTL %s = %dms, want in (0, 5000]", k, ms)
					}
				}
			})

			t.Run("the queue's keys go when it empties", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				qt.hold("h")
				qt.queue("a", patience, 1)
				qt.release("v-h")
				qt.grant("a")
				if n := qt.exists(qt.q.Q, qt.q.W); n != 0 {
					t.Errorf("queue keys left once the last waiter was granted: %d, want 0", n)
				}
			})

			t.Run("a retried attempt changes nothing", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				qt.hold("h")
				qt.queue("a", patience, 1)
				qt.queue("b", patience, 2)
				tickets := qt.command("HGET", qt.q.W, "#")
				qt.queue("a", patience, 1)
				qt.queue("b", patience, 2)
				if got := qt.command("HGET", qt.q.W, "#"); got != tickets {
					t.Errorf("ticket counter after retried attempts = %s, want %s", got, tickets)
				}
				qt.release("v-h")
				qt.grant("a")
				qt.grant("a") // the same value again: still ours
				if got := qt.command("GET", qt.q.Key); got != "v-a" {
					t.Errorf("GET key after a retried grant = %q, want %q", got, "v-a")
				}
				qt.queue("b", patience, 1)
			})

			t.Run("Inspect reads how long the head has waited, by when it joined", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				qt.hold("h")
				qt.queue("a", patience, 1)
				qt.queue("b", patience, 2)
				due, poll := qt.entry("a")
				// a joined a minute ago: its entry says so, as a retry keeps it
				qt.command("HSET", qt.q.W, "a", fmt.Sprintf("%d:%d:%d", due, qt.now()-60_000, poll))
				qt.queue("a", patience, 1)
				r, err := inspect(qt.ctx, qt.c, qt.q.Key, "", qt.q)
				if err != nil || r.Queued != 2 || r.Waited < time.Minute || r.Waited > time.Minute+patience {
					t.Errorf("Inspect = %+v, %v; want 2 waiters, the head's a minute of waiting", r, err)
				}
			})

			t.Run("an entry without the time of joining, an earlier version's, reads as unknown and keeps its place", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				qt.hold("h")
				qt.queue("a", patience, 1)
				due, poll := qt.entry("a")
				qt.command("HSET", qt.q.W, "a", fmt.Sprintf("%d:%d", due, poll))
				qt.queue("b", patience, 2)
				qt.queue("a", patience, 1)
				if r, err := inspect(qt.ctx, qt.c, qt.q.Key, "", qt.q); err != nil || r.Queued != 2 || r.Waited != 0 {
					t.Errorf("Inspect = %+v, %v; want 2 waiters, the head's wait unknown (0)", r, err)
				}
				qt.release("v-h")
				qt.grant("a")
				qt.release("v-a")
				qt.grant("b")
			})

			t.Run("fencing tokens increase through the queue", func(t *testing.T) {
				qt := newQueueTest(t, srv, d)
				fenceKey, _ := cas.Companion(qt.q.Key, "fence")
				t.Cleanup(func() { _, _ = srv.Command(context.Background(), "DEL", fenceKey) })
				var last int64
				for _, id := range []string{"a", "b", "c"} {
					if id != "a" {
						_, e, err := acquireQueued(qt.ctx, qt.c, qt.q, fenceKey, "v-"+id, id, patience, patience, patience)
						if !errors.Is(err, strategy.ErrNotObtained) || e.Position != 1 {
							t.Fatalf("AcquireQueued(%s) behind a holder = %+v, %v; want position 1", id, e, err)
						}
						qt.release(qt.command("GET", qt.q.Key))
					}
					fence, _, err := acquireQueued(qt.ctx, qt.c, qt.q, fenceKey, "v-"+id, id, patience, patience, patience)
					if err != nil || fence <= last {
						t.Fatalf("AcquireQueued(%s) = %d, %v; want a token above %d", id, fence, err, last)
					}
					last = fence
				}
			})
		})
	}
}

// TestQueueLeavesNothing: after waiters contend for a lock until each has
// held it a number of times, the server holds no key at all: the lock, the
// queue and the waiters' entries are gone.
func TestQueueLeavesNothing(t *testing.T) {
	const (
		waiters = 4
		each    = 20
	)
	srv := redistest.Start(t, 1)[0]
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			qt := newQueueTest(t, srv, d)
			var (
				wg     sync.WaitGroup
				inside sync.Mutex // TryLock fails if two are granted at once
			)
			for w := range waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						id := fmt.Sprintf("w%d-%d", w, i)
						for {
							_, _, err := acquireQueued(qt.ctx, qt.c, qt.q, "", "v-"+id, id, patience, 5*time.Second, 5*time.Second)
							if err == nil {
								break
							}
							if !errors.Is(err, strategy.ErrNotObtained) {
								t.Errorf("AcquireQueued(%s) = %v, want nil or ErrNotObtained", id, err)
								return
							}
							time.Sleep(time.Millisecond)
						}
						if !inside.TryLock() {
							t.Errorf("%s was granted the lock while another held it", id)
							return
						}
						inside.Unlock()
						if err := deleteQueued(qt.ctx, qt.c, qt.q, "v-"+id); err != nil {
							t.Errorf("DeleteQueued(%s) = %v, want nil", id, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if keys := qt.command("KEYS", "*"); keys != "" {
				t.Errorf("KEYS * after the contention = %q, want none", keys)
			}
		})
	}
}

// TestDeleteQueuedDenied: a user whose ACL allows the lock key but not the
// queue's keys releases with a plain compare-and-delete.
func TestDeleteQueuedDenied(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, c := range aclConns(t, ctx, srv, "narrow", "~plain:*", "&*", "+@all") {
		t.Run(name, func(t *testing.T) {
			key := "plain:" + name
			q, _ := cas.NewQueue(key, false)
			if err := acquire(ctx, c, key, "v", patience, cas.ByScript); err != nil {
				t.Fatalf("Acquire = %v, want nil", err)
			}
			if err := deleteQueued(ctx, c, q, "v"); err != nil {
				t.Fatalf("DeleteQueued by a user denied %s = %v, want nil (a plain delete)", q.Q, err)
			}
			if got, _ := srv.Command(ctx, "EXISTS", key); got != "0" {
				t.Errorf("EXISTS %s after DeleteQueued = %s, want 0", key, got)
			}
		})
	}
}

// TestQueueCommandsDenied: a user whose ACL allows the queue's keys but
// not its commands (docs/acl.md's base rule) is refused the queue by the
// scripts themselves, whatever the server's wording of a command denied
// inside a script (Redis 7.0's differs from Redis 7.2's and Valkey's): a
// waiting attempt falls back to a plain one, Inspect counts no waiters,
// and a release falls back to a plain compare-and-delete.
func TestQueueCommandsDenied(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conns := aclConns(t, ctx, srv, "base", "~plain:*", "~{plain:*", "+evalsha", "+eval", "+get", "+set", "+pexpire", "+pttl", "+del")
	for name, c := range conns {
		t.Run(name, func(t *testing.T) {
			key := "plain:" + name
			q, _ := cas.NewQueue(key, false)
			t.Run("a waiting attempt falls back to a plain one", func(t *testing.T) {
				if _, _, err := acquireQueued(ctx, c, q, "", "v", "w", patience, patience, patience); err != nil {
					t.Fatalf("AcquireQueued = %v, want nil (a plain acquire)", err)
				}
				if got, _ := srv.Command(ctx, "GET", key); got != "v" {
					t.Errorf("GET %s = %q, want \"v\"", key, got)
				}
			})
			t.Run("Inspect counts no waiters", func(t *testing.T) {
				r, err := inspect(ctx, c, key, "", q)
				if err != nil || !r.Exists || r.Value != "v" || r.Queued != 0 {
					t.Errorf("Inspect = %+v, %v; want the lock's value, no waiters, nil", r, err)
				}
			})
			t.Run("a release falls back to a plain delete", func(t *testing.T) {
				if err := deleteQueued(ctx, c, q, "v"); err != nil {
					t.Fatalf("DeleteQueued = %v, want nil (a plain delete)", err)
				}
				if got, _ := srv.Command(ctx, "EXISTS", key); got != "0" {
					t.Errorf("EXISTS %s after DeleteQueued = %s, want 0", key, got)
				}
			})
		})
	}
}

// aclConns creates the ACL user user on srv, allowed rules and nothing
// else, and returns a connection as that user over each driver, closed
// when t ends.
func aclConns(t *testing.T, ctx context.Context, srv *redistest.Server, user string, rules ...string) map[string]driver.Conn {
	t.Helper()
	if _, err := srv.Command(ctx, append([]string{"ACL", "SETUSER", user, "reset", "on", ">secret"}, rules...)...); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: "secret", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	pool := &redigoredis.Pool{DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
		return redigoredis.DialContext(ctx, "tcp", srv.Addr, redigoredis.DialUsername(user), redigoredis.DialPassword("secret"))
	}}
	t.Cleanup(func() { _ = pool.Close() })
	rc := redistest.RueidisClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr}, ForceSingleClient: true, Username: user, Password: "secret"})
	return map[string]driver.Conn{"goredis": goredis.New(rdb), "redigo": redigo.New(pool), "rueidis": rueidisdriver.New(rc)}
}

// channelOf returns the lock's own wake-up channel, where messages for
// waiters whose ids name no listener go.
func channelOf(q cas.Queue) string {
	c, _ := cas.WakeChannel(q.Key)
	return c
}
