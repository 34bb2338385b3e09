package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// trail records what hooks saw, in order.
type trail struct {
	mu    sync.Mutex
	lines []string
}

func (tr *trail) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

func (tr *trail) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.lines, " ")
}

// recorder returns hooks named name that add every interception to tr.
func recorder(tr *trail, name string) *lock.Hooks {
	return &lock.Hooks{
		Obtain: func(ctx context.Context, e lock.Event, next func(context.Context) (*lock.Lock, error)) (*lock.Lock, error) {
			tr.add("%s:%s(", name, e.Op)
			lk, err := next(ctx)
			tr.add(")%s", name)
			return lk, err
		},
		Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			tr.add("%s:attempt%d(", name, e.Attempt)
			err := next(ctx)
			tr.add(")%s", name)
			return err
		},
		Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			tr.add("%s:%s(", name, e.Op)
			err := next(ctx)
			tr.add(")%s", name)
			return err
		},
		Node: func(_ context.Context, e lock.Event) { tr.add("%s:node:%s=%s", name, e.Node, e.Outcome) },
		Ended: func(e lock.Event) {
			tr.add("%s:ended:%v", name, e.Err != nil)
		},
	}
}

// nodeFake is a fakeStrategy that reports nodes, as a multi-node strategy
// does.
type nodeFake struct{ *fakeStrategy }

func (nodeFake) ReportsNodes() bool { return true }

func TestHooks(t *testing.T) {
	ctx := context.Background()

	t.Run("hooks wrap Obtain and each attempt, outermost first", func(t *testing.T) {
		var tr trail
		f := newFake()
		f.hold("k", "other")
		_, err := lock.New(f).Obtain(ctx, "k", time.Minute,
			lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 2)),
			lock.WithHooks(recorder(&tr, "a")), lock.WithHooks(recorder(&tr, "b")))
		if !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("Obtain = %v, want ErrNotObtained", err)
		}
		want := "a:obtain( b:obtain( a:attempt1( b:attempt1( )b )a a:attempt2( b:attempt2( )b )a )b )a"
		if got := tr.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})

	t.Run("Op hooks wrap Refresh, TTL and Release, and Ended runs once", func(t *testing.T) {
		var tr trail
		lk := obtain(t, newFake(), "k", lock.WithHooks(recorder(&tr, "a")))
		_ = lk.Refresh(ctx, time.Minute)
		_, _ = lk.TTL(ctx)
		_ = lk.Release(ctx)
		_ = lk.Release(ctx) // already released: no operation, no second end
		want := "a:obtain( a:attempt1( )a )a a:refresh( )a a:ttl( )a a:release( )a a:ended:false"
		if got := tr.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})

	t.Run("hooks left nil are skipped, and the others nest in order", func(t *testing.T) {
		var tr trail
		m := recorder(&tr, "m")
		m.Obtain, m.Op, m.Ended = nil, nil, nil // an Attempt hook alone
		lk := obtain(t, newFake(), "k", lock.WithHooks(recorder(&tr, "a")), lock.WithHooks(m), lock.WithHooks(recorder(&tr, "b")))
		_ = lk.Release(ctx)
		want := "a:obtain( b:obtain( a:attempt1( m:attempt1( b:attempt1( )b )m )a )b )a a:release( b:release( )b )a a:ended:false b:ended:false"
		if got := tr.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})

	t.Run("Ended reports a lock found lost, once", func(t *testing.T) {
		var ends []lock.Event
		f := newFake()
		lk := obtain(t, f, "k", lock.WithHooks(&lock.Hooks{Ended: func(e lock.Event) { ends = append(ends, e) }}))
		f.drop("k")
		_ = lk.Refresh(ctx, time.Minute)
		_ = lk.Release(ctx)
		if len(ends) != 1 {
			t.Fatalf("Ended ran %d times, want 1", len(ends))
		}
		if e := ends[0]; !errors.Is(e.Err, lock.ErrExpired) || e.Lock != lk || e.Key != "k" || e.Held <= 0 {
			t.Errorf("got Err %v, Lock %v, Key %q, Held %v; want ErrExpired, the lock, k, > 0", e.Err, e.Lock, e.Key, e.Held)
		}
	})

	t.Run("Node hooks reach a strategy that reports nodes", func(t *testing.T) {
		var tr trail
		f := newFake()
		f.onAcquire = func(ctx context.Context) { strategy.ReportNode(ctx, "n1", "ok", nil) }
		lk, err := lock.New(nodeFake{f}).Obtain(ctx, "k", time.Minute, lock.WithHooks(recorder(&tr, "a")))
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		if got := tr.String(); !strings.Contains(got, "a:attempt1( a:node:n1=ok )a") {
			t.Errorf("got %q, want the node's answer within the attempt", got)
		}
	})

	t.Run("other strategies carry no hooks in their context", func(t *testing.T) {
		var tr trail
		f := newFake()
		f.onAcquire = func(ctx context.Context) { strategy.ReportNode(ctx, "n1", "ok", nil) }
		lk := obtain(t, f, "k", lock.WithHooks(recorder(&tr, "a")))
		defer lk.Release(ctx)
		if got := tr.String(); strings.Contains(got, "node") {
			t.Errorf("got %q, want no node event", got)
		}
	})

	t.Run("events name the strategy, key and TTL", func(t *testing.T) {
		var got []lock.Event
		h := &lock.Hooks{Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			got = append(got, e)
			return next(ctx)
		}}
		lk := obtain(t, newFake(), "k", lock.WithHooks(h))
		defer lk.Release(ctx)
		if len(got) != 1 || got[0].Op != "attempt" || got[0].Key != "k" || got[0].TTL != time.Minute || got[0].Strategy == "" {
			t.Errorf("got %+v, want one attempt event for k, 1m, with the strategy's name", got)
		}
	})

	t.Run("a nil Hooks is an ArgumentError", func(t *testing.T) {
		_, err := lock.New(newFake()).Obtain(ctx, "k", time.Minute, lock.WithHooks(nil))
		var ae *lock.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "hooks" {
			t.Errorf("got %v, want an ArgumentError naming hooks", err)
		}
	})
}
