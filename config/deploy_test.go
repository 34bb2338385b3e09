package config_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestDeployments: a Locker that config builds for each deployment works
// on real servers that the test starts: a Unix socket (every driver), a
// 3-master Redis Cluster (single and setnx-getset: redlock's nodes must be
// independent masters), a master that 3 Sentinels monitor, and redlock over
// nodes that are each another kind of deployment, given as go-redis URLs.
// With LOCKSMITH_FULL=1 each passes the whole conformance suite; otherwise
// the Unix sockets get a smoke check (see [smoke]), and the topologies that
// take long to start are left to the full run.
func TestDeployments(t *testing.T) {
	redistest.RequireBinary(t)
	unix := redistest.StartUnix(t)
	tcp := testDriver(t, "goredis-resp3")
	on := func(s *redistest.Server) func(t *testing.T) driver.Conn {
		return func(t *testing.T) driver.Conn { return tcp.Conn(t, s.Addr) }
	}
	var combos []matrix.Combo
	for _, d := range drivers {
		combos = append(combos, deployment("single+unix/"+d.name, config.Config{Strategy: "single", Driver: d.name, Addrs: []string{unix.Socket}},
			func(t *testing.T, c *config.Config) { c.Addrs = []string{redistest.ClosedSocket(t)} }, on(unix)))
	}
	if !redistest.Full() {
		for _, c := range combos {
			t.Run(c.Name, func(t *testing.T) {
				t.Parallel()
				smoke(t, c.Harness)
			})
		}
		t.Run("cluster, sentinel and redlock over mixed nodes", func(t *testing.T) {
			redistest.RequireFull(t, "config's Cluster and Sentinel deployments")
		})
		return
	}

	cluster := redistest.StartCluster(t, 3)
	master := redistest.Start(t, 1)[0]
	redistest.StartReplica(t, master.Addr)
	sentinels := redistest.StartSentinels(t, master, 3)
	acl := redistest.Start(t, 1)[0]
	if _, err := acl.Command(context.Background(), "ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all"); err != nil {
		t.Fatal(err)
	}
	nodeSocket := redistest.StartUnix(t)
	clusterConn := func(t *testing.T) driver.Conn { return goredis.New(redistest.GoRedisCluster(t, cluster.Addrs())) }

	sentinelURL := "redis+sentinel://" + sentinels[0].Addr + "?master_name=" + redistest.MasterName + "&addr=" + sentinels[1].Addr + "&addr=" + sentinels[2].Addr
	clusterURL := "redis+cluster://" + cluster.Addrs()[0] + "?addr=" + strings.Join(cluster.Addrs()[1:], "&addr=")
	combos = append(combos,
		deployment("single+cluster", config.Config{Strategy: "single", Topology: "cluster", Addrs: cluster.Addrs()},
			func(t *testing.T, c *config.Config) { c.Addrs = redistest.ClosedAddrs(t, 3) }, clusterConn),
		deployment("setnx-getset+cluster", config.Config{Strategy: "setnx-getset", Topology: "cluster", Addrs: cluster.Addrs(), TimestampFormat: "ms", SafetyTTL: time.Second},
			func(t *testing.T, c *config.Config) { c.Addrs = redistest.ClosedAddrs(t, 3) }, clusterConn),
		deployment("single+sentinel", config.Config{Strategy: "single", Topology: "sentinel", Addrs: addrsOf(sentinels), MasterName: redistest.MasterName},
			func(t *testing.T, c *config.Config) { c.Addrs = redistest.ClosedAddrs(t, 3) }, on(master)),
		// The node timeout is redlock's default, derived from each call's
		// TTL (1s for the suite's long TTL): a first contact here dials four
		// kinds of client (an ACL login, a socket, a Sentinel's lookup, a
		// Cluster's slots), which a loaded machine takes more than 500ms for.
		deployment("redlock+nodes", config.Config{Strategy: "redlock", Nodes: []string{
			"redis://alice:s3cret@" + acl.Addr + "/0", "unix://" + nodeSocket.Socket, sentinelURL, clusterURL}},
			func(t *testing.T, c *config.Config) {
				closed := redistest.ClosedAddrs(t, 3)
				c.Nodes = []string{"redis://" + closed[0], "unix://" + redistest.ClosedSocket(t), "redis+sentinel://" + closed[1] + "?master_name=m", "redis+cluster://" + closed[2]}
			},
			on(acl), on(nodeSocket), on(master), clusterConn),
	)
	for i := range combos {
		t.Logf("%s: %v", combos[i].Name, combos[i].Harness.NewLocker(t))
		h := &combos[i].Harness
		h.Acquisitions = 500 // a quarter: the strategies' own packages run the full size
		switch {
		case strings.HasPrefix(combos[i].Name, "setnx-getset"):
			h.ExtraTTL, h.Skip = 2*time.Millisecond, matrix.SetnxGetsetSkips
		case strings.HasPrefix(combos[i].Name, "redlock"):
			h.ShortTTL, h.Skip = matrix.RedlockShortTTL, matrix.RedlockSkips
		}
	}
	matrix.Run(t, combos, 2) // Redlock over four kinds of node among them
}

