package single_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestWithoutScriptsConformance: the whole suite passes over every driver
// without scripts: on Redis 7.0 through transactions, on Valkey 8.1 with
// SET IFEQ (LOCKSMITH_REDIS_SERVER), on the embedded server with DELEX.
func TestWithoutScriptsConformance(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, real := redistest.Addr(t)
	matrix.Run(t, matrix.WithoutScripts(matrix.Single(addr)), matrix.AtOnce(real))
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		redistest.RequireBinary(t)
		matrix.Run(t, matrix.WithoutScripts(matrix.SingleCluster(redistest.StartCluster(t, 3).Addrs())), 0)
	})
}

// withScripts leaves a Conn as it is: the mode with scripts, beside
// driver.WithoutScripts.
func withScripts(c driver.Conn) driver.Conn { return c }

// noScriptLocker returns a Locker over conn marked driver.WithoutScripts,
// and its Strategy.
func noScriptLocker(t *testing.T, conn driver.Conn) (*lock.Locker, *single.Strategy) {
	t.Helper()
	s, err := single.NewStrategy(driver.WithoutScripts(conn))
	if err != nil {
		t.Fatal(err)
	}
	return lock.New(s), s
}

// TestWithoutScriptsDetection: over every driver, a Refresh takes SET
// IFEQ where the server has it (Valkey 8.1 and later, Redis 8.4 and later)
// and a transaction where it does not (Redis 7.0); the real servers here
// have neither DELEX nor DELIFEQ, so a Release takes a transaction; and no
// call sends a script (INFO commandstats).
func TestWithoutScriptsDetection(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	info, err := srv.Command(ctx, "INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"SET IFEQ": redistest.HasSetIfEq(info), "DELEX": false, "DELIFEQ": false}
	t.Logf("server: %s; want %v", redistest.Version(info), want)
	type conn struct {
		name string
		open func(t *testing.T) driver.Conn
	}
	var conns []conn
	for _, d := range redistest.Drivers() {
		conns = append(conns, conn{d.Name, func(t *testing.T) driver.Conn { return d.Conn(t, srv.Addr) }})
	}
	cluster := redistest.StartCluster(t, 3).Addrs() // a Cluster client sends the conditional commands to the key's master
	conns = append(conns,
		conn{"goredis-cluster", func(t *testing.T) driver.Conn { return goredis.New(redistest.GoRedisCluster(t, cluster)) }},
		conn{"rueidis-cluster", func(t *testing.T) driver.Conn { return rueidisdriver.New(redistest.RueidisCluster(t, cluster)) }})
	for _, c := range conns {
		t.Run(c.name, func(t *testing.T) {
			l, s := noScriptLocker(t, c.open(t))
			lk, err := l.Obtain(ctx, conformance.Key(t), time.Minute)
			if err != nil {
				t.Fatalf("Obtain = %v, want a lock", err)
			}
			if err := lk.Refresh(ctx, time.Minute); err != nil {
				t.Errorf("Refresh = %v, want nil", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release = %v, want nil", err)
			}
			if got := single.Support(s); !maps.Equal(got, want) {
				t.Errorf("Support = %v, want %v", got, want)
			}
		})
	}
	sentNoScript(t, srv)
}

// sentNoScript checks that srv's INFO commandstats counts no script
// command.
func sentNoScript(t *testing.T, srv *redistest.Server) {
	t.Helper()
	if ran, err := srv.Scripts(context.Background()); err != nil || len(ran) > 0 {
		t.Errorf("INFO commandstats counts %v (%v), want no script sent", ran, err)
	}
}

// TestWithoutScriptsDELEX: on the embedded server (miniredis, which has
// DELEX … IFEQ and neither SET … IFEQ nor DELIFEQ), a Release sends DELEX,
// and tells a lock that expired from one that another owner took. It
// skips in FIPS 140-only mode, where the embedded server cannot run.
func TestWithoutScriptsDELEX(t *testing.T) {
	srv, err := locktest.StartServer()
	if errors.Is(err, locktest.ErrFIPSOnly) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("locktest.StartServer: got error %v, want nil", err)
	}
	t.Cleanup(srv.Close)
	ctx := context.Background()
	for _, d := range []struct {
		name string
		conn driver.Conn
	}{{"goredis", goredis.New(srv.GoRedisClient())}, {"redigo", redigo.New(srv.RedigoPool())}} {
		l, s := noScriptLocker(t, d.conn)
		t.Run(d.name+"/release", func(t *testing.T) {
			lk, err := l.Obtain(ctx, conformance.Key(t), time.Minute)
			if err != nil {
				t.Fatalf("Obtain = %v, want a lock", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release = %v, want nil", err)
			}
			if got := single.Support(s); !got["DELEX"] {
				t.Errorf("Support = %v, want DELEX true", got)
			}
			if _, ok, err := d.conn.Get(ctx, lk.Key()); ok || err != nil {
				t.Errorf("after Release: the key exists = %v (%v), want false", ok, err)
			}
		})
		for _, c := range []struct {
			name  string
			after func(key string) error
			want  error
		}{
			{"expired", func(key string) error { _, err := d.conn.Del(ctx, key); return err }, lock.ErrExpired},
			{"taken", func(key string) error { _, _, err := d.conn.GetSet(ctx, key, "another"); return err }, lock.ErrTaken},
		} {
			t.Run(d.name+"/release when "+c.name, func(t *testing.T) {
				lk, err := l.Obtain(ctx, conformance.Key(t), time.Minute)
				if err != nil {
					t.Fatalf("Obtain = %v, want a lock", err)
				}
				if err := c.after(lk.Key()); err != nil {
					t.Fatal(err)
				}
				if err := lk.Release(ctx); !errors.Is(err, c.want) {
					t.Errorf("Release = %v, want %v", err, c.want)
				}
			})
		}
	}
}

// TestWithoutScriptsRefusals: NewStrategy refuses, with an *ArgumentError
// named conn, a driver that cannot send a command of its choice
// (driver.Commander) over a pinned connection.
func TestWithoutScriptsRefusals(t *testing.T) {
	conn := struct{ driver.Conn }{redistest.Drivers()[0].Conn(t, redistest.ClosedAddr(t))}
	_, err := single.New(driver.WithoutScripts(conn))
	var ae *lock.ArgumentError
	if !errors.As(err, &ae) || ae.Name != "conn" {
		t.Errorf("New = %v, want an ArgumentError named conn", err)
	}
}

// TestWithoutScriptsContendsWithScripts: a Locker that runs scripts and
// one that does not, over different drivers, take turns on the same keys:
// no two holders are ever inside at once.
func TestWithoutScriptsContendsWithScripts(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	drivers := redistest.Drivers()
	scripted, err := single.New(drivers[1].Conn(t, srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := noScriptLocker(t, drivers[2].Conn(t, srv.Addr))
	workers, each := 4, 25
	if redistest.Full() {
		each = 250
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := conformance.Key(t)
	var d conformance.Detector
	var wg sync.WaitGroup
	for i := range workers {
		l := []*lock.Locker{scripted, plain}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := obtainAndHold(ctx, l, key, &d); err != nil {
					t.Errorf("worker %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d goroutines, %d acquisitions, %d overlaps", workers, d.Entries(), d.Overlaps())
	if got, want := d.Entries(), int64(workers*each); got != want {
		t.Errorf("entries = %d, want %d", got, want)
	}
	if got := d.Overlaps(); got != 0 {
		t.Errorf("overlaps = %d, want 0", got)
	}
}

// obtainAndHold obtains key, waiting, holds it inside d briefly, and
// releases it.
func obtainAndHold(ctx context.Context, l *lock.Locker, key string, d *conformance.Detector) error {
	lk, err := l.Obtain(ctx, key, 10*time.Second, lock.WithRetry(lock.Linear(time.Millisecond)))
	if err != nil {
		return fmt.Errorf("Obtain = %w, want a lock", err)
	}
	d.Hold(100 * time.Microsecond)
	if err := lk.Release(ctx); err != nil {
		return fmt.Errorf("Release = %w, want nil", err)
	}
	return nil
}

// TestWithoutScriptsMulti: over every driver, a lock of several keys
// without scripts is obtained (fenced, and not obtained while one key is
// held), refreshed, read and released, and no call sends a script (INFO
// commandstats).
func TestWithoutScriptsMulti(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			conn := d.Conn(t, srv.Addr)
			l, _ := noScriptLocker(t, conn)
			k := conformance.Key(t)
			keys := []string{k + ":a", k + ":b", k + ":c"}
			lk, err := l.ObtainMany(ctx, keys, time.Minute, lock.WithFencing())
			if err != nil {
				t.Fatalf("ObtainMany = %v, want a lock", err)
			}
			for _, key := range keys {
				if n, ok := lk.FenceOf(key); !ok || n <= 0 {
					t.Errorf("FenceOf(%s) = %d, %v; want a positive token", key, n, ok)
				}
			}
			if _, err := l.ObtainMany(ctx, []string{keys[2], k + ":d"}, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("ObtainMany of a held key = %v, want ErrNotObtained", err)
			}
			if err := lk.Refresh(ctx, time.Minute); err != nil {
				t.Errorf("Refresh = %v, want nil", err)
			}
			if ttl, err := lk.TTL(ctx); err != nil || ttl <= 0 {
				t.Errorf("TTL = %v, %v; want a positive TTL", ttl, err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release = %v, want nil", err)
			}
			for _, key := range append(keys, k+":d") {
				if _, ok, err := conn.Get(ctx, key); ok || err != nil {
					t.Errorf("after Release: %s exists = %v (%v), want false", key, ok, err)
				}
			}
		})
	}
	sentNoScript(t, srv)
}
