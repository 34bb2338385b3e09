package single_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// replicaWait is WithReplicas' timeout in these tests: long enough for a
// live replica on a loaded machine, since WAIT returns as soon as it
// acknowledges; it only bounds the wait for one that cannot.
const replicaWait = 10 * time.Second

// modes are the ways the Strategy talks to the server: scripts, and over
// a Conn marked driver.WithoutScripts.
var modes = []struct {
	name string
	mark func(driver.Conn) driver.Conn
}{{"scripts", withScripts}, {"without-scripts", driver.WithoutScripts}}

// TestWithReplicas: with WithReplicas(1, ...), an acquisition and a refresh
// count only once a replica acknowledges them (WAIT), over every driver,
// with scripts and without (where WAIT follows a transaction or a
// conditional command on its connection).
func TestWithReplicas(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		for _, d := range redistest.Drivers() {
			t.Run(m.name+"/"+d.Name, func(t *testing.T) {
				t.Parallel()
				testWithReplicas(t, d, m.mark)
			})
		}
	}
}

// testWithReplicas is TestWithReplicas over d's connections, marked by
// mark.
func testWithReplicas(t *testing.T, d redistest.Driver, mark func(driver.Conn) driver.Conn) {
	t.Run("a replica acknowledges: obtained and refreshed", func(t *testing.T) {
		master := redistest.Start(t, 1)[0]
		replica := redistest.StartReplica(t, master.Addr)
		conn := mark(d.Conn(t, master.Addr))
		l := newReplicated(t, conn, 1, replicaWait)
		ctx := testContext(t)
		lk, err := l.Obtain(ctx, "replicas:ok", time.Minute)
		if err != nil {
			t.Fatalf("Obtain: got %v, want nil", err)
		}
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Errorf("Refresh: got %v, want nil", err)
		}
		guardedOnTheReplica(t, ctx, lk, conn, d.Conn(t, replica.Addr))
		if err := lk.Release(ctx); err != nil {
			t.Errorf("Release: got %v, want nil", err)
		}
		if driver.ScriptsOff(conn) {
			sentNoScript(t, master)
		}
	})
	t.Run("no replica: a *ReplicaError, and nothing left behind", func(t *testing.T) {
		master := redistest.Start(t, 1)[0]
		l := newReplicated(t, mark(d.Conn(t, master.Addr)), 1, 50*time.Millisecond)
		ctx := testContext(t)
		lk, err := l.Obtain(ctx, "replicas:none", time.Minute)
		var re *single.ReplicaError
		if !errors.As(err, &re) || re.Want != 1 || re.Got != 0 {
			t.Fatalf("Obtain = %v, %v; want a *ReplicaError{Want: 1, Got: 0}", lk, err)
		}
		if errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain: got %v, which matches ErrNotObtained; want an error that tells it from a busy lock", err)
		}
		if n, err := master.Command(ctx, "EXISTS", "replicas:none"); n != "0" || err != nil {
			t.Errorf("EXISTS replicas:none = %q, %v; want 0: the unconfirmed lock deleted", n, err)
		}
	})
	t.Run("the replica stops answering: Refresh fails with a *ReplicaError, the lock still held", func(t *testing.T) {
		master := redistest.Start(t, 1)[0]
		replica := redistest.StartReplica(t, master.Addr)
		l := newReplicated(t, mark(d.Conn(t, master.Addr)), 1, replicaWait)
		ctx := testContext(t)
		lk, err := l.Obtain(ctx, "replicas:refresh", time.Minute)
		if err != nil {
			t.Fatalf("Obtain: got %v, want nil", err)
		}
		replica.Pause()
		defer replica.Resume()
		// WAIT waits half of the 2s left, and answers before the
		// deadline.
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err = lk.Refresh(short, time.Minute)
		var re *single.ReplicaError
		if !errors.As(err, &re) || re.Want != 1 || re.Got != 0 {
			t.Errorf("Refresh: got %v, want a *ReplicaError{Want: 1, Got: 0}", err)
		}
		if err := lk.Err(); err != nil {
			t.Errorf("Err after the unconfirmed refresh: got %v, want nil: the last confirmed TTL still runs", err)
		}
	})
	t.Run("WAIT's timeout is cut to the caller's deadline", func(t *testing.T) {
		master := redistest.Start(t, 1)[0]
		l := newReplicated(t, mark(d.Conn(t, master.Addr)), 1, time.Hour)
		ctx, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
		defer cancel()
		// testContext's minute is the hang detector: WAIT 1 3600000
		// would outlast it; WAIT waits half of the 100ms.
		if lk, err := l.Obtain(ctx, "replicas:deadline", time.Minute); err == nil {
			t.Fatalf("Obtain = %v, nil; want an error: no replica acknowledged", lk)
		}
		redistest.Eventually(t, "the unconfirmed lock deleted", func(ctx context.Context) bool {
			n, err := master.Command(ctx, "EXISTS", "replicas:deadline")
			return err == nil && n == "0"
		})
	})
}

