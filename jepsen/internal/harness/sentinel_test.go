package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// masterName is the name the Sentinels of the tests monitor their master
// under.
const masterName = "jepsen"

// sentinelDrivers are the drivers with a Sentinel client.
var sentinelDrivers = []string{"goredis", "rueidis"}

// deployment is a master, its replica and three Sentinels, each in a node
// of its own, and two client nodes, c1 and c2, in one Net.
type deployment struct {
	net             *Net
	master, replica *Server
	sentinels       *Sentinels
	s               []*Node // the Sentinels' nodes
	c1, c2          *Node
}

// startDeployment starts a deployment whose Sentinels take the master for
// down after downAfter, and stops it when t ends. The master sends its
// replica its first full sync at once (repl-diskless-sync-delay 0), so
// that the deployment starts sooner; the replica keeps Redis's default of
// 5 s, as a deployment would, so that once promoted it makes the old
// master wait that long for its sync.
func startDeployment(t *testing.T, downAfter time.Duration) *deployment {
	t.Helper()
	redistest.RequireBinary(t)
	n := newNet(t, "master", "replica", "s1", "s2", "s3", "c1", "c2")
	dir := shortDir(t)
	d := &deployment{net: n, s: []*Node{n.Node("s1"), n.Node("s2"), n.Node("s3")}, c1: n.Node("c1"), c2: n.Node("c2")}
	start := func(node *Node, args ...string) *Server {
		s := NewServer(node, dir)
		s.Args = args
		return started(t, s)
	}
	d.master = start(n.Node("master"), "--repl-diskless-sync-delay", "0")
	d.replica = start(n.Node("replica"), "--replicaof", d.master.Node.IP, "6379")
	begun := time.Now()
	s, err := StartSentinels(d.s, dir, masterName, d.master, 1, downAfter)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("StartSentinels: the replica synchronized, and 3 Sentinels list it and know each other, %v after the start", time.Since(begun).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	d.sentinels = s
	return d
}

// isolate partitions the master and c1 from the rest.
func (d *deployment) isolate() error {
	return d.net.Partition([]*Node{d.master.Node, d.c1}, []*Node{d.replica.Node, d.s[0], d.s[1], d.s[2], d.c2})
}

// role returns the role of s, asked on its socket: "master", or "slave"
// and its master's host.
func role(ctx context.Context, s *Server) (string, error) {
	return admin(s, func(c *redis.Client) (string, error) {
		r, err := c.Do(ctx, "ROLE").Slice()
		switch {
		case err != nil || len(r) == 0:
			return "", fmt.Errorf("ROLE = %v, %w", r, err)
		case r[0] == "slave" && len(r) > 1:
			return fmt.Sprint(r[0], " ", r[1]), nil
		}
		return fmt.Sprint(r[0]), nil
	})
}

// An attempt is an Obtain's outcome in a failover run.
type attempt struct {
	client string
	at     time.Time // when it returned
	err    error
}

// failoverRun is what a run of clients across a failover saw.
type failoverRun struct {
	Report
	attempts []attempt
	holds    []Hold
	start    time.Time

	oldMaster, replica string // their addresses
	before, newMaster  string // the master the Sentinels named before the partition, and after it

	// When the partition began, a majority of the Sentinels named the
	// replica, the partition was healed, and the old master was a replica.
	partitioned, promoted, healed, demoted time.Time
	obtainedAgain                          time.Time // the first Obtain that succeeded after the heal; zero if none did
}

// acrossFailover runs clients c1 and c2 of single with opts, over drv's
// Sentinel client from their nodes, taking turns on a key, each hold 50 ms
// of a TTL of 2 s. c1 begins alone; after a second the master is isolated
// with c1, and c2 begins; once the Sentinels have promoted the replica,
// and 2 s more, the partition is healed. The run ends a second after the
// old master is a replica and an Obtain has succeeded since the heal, or
// 60 s after the heal at most.
//
// c2 begins with the partition so that c1 does not wait, as the partition
// begins, for a lock that c2 took on the master and can no longer release:
// the wait would end in c1's deadline, mid-command, and go-redis would
// close c1's connection; and a go-redis failover client asks the Sentinels
// for the master's address to dial it, which c1 cannot reach: c1 would
// never reach the old master again until the heal.
func acrossFailover(t *testing.T, drv string, opts ...single.Option) (r failoverRun) {
	t.Helper()
	d := startDeployment(t, time.Second)
	r.oldMaster, r.replica = d.master.Addr, d.replica.Addr
	var err error
	if r.before, err = d.sentinels.Master(context.Background()); err != nil {
		t.Error(err)
	}
	var lockers []*lock.Locker
	for _, node := range []*Node{d.c1, d.c2} {
		c, closer, err := SentinelConn(drv, node.DialContext, d.sentinels.Addrs(), masterName)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closer.Close() })
		l, err := single.New(c, opts...)
		if err != nil {
			t.Fatal(err)
		}
		lockers = append(lockers, l)
	}
	const ttl, hold = 2 * time.Second, 50 * time.Millisecond
	key := fmt.Sprintf("jepsen:%s:%d", t.Name(), time.Now().UnixNano())
	r.start = time.Now()
	since := func(tm time.Time) int64 { return int64(tm.Sub(r.start)) }
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		mu          sync.Mutex
		wg          sync.WaitGroup
		partitioned = make(chan struct{})
	)
	for i, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := fmt.Sprint("c", i+1)
			if i == 1 {
				select { // c2 begins with the partition
				case <-partitioned:
				case <-ctx.Done():
					return
				}
			}
			// At most one turn each 10 ms, for the 80 s that the run lasts
			// at most.
			for n := 0; n < 8000 && ctx.Err() == nil; n++ {
				h := Hold{Key: key, Holder: client, Invoked: since(time.Now())}
				call, cancel := context.WithTimeout(ctx, time.Second)
				lk, err := l.Obtain(call, key, ttl, lock.WithRetry(lock.Linear(5*time.Millisecond)))
				cancel()
				mu.Lock()
				r.attempts = append(r.attempts, attempt{client, time.Now(), err})
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				h.Obtained, h.ValidUntil = since(time.Now()), since(lk.ValidUntil())
				time.Sleep(hold)
				h.Released = since(time.Now())
				_ = release(lk) // across a failover, ErrNotHeld or no answer as often as not
				mu.Lock()
				r.holds = append(r.holds, h)
				mu.Unlock()
			}
		}()
	}
	defer func() { stop(); wg.Wait(); r.Report = Check(r.holds) }()

	time.Sleep(time.Second)
	r.partitioned = time.Now()
	if err := d.isolate(); err != nil {
		t.Fatal(err)
	}
	close(partitioned)
	healAll(t, d.net)
	r.newMaster, err = d.sentinels.WaitMaster(context.Background(), d.master.Addr)
	r.promoted = time.Now()
	if err != nil {
		t.Error(err)
		return r
	}
	time.Sleep(2 * time.Second)
	r.healed = time.Now()
	if err := d.net.HealAll(); err != nil {
		t.Fatal(err)
	}
	err = waitFor(60*time.Second, func(ctx context.Context) (bool, error) {
		if r.demoted.IsZero() {
			if role, err := role(ctx, d.master); err != nil || role != "slave "+d.replica.Node.IP {
				return false, fmt.Errorf("the old master's ROLE: %q, %v", role, err)
			}
			r.demoted = time.Now()
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range r.attempts {
			if a.err == nil && a.at.After(r.healed) {
				r.obtainedAgain = a.at
				return true, nil
			}
		}
		return false, errors.New("no Obtain has succeeded since the heal")
	})
	if err != nil {
		t.Log(err)
	}
	time.Sleep(time.Second)
	return r
}

