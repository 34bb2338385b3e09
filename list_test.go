package lock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
	"github.com/locksmith-go/lock/strategy/single"
)

// listGroup is the combinations of one strategy that TestList lists, and
// what its locks keep beside their keys.
type listGroup struct {
	name   string
	combos []matrix.Combo
	queues bool // its waiters queue: a waiter shows in Waiters, and its queue's keys exist
	shared bool // it takes semaphores and read-write locks
}

// TestList checks that Locker.List finds exactly the locks held under a
// prefix, on each strategy over each driver, on a server, behind a
// Sentinel (single) and on a Cluster: neither free keys, nor the companion
// keys of the locks (queues, fencing counters, shared locks' state), nor
// keys of another type, nor keys outside the prefix, which holds glob
// metacharacters. (redigo has no
// Cluster client.)
func TestList(t *testing.T) {
	addr, real := redistest.Addr(t)
	groups := []listGroup{
		{"single", matrix.Single(addr), true, true},
		{"single-without-scripts", matrix.WithoutScripts(matrix.Single(addr)), false, false},
		{"setnx-getset", matrix.SetnxGetset(addr), false, false},
	}
	if real || redistest.Required() {
		servers := redistest.Start(t, 3)
		addrs := []string{servers[0].Addr, servers[1].Addr, servers[2].Addr}
		cluster := redistest.StartCluster(t, 3).Addrs()
		legacyRueidis := matrix.SetnxGetsetCluster(cluster)
		legacyRueidis.Name = "rueidis-cluster"
		legacyRueidis.Harness.NewLocker = func(t *testing.T) *lock.Locker {
			l, err := setnxgetset.New(rueidisdriver.New(redistest.RueidisCluster(t, cluster)),
				setnxgetset.WithFormat(setnxgetset.Milliseconds), setnxgetset.WithSafetyTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		legacyRueidis.Harness.Conns = func(t *testing.T) []driver.Conn {
			return []driver.Conn{rueidisdriver.New(redistest.RueidisCluster(t, cluster))}
		}
		groups = append(groups,
			listGroup{"single-sentinel", sentinelCombos(redistest.StartSentinel(t, servers[0]).Addr), true, true},
			listGroup{"redlock", matrix.Redlock(addrs), false, false},
			listGroup{"single-cluster", matrix.SingleCluster(cluster), true, true},
			listGroup{"setnx-getset-cluster", []matrix.Combo{matrix.SetnxGetsetCluster(cluster), legacyRueidis}, false, false})
	} else {
		t.Log("redis-server not found: Redlock and the Cluster are left out")
	}
	for _, g := range groups {
		for _, c := range g.combos {
			t.Run(g.name+"/"+c.Name, func(t *testing.T) {
				t.Parallel()
				testList(t, g, c)
			})
		}
	}
}

// sentinelCombos returns single over a go-redis failover client and a
// rueidis client of the Sentinel at sentinel.
func sentinelCombos(sentinel string) []matrix.Combo {
	combo := func(name string, open func(t *testing.T) driver.Conn) matrix.Combo {
		return matrix.Combo{Name: name, Harness: conformance.Harness{
			NewLocker: func(t *testing.T) *lock.Locker {
				l, err := single.New(open(t))
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
			Conns: func(t *testing.T) []driver.Conn { return []driver.Conn{open(t)} },
		}}
	}
	return []matrix.Combo{
		combo("goredis-failover", func(t *testing.T) driver.Conn {
			c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.MasterName, SentinelAddrs: []string{sentinel}, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			return goredis.New(c)
		}),
		combo("rueidis-sentinel", func(t *testing.T) driver.Conn {
			return rueidisdriver.New(redistest.RueidisClient(t, rueidis.ClientOption{
				InitAddress: []string{sentinel}, Sentinel: rueidis.SentinelOption{MasterSet: redistest.MasterName}}))
		}),
	}
}

// testList takes locks under a prefix of c's own and checks what List
// finds.
func testList(t *testing.T, g listGroup, c matrix.Combo) {
	ctx := context.Background()
	l := c.Harness.NewLocker(t)
	conns := c.Harness.Conns(t)
	// The prefix has glob metacharacters: unescaped, it would match
	// outside, too.
	prefix := "list[ab]*-" + g.name + "/" + c.Name + ":"
	outside := "lista-" + g.name + "/" + c.Name + ":held"
	const ttl = time.Minute
	tokens := map[string]string{} // the held keys under the prefix, and their tokens
	take := func(key string, opts ...lock.Option) *lock.Lock {
		t.Helper()
		lk, err := l.Obtain(ctx, key, ttl, append(opts, lock.WithRetry(lock.NoRetry()))...)
		if err != nil {
			t.Fatalf("Obtain %q: %v", key, err)
		}
		t.Cleanup(func() { _ = lk.Release(context.Background()) })
		return lk
	}
	fenced := func(key string) *lock.Lock {
		t.Helper()
		lk, err := l.Obtain(ctx, key, ttl, lock.WithFencing())
		if errors.As(err, new(*lock.ArgumentError)) { // the strategy cannot fence
			return take(key)
		}
		if err != nil {
			t.Fatalf("Obtain %q with fencing: %v", key, err)
		}
		t.Cleanup(func() { _ = lk.Release(context.Background()) })
		return lk
	}
	// Keys spread over the Cluster's masters (each of the three has two or
	// three of them), and a key with a hash tag,
	// whose companion keys (its queue, fencing counter) are under the
	// prefix too.
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		var opts []lock.Option
		if c.Harness.Skip["MetadataRoundTrips"] == "" {
			opts = append(opts, lock.WithMetadata("host=web-"+k))
		}
		tokens[prefix+k] = take(prefix+k, opts...).Token()
	}
	tagged := prefix + "{t}"
	tokens[tagged] = fenced(tagged).Token()
	free := fenced(prefix + "{free}")
	if err := free.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	take(outside)
	if g.shared {
		tokens[prefix+"{sem}"] = take(prefix+"{sem}", lock.WithPermits(2)).Token()
		tokens[prefix+"{rw}"] = take(prefix+"{rw}", lock.WithRead()).Token()
	}
	for _, conn := range conns {
		if _, err := driver.Do(ctx, conn, "HSET", prefix+"{t}:hash", "field", "value"); err != nil {
			t.Fatalf("HSET: %v", err)
		}
		t.Cleanup(func() { _, _ = driver.Do(context.Background(), conn, "DEL", prefix+"{t}:hash") })
	}
	if g.queues {
		wctx, cancel := context.WithCancel(ctx)
		waited := make(chan struct{})
		go func() {
			defer close(waited)
			if lk, err := l.Obtain(wctx, tagged, ttl, lock.WithRetry(lock.Linear(50*time.Millisecond))); err == nil {
				_ = lk.Release(context.Background())
			}
		}()
		t.Cleanup(func() { cancel(); <-waited })
		redistest.Eventually(t, "a waiter in the queue of "+tagged, func(ctx context.Context) bool {
			st, err := l.Inspect(ctx, tagged)
			return err == nil && st.Waiters == 1
		})
	}

	if g.shared { // and so fences and queues
		for _, k := range []string{tagged + ":fence", tagged + ":q", tagged + ":w", prefix + "{free}:fence", prefix + "{sem}:shared"} {
			if n, err := driver.Do(ctx, conns[0], "EXISTS", k); n != int64(1) || err != nil {
				t.Fatalf("EXISTS %s = %v, %v; want 1: the companion key that List must skip", k, n, err)
			}
		}
	}

	t.Run("every held lock under the prefix", func(t *testing.T) {
		got, err := l.List(ctx, prefix, 100)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var keys []string
		for _, h := range got {
			keys = append(keys, h.Key)
		}
		want := slices.Sorted(func(yield func(string) bool) {
			for k := range tokens {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(keys, want) {
			t.Fatalf("List = %q, want %q", keys, want)
		}
		for _, h := range got {
			switch st := h.State; {
			case !st.Held || st.TTL == 0:
				t.Errorf("%s: Held %v, TTL %v; want held, with a TTL", h.Key, st.Held, st.TTL)
			case st.Permits == 0 && !st.ReadWrite && st.Fingerprint != strategy.Fingerprint(tokens[h.Key]):
				t.Errorf("%s: Fingerprint %q, want the holder's", h.Key, st.Fingerprint)
			case strings.HasSuffix(h.Key, ":a") && st.Metadata != "host=web-a" && c.Harness.Skip["MetadataRoundTrips"] == "":
				t.Errorf("%s: Metadata %q, want %q", h.Key, st.Metadata, "host=web-a")
			case st.Permits == 0 && !st.ReadWrite && st.HeldFor <= 0 && c.Harness.Skip["MetadataRoundTrips"] == "":
				t.Errorf("%s: HeldFor %v, want it positive: its Locker stamped the value", h.Key, st.HeldFor)
			}
		}
		if g.queues {
			i := slices.IndexFunc(got, func(h lock.Listed) bool { return h.Key == tagged })
			if w := got[i].State.Waiters; w != 1 {
				t.Errorf("%s: Waiters %d, want 1", tagged, w)
			}
		}
	})

	t.Run("at most limit", func(t *testing.T) {
		got, err := l.List(ctx, prefix, 3)
		if err != nil || len(got) != 3 {
			t.Fatalf("List with limit 3 = %d locks, %v; want 3, nil", len(got), err)
		}
		for _, h := range got {
			if _, ok := tokens[h.Key]; !ok {
				t.Errorf("List with limit 3 listed %q, which is no lock held under the prefix", h.Key)
			}
		}
	})
}

func TestListErrors(t *testing.T) {
	ctx := context.Background()

	t.Run("a strategy that cannot list", func(t *testing.T) {
		_, err := lock.New(newFake()).List(ctx, "p:", 10)
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("List = %v, want an error matching errors.ErrUnsupported", err)
		}
	})

	t.Run("a limit below 1", func(t *testing.T) {
		var ae *lock.ArgumentError
		if _, err := lock.New(newFake()).List(ctx, "p:", 0); !errors.As(err, &ae) || ae.Name != "limit" {
			t.Errorf("List with limit 0 = %v, want an *ArgumentError named limit", err)
		}
	})

	addr, real := redistest.Addr(t)

	t.Run("a driver that sends no commands of its choice", func(t *testing.T) {
		l, err := single.New(bare{goredis.New(redistest.GoRedis(t, addr, 3))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.List(ctx, "p:", 10); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("List = %v, want an error matching errors.ErrUnsupported", err)
		}
	})

	t.Run("a go-redis Ring", func(t *testing.T) {
		if !real {
			t.Skip("redis-server not found: a Ring needs two servers")
		}
		servers := redistest.Start(t, 2)
		l, err := single.New(goredis.New(redistest.GoRedisRing(t, servers[0].Addr, servers[1].Addr)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.List(ctx, "p:", 10); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("List = %v, want an error matching errors.ErrUnsupported", err)
		}
	})
}

// bare is a driver.Conn with none of the optional interfaces.
type bare struct{ driver.Conn }

// TestListRedlock checks that Redlock's List passes over a node that does
// not answer while N − quorum + 1 nodes do, fails when fewer do, and skips
// the restart guard's record.
func TestListRedlock(t *testing.T) {
	if _, real := redistest.Addr(t); !real {
		t.Skip("redis-server not found: Redlock needs real servers")
	}
	ctx := context.Background()
	servers := redistest.Start(t, 2)
	conn := func(addr string) driver.Conn { return goredis.New(redistest.GoRedis(t, addr, 3)) }
	closed := redistest.ClosedAddrs(t, 2)

	t.Run("one node of three down", func(t *testing.T) {
		l, err := redlock.New([]driver.Conn{conn(closed[0]), conn(servers[0].Addr), conn(servers[1].Addr)})
		if err != nil {
			t.Fatal(err)
		}
		listsOnly(t, l, "listdown:", "listdown:a")
	})

	t.Run("two nodes of three down", func(t *testing.T) {
		l, err := redlock.New([]driver.Conn{conn(closed[0]), conn(servers[0].Addr), conn(closed[1])})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.List(ctx, "listdown:", 10); err == nil || !strings.Contains(err.Error(), closed[0]) || !strings.Contains(err.Error(), closed[1]) {
			t.Errorf("List = %v, want an error that names both nodes down", err)
		}
	})

	t.Run("the restart guard's record", func(t *testing.T) {
		conns := []driver.Conn{conn(servers[0].Addr), conn(servers[1].Addr)}
		for _, c := range conns { // seeded, so that the nodes grant at once
			if _, err := driver.Do(ctx, c, "SET", "locksmith:redlock:up-since", "0"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = driver.Do(context.Background(), c, "DEL", "locksmith:redlock:up-since") })
		}
		l, err := redlock.New(conns, redlock.WithRestartGuard(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		listsOnly(t, l, "locksmith:", "locksmith:a")
	})
}

// listsOnly checks that l lists key alone under prefix once it holds it.
func listsOnly(t *testing.T, l *lock.Locker, prefix, key string) {
	t.Helper()
	ctx := context.Background()
	lk, err := l.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	t.Cleanup(func() { _ = lk.Release(context.Background()) })
	got, err := l.List(ctx, prefix, 10)
	if err != nil || len(got) != 1 || got[0].Key != key {
		t.Errorf("List(%q) = %v, %v; want %s alone, nil", prefix, got, err, key)
	}
}
