package setnxgetset_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
)

// TestWithoutScriptsConformance: the whole suite passes over every driver
// without scripts: on Redis 7.0 through transactions, on Valkey 8.1 with
// SET IFEQ (LOCKSMITH_REDIS_SERVER), on the embedded server with DELEX.
func TestWithoutScriptsConformance(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, real := redistest.Addr(t)
	matrix.Run(t, matrix.WithoutScripts(matrix.SetnxGetset(addr)), matrix.AtOnce(real))
}

// TestWithoutScriptsSendsNoScript: over every driver, every operation
// without scripts, a takeover of an expired legacy lock (which sets the
// safety TTL after its GETSET) and a refresh among them, sends no script
// (INFO commandstats); the refresh takes SET IFEQ where the server has it
// (Valkey 8.1 and later, Redis 8.4 and later) and a transaction where it
// does not (Redis 7.0), and the release a transaction (the real servers
// here have neither DELEX nor DELIFEQ).
func TestWithoutScriptsSendsNoScript(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	info, err := srv.Command(ctx, "INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"SET IFEQ": redistest.HasSetIfEq(info), "DELEX": false, "DELIFEQ": false}
	t.Logf("server: %s; want %v", redistest.Version(info), want)
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			conn := d.Conn(t, srv.Addr)
			s, err := setnxgetset.NewStrategy(driver.WithoutScripts(conn), setnxgetset.WithFormat(setnxgetset.Milliseconds), setnxgetset.WithSafetyTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			l := lock.New(s)
			key := conformance.Key(t)
			expired := setnxgetset.Milliseconds.Encode(time.Now().Add(-time.Hour), 0)
			if _, err := conn.SetNX(ctx, key, expired, 0); err != nil {
				t.Fatal(err)
			}
			lk, err := l.Obtain(ctx, key, time.Minute)
			if err != nil {
				t.Fatalf("Obtain of an expired legacy lock = %v, want it taken over", err)
			}
			if ttl, ok, err := conn.PTTL(ctx, key); err != nil || !ok || ttl <= time.Minute {
				t.Errorf("after the takeover, PTTL = %v, %v, %v; want the safety TTL, more than a minute", ttl, ok, err)
			}
			if err := lk.Refresh(ctx, time.Minute); err != nil {
				t.Errorf("Refresh = %v, want nil", err)
			}
			if _, err := lk.TTL(ctx); err != nil {
				t.Errorf("TTL = %v, want nil", err)
			}
			if st, err := l.Inspect(ctx, key); err != nil || !st.Held {
				t.Errorf("Inspect = %+v, %v; want held", st, err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release = %v, want nil", err)
			}
			if got := setnxgetset.Support(s); !maps.Equal(got, want) {
				t.Errorf("Support = %v, want %v", got, want)
			}
		})
	}
	if ran, err := srv.Scripts(ctx); err != nil || len(ran) > 0 {
		t.Errorf("INFO commandstats counts %v (%v), want no script sent", ran, err)
	}
}

// TestWithoutScriptsRefusesADriverThatCannotPin: NewStrategy refuses, with
// an *ArgumentError named "conn", a driver that cannot send commands of its
// choice over a pinned connection, which transactions need.
func TestWithoutScriptsRefusesADriverThatCannotPin(t *testing.T) {
	conn := struct{ driver.Conn }{goredis.New(redistest.GoRedis(t, redistest.ClosedAddr(t), 3))}
	_, err := setnxgetset.New(driver.WithoutScripts(conn))
	var ae *lock.ArgumentError
	if !errors.As(err, &ae) || ae.Name != "conn" {
		t.Errorf("New = %v, want an ArgumentError named conn", err)
	}
}

// TestWithoutScriptsMixedFleet: legacy clients, this strategy with scripts
// and without, in the same format, contend on the same keys with no
// overlap: the wire protocol that legacy clients see is the same.
func TestWithoutScriptsMixedFleet(t *testing.T) {
	addr, _ := redistest.Addr(t)
	sides := map[string][]func(context.Context, string) (func() error, error){}
	opts := []setnxgetset.Option{setnxgetset.WithFormat(setnxgetset.Milliseconds), setnxgetset.WithSafetyTTL(time.Minute)}
	for range 2 {
		legacy := legacyClient{rdb: redistest.GoRedis(t, addr, 2), ms: true, timeout: 10 * time.Second}
		sides["legacy"] = append(sides["legacy"], legacyWorker(legacy))
		scripted := newLocker(t, goredis.New(redistest.GoRedis(t, addr, 3)), opts...)
		sides["scripts"] = append(sides["scripts"], strategyWorker(scripted))
		plain := newLocker(t, driver.WithoutScripts(goredis.New(redistest.GoRedis(t, addr, 3))), opts...)
		sides["without scripts"] = append(sides["without scripts"], strategyWorker(plain))
	}
	count := contend(t, keys(t, 1), 600, sides)
	for side, n := range count {
		if n == 0 {
			t.Errorf("acquisitions of %s = 0, want some", side)
		}
	}
}