// counts returns client's attempts between from and to that ended with an
// error matching is, and those that succeeded.
func (r failoverRun) counts(client string, from, to time.Time, is func(error) bool) (matched, obtained int) {
	for _, a := range r.attempts {
		if a.client != client || a.at.Before(from) || a.at.After(to) {
			continue
		}
		switch {
		case a.err == nil:
			obtained++
		case is(a.err):
			matched++
		}
	}
	return matched, obtained
}

// log logs what r measured.
func (r failoverRun) log(t *testing.T) {
	t.Helper()
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	t.Logf("%v; %d Obtains", r.Report, len(r.attempts))
	t.Logf("failover: the Sentinels named %s %s after the partition (down-after 1s)", r.newMaster, ms(r.promoted.Sub(r.partitioned)))
	if !r.demoted.IsZero() {
		t.Logf("the old master a replica %s after the heal", ms(r.demoted.Sub(r.healed)))
	}
	if !r.obtainedAgain.IsZero() {
		t.Logf("the first Obtain that succeeded after the heal: %s after it", ms(r.obtainedAgain.Sub(r.healed)))
	}
	phases := []struct {
		name     string
		from, to time.Time
	}{
		{"before the partition", r.start, r.partitioned},
		{"partitioned", r.partitioned, r.promoted},
		{"promoted", r.promoted, r.healed},
		{"healed", r.healed, time.Now()},
	}
	for _, p := range phases {
		outcomes := map[string]int{}
		for _, a := range r.attempts {
			if !a.at.Before(p.from) && a.at.Before(p.to) {
				k := a.client + " " + kind(a.err)
				if outcomes[k] == 0 && a.err != nil {
					t.Logf("the first Obtain of %s, %s: %v", k, p.name, a.err)
				}
				outcomes[k]++
			}
		}
		t.Logf("Obtains %s (%s): %v", p.name, ms(p.to.Sub(p.from)), outcomes)
	}
	for _, ex := range r.Examples {
		t.Logf("overlap: %s obtained at %s valid until %s; %s obtained at %s", ex.First.Holder, ms(time.Duration(ex.First.Obtained)),
			ms(time.Duration(ex.First.ValidUntil)), ex.Second.Holder, ms(time.Duration(ex.Second.Obtained)))
	}
}