// TestWithReplicasOnACluster: on a Cluster, the write and WAIT go to the
// master of the key's slot, and WAIT counts that master's replicas: a key
// of the master that has a replica is obtained and refreshed, and a key of
// another master, which has none, fails with a *ReplicaError and is left
// nowhere, over each Cluster client, with scripts and without.
func TestWithReplicasOnACluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	const replicated, alone = "replicas:{0}", "replicas:{3}" // slots 13907 and 1584: two masters of three
	master := cluster.Owner(t, cluster.KeySlot(t, replicated))
	if other := cluster.Owner(t, cluster.KeySlot(t, alone)); other == master {
		t.Fatalf("%s and %s are both on %s, want two masters", replicated, alone, master.Addr)
	}
	cluster.StartReplica(t, master)
	for _, m := range modes {
		for _, c := range []struct {
			name string
			conn func(t *testing.T) driver.Conn
		}{
			{"goredis", func(t *testing.T) driver.Conn { return goredis.New(redistest.GoRedisCluster(t, cluster.Addrs())) }},
			{"rueidis", func(t *testing.T) driver.Conn {
				return rueidisdriver.New(redistest.RueidisCluster(t, cluster.Addrs()))
			}},
		} {
			t.Run(m.name+"/"+c.name, func(t *testing.T) {
				t.Run("a key of the master with a replica: obtained and refreshed", func(t *testing.T) {
					l := newReplicated(t, m.mark(c.conn(t)), 1, replicaWait)
					ctx := testContext(t)
					lk, err := l.Obtain(ctx, replicated+m.name+c.name, time.Minute)
					if err != nil {
						t.Fatalf("Obtain: got %v, want nil", err)
					}
					if err := lk.Refresh(ctx, time.Minute); err != nil {
						t.Errorf("Refresh: got %v, want nil", err)
					}
					if err := lk.Release(ctx); err != nil {
						t.Errorf("Release: got %v, want nil", err)
					}
				})
				t.Run("a key of a master without one: a *ReplicaError, and nothing left behind", func(t *testing.T) {
					l := newReplicated(t, m.mark(c.conn(t)), 1, 50*time.Millisecond)
					ctx := testContext(t)
					key := alone + m.name + c.name
					lk, err := l.Obtain(ctx, key, time.Minute)
					var re *single.ReplicaError
					if !errors.As(err, &re) || re.Want != 1 || re.Got != 0 {
						t.Fatalf("Obtain = %v, %v; want a *ReplicaError{Want: 1, Got: 0}", lk, err)
					}
					owner := cluster.Owner(t, cluster.KeySlot(t, key))
					if n, err := owner.Command(ctx, "EXISTS", key); n != "0" || err != nil {
						t.Errorf("EXISTS %s on its master = %q, %v; want 0: the unconfirmed lock deleted", key, n, err)
					}
				})
			})
		}
	}
}

// TestWithReplicasRefused: NewStrategy refuses a bad WithReplicas, and a
// driver that cannot send WAIT over the connection of the write, with an
// *ArgumentError that names the setting (and the driver); it accepts a
// Cluster client, which pins the connection to the key's master.
func TestWithReplicasRefused(t *testing.T) {
	conn := goredis.New(redistest.GoRedis(t, redistest.ClosedAddr(t), 3))
	cluster := goredis.New(redistest.GoRedisCluster(t, redistest.ClosedAddrs(t, 3)))
	for _, c := range []struct {
		name, arg, reason string
		conn              driver.Conn
		opt               single.Option
	}{
		{"negative replicas", "replicas", "must not be negative", conn, single.WithReplicas(-1, time.Second)},
		{"no timeout", "replica timeout", "must be positive", conn, single.WithReplicas(1, 0)},
		{"a driver without Pinner", "replicas", "single_test.plainConn", plainConn{conn}, single.WithReplicas(1, time.Second)},
		{"a nil option", "option", "must not be nil", conn, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := single.NewStrategy(c.conn, c.opt)
			var ae *lock.ArgumentError
			if !errors.As(err, &ae) || ae.Name != c.arg || !strings.Contains(ae.Reason, c.reason) {
				t.Errorf("NewStrategy = %v, %v; want an *ArgumentError named %q that says %q", s, err, c.arg, c.reason)
			}
		})
	}
	t.Run("0 replicas over a driver without Pinner: no WAIT, accepted", func(t *testing.T) {
		if _, err := single.NewStrategy(plainConn{conn}, single.WithReplicas(0, 0)); err != nil {
			t.Errorf("NewStrategy: got %v, want nil", err)
		}
	})
	t.Run("a Cluster client: accepted", func(t *testing.T) {
		if _, err := single.NewStrategy(cluster, single.WithReplicas(1, time.Second)); err != nil {
			t.Errorf("NewStrategy: got %v, want nil", err)
		}
	})
}

// plainConn is a driver.Conn with none of the optional interfaces.
type plainConn struct{ driver.Conn }