// smoke checks that the Lockers that h builds lock on the deployment's
// servers: one obtains a lock, which lands on them; another is refused it
// until the first releases it; and a Locker of the same deployment whose
// servers are down reports an error, not "not obtained".
func smoke(t *testing.T, h conformance.Harness) {
	ctx := context.Background()
	key := conformance.Key(t)
	a, b := h.NewLocker(t), h.NewLocker(t)
	lk, err := a.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	for i, c := range h.Conns(t) {
		if _, ok, err := c.Get(ctx, key); !ok || err != nil {
			t.Errorf("the key on server %d: got ok %v, %v; want it there", i, ok, err)
		}
	}
	if _, err := b.Obtain(ctx, key, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("another Locker's Obtain: got %v, want ErrNotObtained", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	other, err := b.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("another Locker's Obtain after the release: got %v, want a lock", err)
	}
	if err := other.Release(ctx); err != nil {
		t.Errorf("Release = %v, want nil", err)
	}
	if _, err := h.NewUnreachable(t).Obtain(ctx, key, time.Minute); err == nil || errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("Obtain with the servers down: got %v, want an error other than ErrNotObtained", err)
	}
}

// deployment is the conformance harness of the Lockers that c builds;
// unreachable turns c into a Config of the same deployment whose servers
// are all down, and conns are the test's own connections to each server,
// for planting and reading keys.
func deployment(name string, c config.Config, unreachable func(*testing.T, *config.Config), conns ...func(*testing.T) driver.Conn) matrix.Combo {
	return matrix.Combo{Name: name, Harness: conformance.Harness{
		NewLocker: func(t *testing.T) *lock.Locker { return open(t, c) },
		Conns: func(t *testing.T) []driver.Conn {
			cs := make([]driver.Conn, len(conns))
			for i, conn := range conns {
				cs[i] = conn(t)
			}
			return cs
		},
		NewUnreachable: func(t *testing.T) *lock.Locker {
			c := c
			unreachable(t, &c)
			return open(t, c)
		},
		NewWithNilConn: func() (*lock.Locker, error) {
			c := c
			c.Driver = nilDriver
			l, err := config.Open(c)
			if err != nil {
				return nil, err // not a nil *Locker in a non-nil Locker
			}
			return l, nil
		},
	}}
}

func addrsOf(servers []*redistest.Server) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// TestSentinelFailover: a single Locker configured with a Sentinel URL
// follows a real failover (the master is killed, the Sentinels promote its
// replica), and the holder's next refresh tells what became of its lock.
// Without replica acknowledgement, a lock the replica never received is
// lost: the refresh reports ErrExpired. With replicas=1 it survives: the
// refresh succeeds on the promoted replica, and another client is refused.
// It runs with LOCKSMITH_FULL=1.
func TestSentinelFailover(t *testing.T) {
	redistest.RequireFull(t, "a Sentinel failover")
	for _, c := range []struct {
		name     string
		settings string
		want     error
	}{
		{"without replica acknowledgement, the lock is lost", "", lock.ErrExpired},
		{"with replicas=1, the lock survives", "&replicas=1&replica_timeout=1s", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			master := redistest.Start(t, 1)[0]
			replica := redistest.StartReplica(t, master.Addr)
			sentinels := redistest.StartSentinels(t, master, 3)
			url := "single+sentinel://" + strings.Join(addrsOf(sentinels), ",") + "?master_name=" + redistest.MasterName + "&ttl=1m" + c.settings
			t.Logf("URL: %s", url)
			cfg, err := config.ParseURL(url)
			if err != nil {
				t.Fatal(err)
			}
			l := open(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if c.want != nil {
				// Make "the write did not reach the replica" certain, not a
				// race: stop the replica (SIGSTOP), so that it cannot
				// reconnect, and drop its link; it resumes before the
				// Sentinels could take it for down.
				replica.Pause()
				if _, err := master.Command(ctx, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
					replica.Resume()
					t.Fatalf("CLIENT KILL TYPE replica: %v", err)
				}
			}
			lk, err := l.Obtain(ctx, "failover", 0)
			master.Kill()
			replica.Resume()
			if err != nil {
				t.Fatalf("Obtain: got %v, want nil", err)
			}
			newMaster := redistest.WaitFailover(t, sentinels[0], master.Addr)
			t.Logf("failover: %s -> %s", master.Addr, newMaster)
			redistest.StartReplica(t, newMaster)                   // to acknowledge the refresh
			err = refreshAfterFailover(t, ctx, lk, 30*time.Second) // the default TTL
			t.Logf("Refresh after the failover: %v", err)
			if !errors.Is(err, c.want) {
				t.Fatalf("Refresh after the failover: got %v, want %v", err, c.want)
			}
			if c.want == nil {
				if lk2, err := open(t, cfg).Obtain(ctx, "failover", time.Minute); !errors.Is(err, lock.ErrNotObtained) {
					t.Errorf("another client's Obtain = %v, %v; want ErrNotObtained: the lock is still held", lk2, err)
				}
			}
		})
	}
}

// refreshAfterFailover refreshes lk until the outcome is known. Until the
// client learns of the new master, a call may still go to the old one and
// fail to connect, and until the new master's replica has synced a refresh
// is not acknowledged: errors that are neither success nor loss, which a
// lock.Do or Watch refresh also tries again.
func refreshAfterFailover(t *testing.T, ctx context.Context, lk *lock.Lock, ttl time.Duration) error {
	for attempt := 1; ; attempt++ {
		err := lk.Refresh(ctx, ttl)
		if err == nil || errors.Is(err, lock.ErrNotHeld) || errors.Is(err, lock.ErrExpired) || ctx.Err() != nil {
			return err
		}
		t.Logf("Refresh %d: %v", attempt, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReplicasOnACluster: replicas is accepted on a Cluster, whose client
// pins a connection to the master of each key's slot, where WAIT counts
// the writes (single's TestWithReplicasOnACluster runs it on a Cluster);
// Open contacts no server.
func TestReplicasOnACluster(t *testing.T) {
	c, err := config.ParseURL("single+cluster://h1:7000,h2:7000?replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := config.Open(c)
	if err != nil {
		t.Fatalf("Open: got %v, want nil", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: got %v, want nil", err)
	}
}
