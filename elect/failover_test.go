package elect_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// failovers is how many Sentinel failovers TestSentinelFailover measures.
var failovers = flag.Int("failover.rounds", 3, "how many Sentinel failovers TestSentinelFailover measures, a deployment of its own each")

// replicaWait is WithReplicas' timeout in TestSentinelFailover: WAIT
// returns as soon as the replica acknowledges, so it only bounds the wait
// while the new master has none yet.
const replicaWait = 10 * time.Second

// TestSentinelFailover measures how long a Sentinel failover leaves the
// service without a leader whose lease the new master confirmed. Each
// round runs a deployment of its own: a master with one replica and three
// Sentinels (which take the master for down after 1s), and two candidates,
// each an Elector with the default lease (15s) over a go-redis
// FailoverClient of its own through single.New with
// single.WithReplicas(1, replicaWait), campaigning with Run, the leader's
// work running until its term ends. A random time into the leader's
// refresh cycle, it kills the master (SIGKILL); once Sentinel names the
// new master, it starts a replica of it, in the place of the old master
// that a supervisor would restart as one (WithReplicas(1) confirms
// nothing on a master without a replica). From the kill it measures when
// Sentinel named the new master, and when the service had a leader again
// confirmed there: the first refresh sent after the kill that succeeded
// (it can only have reached the new master), or the first election after
// it, whichever came first; and whether the term changed. It logs the
// figures of each round, and their p50 and max, and asserts no time; only
// that a leader is confirmed again, within a minute, in a term no older.
// It runs with LOCKSMITH_FULL=1; -failover.rounds sets the rounds.
func TestSentinelFailover(t *testing.T) {
	redistest.RequireFull(t, "a Sentinel failover under an elected leader")
	redistest.RequireBinary(t)
	var named, confirmed []time.Duration
	changed := 0
	for i := range *failovers {
		t.Run(fmt.Sprintf("round-%d", i+1), func(t *testing.T) {
			r := failover(t)
			named, confirmed = append(named, r.named), append(confirmed, r.confirmed)
			if r.before != r.after {
				changed++
			}
			t.Logf("Sentinel named the new master %v after the kill, its replica was online at %v; a leader was confirmed on it at %v, by %s; term %d before, %d after",
				ms(r.named), ms(r.replica), ms(r.confirmed), r.by, r.before, r.after)
		})
	}
	if len(confirmed) == *failovers && *failovers > 0 {
		t.Logf("%d failovers: Sentinel named the new master after p50 %v, max %v; a leader was confirmed on it after p50 %v, max %v; the term changed in %d of %d",
			len(named), ms(median(named)), ms(slices.Max(named)), ms(median(confirmed)), ms(slices.Max(confirmed)), changed, len(confirmed))
	}
}

// failoverRound is what a round of TestSentinelFailover measured, from the
// kill of the master.
type failoverRound struct {
	named, replica, confirmed time.Duration // Sentinel named the new master; its replica was online; a leader was confirmed on it
	by                        string        // what confirmed it: a refresh, or an election
	before, after             int64         // the term before the kill, and the confirmed leader's
}

// failover runs one round of TestSentinelFailover.
func failover(t *testing.T) failoverRound {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang detector
	defer cancel()
	master := redistest.Start(t, 1)[0]
	redistest.StartReplica(t, master.Addr)
	sentinels := redistest.StartSentinels(t, master, 3)
	addrs := make([]string, len(sentinels))
	for i, s := range sentinels {
		addrs[i] = s.Addr
	}

	// Every lease confirmed, and when: an election, or a refresh that
	// succeeded, with the time it was sent.
	type confirmation struct {
		by         string
		term       int64
		sent, done time.Time
	}
	var (
		mu      sync.Mutex
		log     []confirmation
		terms   = map[string]int64{} // each candidate's term, by identity
		changes = make(chan struct{}, 1)
		record  = func(c confirmation) {
			mu.Lock()
			log = append(log, c)
			mu.Unlock()
			select {
			case changes <- struct{}{}:
			default:
			}
		}
	)
	key := "failover"
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, id := range []string{"a", "b"} {
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.MasterName, SentinelAddrs: addrs,
			DialTimeout: time.Second, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		l, err := single.New(goredis.New(c), single.WithReplicas(1, replicaWait))
		if err != nil {
			t.Fatal(err)
		}
		l = l.With(lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			sent := time.Now()
			err := next(ctx)
			if e.Op == "refresh" && err == nil {
				mu.Lock()
				term := terms[id]
				mu.Unlock()
				record(confirmation{"a refresh of " + id, term, sent, time.Now()})
			}
			return err
		}}))
		e, err := elect.New(l, key, elect.WithIdentity(id), elect.WithHooks(&elect.Hooks{
			Elected: func(_ context.Context, term *elect.Term, _ time.Duration) {
				mu.Lock()
				terms[id] = term.Number()
				mu.Unlock()
				record(confirmation{"the election of " + id, term.Number(), term.Elected(), term.Elected()})
			},
		}))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = e.Run(runCtx, func(ctx context.Context, _ *elect.Term) error {
				<-ctx.Done() // the leader's work, until its term ends
				return nil
			})
		}()
	}

	// The first election, then a random time into the refresh cycle (a
	// third of the lease).
	first := func() (confirmation, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(log) == 0 {
			return confirmation{}, false
		}
		return log[0], true
	}
	for {
		if _, ok := first(); ok {
			break
		}
		select {
		case <-changes:
		case <-ctx.Done():
			t.Fatal("no leader elected before the failover")
		}
	}
	time.Sleep(rand.N(5 * time.Second))
	mu.Lock()
	before := log[len(log)-1].term
	mu.Unlock()

	killed := time.Now()
	master.Kill()
	newMaster := redistest.WaitFailover(t, sentinels[0], master.Addr)
	r := failoverRound{named: time.Since(killed), before: before}
	redistest.StartReplica(t, newMaster)
	r.replica = time.Since(killed)

	// The first confirmation sent after the kill.
	for {
		mu.Lock()
		i := slices.IndexFunc(log, func(c confirmation) bool { return c.sent.After(killed) })
		var c confirmation
		if i >= 0 {
			c = log[i]
		}
		mu.Unlock()
		if i >= 0 {
			r.confirmed, r.by, r.after = c.done.Sub(killed), c.by, c.term
			break
		}
		select {
		case <-changes:
		case <-ctx.Done():
			t.Fatalf("no leader confirmed on the new master %s: %v", newMaster, ctx.Err())
		}
	}
	if r.after < r.before {
		t.Errorf("the leader confirmed after the failover holds term %d, older than %d before it", r.after, r.before)
	}
	if !strings.HasPrefix(r.by, "a refresh") && r.after == r.before {
		t.Errorf("an election after the failover kept term %d: want a new term", r.after)
	}
	return r
}

// ms rounds d to the millisecond.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// median returns the median of ds.
func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	if n := len(ds); n%2 == 0 {
		return (ds[n/2-1] + ds[n/2]) / 2
	}
	return ds[len(ds)/2]
}
