package lockotel_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy"
)

// queueFake is a strategy.Notifier whose lock is held by another owner for
// the first attempts: each puts the waiter at rank, and reports that the
// holder has an hour left. Its listener never delivers, so the waiter's
// timer wakes it: a lost notification. It records the waiter ids it saw.
type queueFake struct {
	rank, refusals int

	mu      sync.Mutex
	waiters []string
}

func (f *queueFake) String() string { return "fake" }

func (f *queueFake) Acquire(_ context.Context, r strategy.Request) (strategy.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Waiter != "" {
		f.waiters = append(f.waiters, r.Waiter)
	}
	if f.refusals > 0 {
		f.refusals--
		return strategy.Grant{Position: f.rank, HolderTTL: time.Hour}, lock.ErrNotObtained
	}
	return strategy.Grant{}, nil
}

func (f *queueFake) Listen(string, string) strategy.Listener {
	return silence{make(chan strategy.Wake)}
}

func (f *queueFake) Leave(context.Context, string, string) error { return nil }

func (f *queueFake) Refresh(context.Context, string, string, time.Duration) (strategy.Grant, error) {
	return strategy.Grant{}, nil
}
func (f *queueFake) Release(context.Context, string, string) error { return nil }
func (f *queueFake) TTL(context.Context, string, string) (time.Duration, error) {
	return time.Minute, nil
}
func (f *queueFake) Inspect(context.Context, string) (strategy.State, error) {
	return strategy.State{}, nil
}

// silence is a listener whose messages are all lost: it never delivers.
type silence struct{ c chan strategy.Wake }

func (s silence) Wakes() <-chan strategy.Wake { return s.c }
func (silence) Close()                        {}

// events returns the names of s's events, and the value of attr on each
// that has it.
func events(s sdktrace.ReadOnlySpan, attr attribute.Key) (names, values []string) {
	for _, e := range s.Events() {
		names = append(names, e.Name)
		for _, kv := range e.Attributes {
			if kv.Key == attr {
				values = append(values, kv.Value.Emit())
			}
		}
	}
	return names, values
}

// TestWaitTelemetry: a waiter that is queued, woken by its timer twice and
// then obtains the lock gets the span events enqueued (with its rank),
// woken (with the reason) and missed, and the wake-up metrics count them;
// no waiter id appears anywhere.
func TestWaitTelemetry(t *testing.T) {
	rec := newRecording(t, lockotel.WithKeys(lockotel.KeysRaw))
	f := &queueFake{rank: 2, refusals: 2}
	l := rec.wrap(lock.New(f))
	lk, err := l.Obtain(context.Background(), "k", time.Minute, lock.WithRetry(lock.Linear(time.Millisecond)))
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	_ = lk.Release(context.Background())

	span := only(t, rec.ended("lock.obtain"), "lock.obtain")
	names, _ := events(span, "")
	want := []string{"lock.contended", "lock.wait.enqueued", "lock.wait.woken", "lock.contended", "lock.wait.woken", "lock.wait.missed"}
	if !slices.Equal(names, want) {
		t.Errorf("obtain span events = %v, want %v", names, want)
	}
	if _, ranks := events(span, "locksmith.lock.queue.rank"); !slices.Equal(ranks, []string{"2"}) {
		t.Errorf("ranks = %v, want [2]", ranks)
	}
	if _, reasons := events(span, "locksmith.lock.wake.reason"); !slices.Equal(reasons, []string{"timer", "timer"}) {
		t.Errorf("wake reasons = %v, want [timer timer]", reasons)
	}

	m := rec.metrics(t)
	wantUnits(t, m, map[string]string{"locksmith.lock.wait.wakeups": "{wakeup}", "locksmith.lock.wait.missed": "{notification}"})
	if got, want := by(m["locksmith.lock.wait.wakeups"], "locksmith.lock.wake.reason"), map[string]int64{"timer": 2}; !maps.Equal(got, want) {
		t.Errorf("wakeups by reason = %v, want %v", got, want)
	}
	if got, want := by(m["locksmith.lock.wait.missed"], "locksmith.lock.strategy"), map[string]int64{"fake": 1}; !maps.Equal(got, want) {
		t.Errorf("missed by strategy = %v, want %v", got, want)
	}

	t.Run("no waiter id in spans or metrics", func(t *testing.T) {
		if len(f.waiters) == 0 {
			t.Fatal("the strategy saw no waiter id, want one per attempt that may be followed by another")
		}
		var texts []string
		for _, s := range rec.spans.Ended() {
			texts = append(texts, s.Name(), s.Status().Description, fmt.Sprint(s.Attributes()))
			for _, e := range s.Events() {
				texts = append(texts, e.Name, fmt.Sprint(e.Attributes))
			}
		}
		for _, md := range m {
			texts = append(texts, fmt.Sprint(md.Data))
		}
		for _, text := range texts {
			for _, id := range f.waiters {
				if strings.Contains(text, id) {
					t.Fatalf("telemetry %q contains a waiter id", text)
				}
			}
		}
	})
}

// TestWaitWokenByRelease: on a real server, a waiter whose timer is a
// minute is woken by the release's message, which its span and the
// wake-up metric record; no notification is counted as missed.
func TestWaitWokenByRelease(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := newRecording(t)
	l := rec.wrap(singleLocker(t, addr))
	key := conformance.Key(t)
	holder, err := l.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Released once the waiter has been woken (by its subscription's
	// confirmation) and has found the lock held again: it is queued,
	// subscribed and about to sleep.
	var once sync.Once
	woken := false
	ready := make(chan struct{})
	probe := lock.WithHooks(&lock.Hooks{
		Wait: func(_ context.Context, e lock.Event) { woken = woken || e.Op == "woken" },
		Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
			err := next(ctx)
			if woken && errors.Is(err, lock.ErrNotObtained) {
				once.Do(func() { close(ready) })
			}
			return err
		},
	})
	done := make(chan error, 1)
	go func() {
		lk, err := l.Obtain(ctx, key, time.Minute, lock.WithRetry(lock.Linear(time.Minute)), probe)
		if err == nil {
			err = lk.Release(context.Background())
		}
		done <- err
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the waiter returned %v before it was woken and queued", err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter's Obtain = %v, want a lock", err)
	}
	var waited sdktrace.ReadOnlySpan
	for _, s := range rec.ended("lock.obtain") {
		if names, _ := events(s, ""); slices.Contains(names, "lock.wait.enqueued") {
			waited = s
		}
	}
	if waited == nil {
		t.Fatal("no obtain span has lock.wait.enqueued, want the waiter's")
	}
	_, reasons := events(waited, "locksmith.lock.wake.reason")
	if len(reasons) == 0 || reasons[len(reasons)-1] != "message" {
		t.Errorf("wake reasons = %v, want the last to be message", reasons)
	}
	if names, _ := events(waited, ""); slices.Contains(names, "lock.wait.missed") {
		t.Errorf("events = %v, want no lock.wait.missed", names)
	}
	m := rec.metrics(t)
	if got := by(m["locksmith.lock.wait.wakeups"], "locksmith.lock.wake.reason"); got["message"] != 1 {
		t.Errorf("wakeups by reason = %v, want message: 1", got)
	}
	if _, ok := m["locksmith.lock.wait.missed"]; ok {
		t.Errorf("metric locksmith.lock.wait.missed recorded, want none")
	}
}