// kind names the kind of an Obtain's error, for the log.
func kind(err error) string {
	var re *single.ReplicaError
	switch {
	case err == nil:
		return "obtained"
	case errors.As(err, &re):
		return "ReplicaError"
	case errors.Is(err, lock.ErrNotObtained):
		return "ErrNotObtained"
	case errors.Is(err, lock.ErrNoAnswer), errors.Is(err, context.DeadlineExceeded):
		return "no answer"
	case strings.Contains(err.Error(), "READONLY"):
		return "READONLY"
	}
	return err.Error()
}

// isReplicaError reports whether err is a *single.ReplicaError.
func isReplicaError(err error) bool { return errors.As(err, new(*single.ReplicaError)) }

// checkFailover checks, in subtests, what every failover run must show:
// the Sentinels named the master, then promoted the replica, and the old
// master was the new one's replica once healed.
func checkFailover(t *testing.T, r failoverRun) {
	t.Helper()
	t.Run("the Sentinels name the master before the partition", func(t *testing.T) {
		if r.before != r.oldMaster {
			t.Errorf("master: got %q, want %s", r.before, r.oldMaster)
		}
	})
	t.Run("the Sentinels promote the replica", func(t *testing.T) {
		if r.newMaster != r.replica {
			t.Errorf("master after the partition: got %q, want the replica %s", r.newMaster, r.replica)
		}
	})
	t.Run("the old master is the new one's replica once healed", func(t *testing.T) {
		if r.demoted.IsZero() {
			t.Errorf("the old master's ROLE within 60 s of the heal: never slave of the new master, want it")
		}
	})
}

// TestSentinelSingleWithoutReplicas is the harness's must-find run "single
// without replicas across a failover": the master is isolated with client
// c1 from its replica, the Sentinels and client c2; the Sentinels promote
// the replica, c2 obtains the lock on it while c1 holds it on the old
// master, which never replicated c1's writes, and Check finds two holders
// within their validity at once, over each driver with a Sentinel client.
func TestSentinelSingleWithoutReplicas(t *testing.T) {
	requireFirewall(t)
	for _, drv := range sentinelDrivers {
		t.Run(drv, func(t *testing.T) {
			r := acrossFailover(t, drv)
			r.log(t)
			checkFailover(t, r)
			t.Run("two holders, c1 and c2, within their validity at once", func(t *testing.T) {
				if r.ValidityOverlaps == 0 {
					t.Errorf("validity overlaps: got 0, want some: a must-find run found nothing (%v)", r.Report)
				}
				for _, ex := range r.Examples {
					if ex.First.Holder == ex.Second.Holder {
						t.Errorf("overlap of %s with itself, want one of c1 and c2", ex.First.Holder)
					}
				}
			})
		})
	}
}

