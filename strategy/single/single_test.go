package single_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

func TestConformance(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	addr, real := redistest.Addr(t)
	matrix.Run(t, matrix.Single(addr), matrix.AtOnce(real))
	t.Run("unix", func(t *testing.T) {
		t.Parallel()
		matrix.Run(t, matrix.SingleUnix(redistest.StartUnix(t).Socket), 0)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		matrix.Run(t, matrix.SingleCluster(redistest.StartCluster(t, 3).Addrs()), 0)
	})
}

// TestTTLTooShort: a TTL that the drift allowance (TTL × 0.01 + 2ms) uses up
// would give a lock whose ValidUntil has already passed. Obtain, Refresh and
// Do refuse it with an *ArgumentError named ttl, before anything is
// written; 3ms is the shortest whole-millisecond TTL that is accepted.
func TestTTLTooShort(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			conn := d.Conn(t, srv.Addr)
			l, err := single.New(conn)
			if err != nil {
				t.Fatal(err)
			}
			key := conformance.Key(t)
			for _, ttl := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 2020 * time.Microsecond} {
				lk, err := l.Obtain(ctx, key, ttl)
				if !isShortTTL(err) {
					t.Errorf("Obtain(%v) = %v, %v; want an ArgumentError named ttl that names the limit", ttl, lk, err)
				}
				if _, ok, err := conn.Get(ctx, key); ok || err != nil {
					t.Errorf("after Obtain(%v): the key exists = %v (%v), want false", ttl, ok, err)
				}
				ran := false
				err = lock.Do(ctx, l, key, ttl, func(context.Context) error { ran = true; return nil })
				if !isShortTTL(err) || ran {
					t.Errorf("Do(%v) = %v, fn ran = %v; want an ArgumentError named ttl, and fn not run", ttl, err, ran)
				}
			}
			if lk, err := l.Obtain(ctx, key, 3*time.Millisecond); err != nil {
				t.Errorf("Obtain(3ms) = %v, %v; want a lock", lk, err)
			}

			lk, err := l.Obtain(ctx, key+":refresh", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Release(ctx)
			if err := lk.Refresh(ctx, 2*time.Millisecond); !isShortTTL(err) {
				t.Errorf("Refresh(2ms) = %v, want an ArgumentError named ttl that names the limit", err)
			}
			if ttl, err := lk.TTL(ctx); err != nil || ttl < 50*time.Second {
				t.Errorf("TTL after the refused Refresh = %v, %v; want the minute still there", ttl, err)
			}
		})
	}
}

func isShortTTL(err error) bool {
	var ae *lock.ArgumentError
	return errors.As(err, &ae) && ae.Name == "ttl" && strings.Contains(ae.Reason, "more than 2.02ms") && strings.Contains(ae.Reason, "TTL × 0.01 + 2ms")
}

// TestAfterARestart: once the server restarted empty, the first Refresh,
// TTL or Release of a lock reports ErrExpired over every driver, with
// scripts and without, not the EOF of the connection the old server
// closed.
func TestAfterARestart(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	for _, mode := range []struct {
		name string
		mark func(driver.Conn) driver.Conn
	}{{"", withScripts}, {"without-scripts/", driver.WithoutScripts}} {
		for _, d := range redistest.Drivers() {
			afterARestart(t, ctx, srv, mode.name+d.Name, mode.mark(d.Conn(t, srv.Addr)))
		}
	}
}

// afterARestart runs TestAfterARestart's operations over conn, as
// subtests named after name.
func afterARestart(t *testing.T, ctx context.Context, srv *redistest.Server, name string, conn driver.Conn) {
	l, err := single.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		name string
		call func(*lock.Lock) error
	}{
		{"Refresh", func(lk *lock.Lock) error { return lk.Refresh(ctx, time.Minute) }},
		{"TTL", func(lk *lock.Lock) error { _, err := lk.TTL(ctx); return err }},
		{"Release", func(lk *lock.Lock) error { return lk.Release(ctx) }},
	} {
		t.Run(name+"/"+op.name, func(t *testing.T) {
			lk, err := l.Obtain(ctx, conformance.Key(t), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Restart(); err != nil {
				t.Fatalf("restart: %v", err)
			}
			if err := op.call(lk); !errors.Is(err, lock.ErrExpired) {
				t.Errorf("%s after a restart = %v, want ErrExpired", op.name, err)
			}
		})
	}
}