// TestFailover runs a lock across a Sentinel failover (1 master, 1 replica,
// 3 Sentinels), through a go-redis failover client that follows the new
// master. Without replica acknowledgement the lock is lost with the master;
// with WithReplicas(1, ...) it survives. It runs with LOCKSMITH_FULL=1.
func TestFailover(t *testing.T) {
	redistest.RequireFull(t, "a Sentinel failover")
	const key, ttl = "failover", time.Minute
	t.Run("without replica acknowledgement: the next Refresh reports ErrExpired", func(t *testing.T) {
		master, replica, sentinels := startSentinel(t)
		l := newReplicated(t, failoverConn(t, sentinels), 0, 0)
		ctx := testContext(t)
		// Make "the write did not reach the replica" certain, not a race:
		// stop the replica (SIGSTOP), so it cannot reconnect, and drop its
		// link on the master. The master then replicates the lock to no one
		// (a write before CLIENT KILL replied is older than the lock). The
		// replica resumes before Sentinel could take it for down.
		replica.Pause()
		if _, err := master.Command(ctx, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
			replica.Resume()
			t.Fatalf("CLIENT KILL TYPE replica: %v", err)
		}
		lk, err := l.Obtain(ctx, key, ttl)
		master.Kill()
		replica.Resume()
		if err != nil {
			t.Fatalf("Obtain: got %v, want nil", err)
		}
		newMaster := redistest.WaitFailover(t, sentinels[0], master.Addr)
		t.Logf("failover: %s -> %s", master.Addr, newMaster)
		if err := lk.Refresh(ctx, ttl); !errors.Is(err, lock.ErrExpired) {
			t.Errorf("Refresh after the failover: got %v, want ErrExpired: the new master never had the lock", err)
		}
	})
	t.Run("with WithReplicas(1): the lock survives; Refresh succeeds, another client is refused", func(t *testing.T) {
		master, _, sentinels := startSentinel(t)
		l := newReplicated(t, failoverConn(t, sentinels), 1, replicaWait)
		ctx := testContext(t)
		lk, err := l.Obtain(ctx, key, ttl)
		if err != nil {
			t.Fatalf("Obtain: got %v, want nil", err)
		}
		master.Kill()
		newMaster := redistest.WaitFailover(t, sentinels[0], master.Addr)
		t.Logf("failover: %s -> %s", master.Addr, newMaster)
		// The new master needs a replica of its own to acknowledge the
		// refresh.
		redistest.StartReplica(t, newMaster)
		if err := lk.Refresh(ctx, ttl); err != nil {
			t.Errorf("Refresh after the failover: got %v, want nil", err)
		}
		other := newReplicated(t, failoverConn(t, sentinels), 0, 0)
		if lk2, err := other.Obtain(ctx, key, ttl); !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("another client's Obtain = %v, %v; want ErrNotObtained: the lock is still held", lk2, err)
		}
	})
}

// startSentinel starts a master, its replica and 3 Sentinels, which know
// each other and the replica.
func startSentinel(t *testing.T) (master, replica *redistest.Server, sentinels []*redistest.Server) {
	master = redistest.Start(t, 1)[0]
	replica = redistest.StartReplica(t, master.Addr)
	return master, replica, redistest.StartSentinels(t, master, 3)
}

// failoverConn returns a go-redis failover client of the Sentinels' master,
// closed when t ends.
func failoverConn(t *testing.T, sentinels []*redistest.Server) driver.Conn {
	addrs := make([]string, len(sentinels))
	for i, s := range sentinels {
		addrs[i] = s.Addr
	}
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.MasterName, SentinelAddrs: addrs,
		DialTimeout: time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return goredis.New(c)
}

// newReplicated returns a Locker over conn with WithReplicas(n, timeout).
func newReplicated(t *testing.T, conn driver.Conn, n int, timeout time.Duration) *lock.Locker {
	l, err := single.New(conn, single.WithReplicas(n, timeout))
	if err != nil {
		t.Fatalf("single.New: %v", err)
	}
	return l
}

// testContext returns a context that ends with t, or after a minute: a
// hang detector.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// guardedOnTheReplica checks that lk's guarded writes, once they return,
// are on the replica that replica reads: they waited for its
// acknowledgement. Over a conn without scripts, the commands alone.
func guardedOnTheReplica(t *testing.T, ctx context.Context, lk *lock.Lock, conn, replica driver.Conn) {
	t.Helper()
	if !driver.ScriptsOff(conn) {
		if _, err := lk.Guard(ctx, `return redis.call('SET', KEYS[1], ARGV[1])`, []string{"replicas:script"}, "written"); err != nil {
			t.Errorf("Guard: got %v, want nil", err)
		}
		if v, _, err := replica.Get(ctx, "replicas:script"); v != "written" || err != nil {
			t.Errorf("the guarded script's key on the replica: got %q, %v; want %q", v, err, "written")
		}
	}
	if _, err := lk.GuardCommands(ctx, []string{"replicas:commands"}, []any{"SET", "replicas:commands", "written"}); err != nil {
		t.Errorf("GuardCommands: got %v, want nil", err)
	}
	if v, _, err := replica.Get(ctx, "replicas:commands"); v != "written" || err != nil {
		t.Errorf("the guarded commands' key on the replica: got %q, %v; want %q", v, err, "written")
	}
}