// TestSentinelSingleWithReplicas is the same run with
// single.WithReplicas(1, 100ms): c1's Obtains on the isolated master fail
// with a ReplicaError, for no replica acknowledges them, and so do c2's on
// the promoted replica, which has no replica of its own until the old
// master rejoins it: no two holders at once, and no lock from the partition
// until the old master, demoted, has synchronized with the new one, which
// the run measures.
func TestSentinelSingleWithReplicas(t *testing.T) {
	requireFirewall(t)
	for _, drv := range sentinelDrivers {
		t.Run(drv, func(t *testing.T) {
			r := acrossFailover(t, drv, single.WithReplicas(1, 100*time.Millisecond))
			r.log(t)
			checkFailover(t, r)
			// From a little after the partition, so that an Obtain whose
			// WAIT was answered just before it does not count.
			from := r.partitioned.Add(200 * time.Millisecond)
			t.Run("c1's Obtains on the isolated master fail with a ReplicaError", func(t *testing.T) {
				failed, obtained := r.counts("c1", from, r.healed, isReplicaError)
				if failed == 0 || obtained != 0 {
					t.Errorf("c1's Obtains from the partition to the heal: %d ReplicaErrors and %d locks, want some and none", failed, obtained)
				}
			})
			t.Run("c2's Obtains on the promoted replica fail with a ReplicaError", func(t *testing.T) {
				failed, obtained := r.counts("c2", r.promoted, r.healed, isReplicaError)
				if failed == 0 || obtained != 0 {
					t.Errorf("c2's Obtains from the promotion to the heal: %d ReplicaErrors and %d locks, want some and none", failed, obtained)
				}
			})
			t.Run("no two holders within their validity at once", func(t *testing.T) {
				if r.ValidityOverlaps != 0 {
					t.Errorf("got %v, want no validity overlap", r.Report)
				}
			})
			t.Run("an Obtain succeeds once healed", func(t *testing.T) {
				if r.obtainedAgain.IsZero() {
					t.Errorf("Obtains that succeeded within 60 s of the heal: got none, want one")
				}
			})
		})
	}
}

func TestStartSentinelsRefusesBadInput(t *testing.T) {
	// Nodes that no namespace backs: the checks come before any process.
	n := &Net{prefix: "jx"}
	a := &Node{Name: "a", IP: "10.77.0.1", ns: "jx-1", net: n}
	b := &Node{Name: "b", IP: "10.77.0.2", ns: "jx-2", net: n}
	n.nodes = []*Node{{Name: "switch", ns: "jx-sw", net: n}, a, b}
	o := &Node{Name: "o", IP: "10.77.0.1", ns: "jy-1", net: &Net{prefix: "jy"}}
	master := NewServer(a, t.TempDir())
	for _, c := range []struct {
		name      string
		nodes     []*Node
		master    *Server
		set       string
		replicas  int
		downAfter time.Duration
	}{
		{"no node", nil, master, "m", 0, time.Second},
		{"a nil node", []*Node{nil}, master, "m", 0, time.Second},
		{"a node of another Net", []*Node{o}, master, "m", 0, time.Second},
		{"a node twice", []*Node{b, b}, master, "m", 0, time.Second},
		{"a nil master", []*Node{b}, nil, "m", 0, time.Second},
		{"no name", []*Node{b}, master, "", 0, time.Second},
		{"a name of two words", []*Node{b}, master, "m n", 0, time.Second},
		{"replicas below 0", []*Node{b}, master, "m", -1, time.Second},
		{"down-after below a millisecond", []*Node{b}, master, "m", 0, time.Microsecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := StartSentinels(c.nodes, t.TempDir(), c.set, c.master, c.replicas, c.downAfter)
			if err == nil {
				s.Close()
				t.Fatalf("got nil, want an error")
			}
			if !strings.HasPrefix(err.Error(), "jepsen: ") {
				t.Errorf("got %q, want an error that begins with jepsen: ", err)
			}
		})
	}
}

func TestSentinelConnRefusesBadInput(t *testing.T) {
	node := &Node{Name: "c", IP: "10.77.0.1", ns: "jx-1", net: &Net{prefix: "jx"}}
	addrs := []string{"10.77.0.2:26379"}
	for _, c := range []struct {
		name, drv string
		dial      DialFunc
		addrs     []string
		set, want string
	}{
		{"redigo", "redigo", node.DialContext, addrs, "m", "redigo has no Sentinel client"},
		{"a driver that is not", "nope", node.DialContext, addrs, "m", `"nope": no such driver`},
		{"a nil dial", "goredis", nil, addrs, "m", "nil dial"},
		{"no Sentinel", "goredis", node.DialContext, nil, "m", "through 0 Sentinels"},
		{"no name", "goredis", node.DialContext, addrs, "", `master ""`},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, closer, err := SentinelConn(c.drv, c.dial, c.addrs, c.set)
			if err == nil {
				closer.Close()
				t.Fatalf("got a Conn %T, want an error", conn)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %q, want an error that says %q", err, c.want)
			}
		})
	}
}
