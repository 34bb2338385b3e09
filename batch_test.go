package lock_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// batchFake is a fakeStrategy that batches: its RefreshBatch refreshes
// each lock as its Refresh does, and records the size of each batch. When
// gate is set, a batch waits for it to close first.
type batchFake struct {
	*fakeStrategy
	mu      sync.Mutex
	batches []int
	keys    [][]string // of each batch
	gate    chan struct{}
	entered chan struct{} // when set, told of each batch that waits at gate
	// replaces makes batch n replace each lock's value with "next-n", as
	// setnx-getset's refreshes do, and lose its reply as losses[n-1] says,
	// when there is one: "landed" after the write, "dropped" before it.
	// values and unsures record the Value and Unsure of each lock of each
	// batch.
	replaces bool
	losses   []string
	values   []string
	unsures  [][]string
}

var _ strategy.Batcher = (*batchFake)(nil)

func (f *batchFake) Batches() bool { return true }

func (f *batchFake) RefreshBatch(ctx context.Context, batch []strategy.Refresh) {
	f.mu.Lock()
	f.batches = append(f.batches, len(batch))
	keys := make([]string, len(batch))
	for i, r := range batch {
		keys[i] = r.Key
	}
	f.keys = append(f.keys, keys)
	gate, entered := f.gate, f.entered
	f.mu.Unlock()
	if gate != nil {
		if entered != nil {
			entered <- struct{}{}
		}
		<-gate
	}
	if f.replaces {
		f.replaceEach(batch)
		return
	}
	for i, r := range batch {
		batch[i].Grant, batch[i].Err = f.Refresh(ctx, r.Key, r.Value, r.TTL)
	}
}

// replaceEach refreshes each lock of batch with a new value, if it holds
// its value or one of its Unsure ones, and loses its reply as f.losses
// says.
func (f *batchFake) replaceEach(batch []strategy.Refresh) {
	f.mu.Lock()
	n := len(f.batches)
	loss := ""
	if n <= len(f.losses) {
		loss = f.losses[n-1]
	}
	for _, r := range batch {
		f.values, f.unsures = append(f.values, r.Value), append(f.unsures, r.Unsure)
	}
	f.mu.Unlock()
	f.fakeStrategy.mu.Lock()
	defer f.fakeStrategy.mu.Unlock()
	for i, r := range batch {
		e, ok := f.live(r.Key)
		batch[i].Grant.Value = fmt.Sprintf("next-%d", n)
		switch {
		case loss == "dropped":
		case !ok:
			batch[i].Err = strategy.ErrExpired
		case e.value != r.Value && !slices.Contains(r.Unsure, e.value):
			batch[i].Err = strategy.ErrTaken
		default:
			f.entries[r.Key] = fakeEntry{value: batch[i].Grant.Value, expires: time.Now().Add(r.TTL)}
		}
		if loss != "" {
			batch[i].Err = errBoom // the reply was lost
		}
	}
}

// sizes returns the sizes of the batches so far.
func (f *batchFake) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.batches...)
}

// holdAll obtains n locks through l for ttl, and starts refreshing each.
func holdAll(t *testing.T, l *lock.Locker, n int, ttl time.Duration, opts ...lock.Option) []*lock.Lock {
	t.Helper()
	locks := make([]*lock.Lock, n)
	for i := range locks {
		lk, err := l.Obtain(context.Background(), fmt.Sprintf("key-%d", i), ttl, opts...)
		if err != nil {
			t.Fatalf("Obtain = %v, want a lock", err)
		}
		if err := lk.StartRefresh(context.Background()); err != nil {
			t.Fatalf("StartRefresh = %v, want nil", err)
		}
		t.Cleanup(func() { _ = lk.Release(context.Background()) })
		locks[i] = lk
	}
	return locks
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not after %v", what, timeout)
		}
	}
}

func TestBatchedRefresh(t *testing.T) {
	t.Run("the locks of one Locker are refreshed together", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake()}
		locks := holdAll(t, lock.New(f), 50, 300*time.Millisecond)
		waitFor(t, "4 batches", func() bool { return len(f.sizes()) >= 4 })
		refreshes := len(f.callsTo("refresh"))
		if got := len(f.sizes()); got*10 > refreshes {
			t.Errorf("batches = %d for %d refreshes, want at most one per 10", got, refreshes)
		}
		for i, lk := range locks {
			if err := lk.Err(); err != nil {
				t.Errorf("lock %d: Err() = %v, want nil", i, err)
			}
		}
	})

	t.Run("locks due together go in batches of at most 1000, those whose validity ends first first", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake()}
		locks := holdAll(t, lock.New(f), 2500, 6*time.Second) // obtained in order: key-0's validity ends first
		waitFor(t, "3 batches", func() bool { return len(f.sizes()) >= 3 })
		f.mu.Lock()
		first := slices.Clone(f.keys[:3]) // the first send: every lock, as all were obtained within half an interval
		f.mu.Unlock()
		for _, keys := range first {
			if len(keys) > 1000 {
				t.Errorf("a batch of %d locks, want at most 1000", len(keys))
			}
			var lo int
			if _, err := fmt.Sscanf(slices.Min(keys), "key-%d", &lo); err != nil {
				t.Fatal(err)
			}
			lo = lo / 1000 * 1000
			var want []string
			for i := lo; i < min(lo+1000, len(locks)); i++ {
				want = append(want, fmt.Sprintf("key-%d", i))
			}
			if got := slices.Sorted(slices.Values(keys)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Errorf("a batch's locks: %d from %s, want key-%d to key-%d, the next 1000 by the end of their validity", len(keys), slices.Min(keys), lo, lo+len(want)-1)
			}
		}
	})

	t.Run("a batch that a hook kept from the strategy refreshes nothing", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake()}
		var skipped atomic.Int64
		skip := lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			if e.Op == "refresh" {
				skipped.Add(1)
				return nil // breaks the contract: next is never called
			}
			return next(ctx)
		}})
		locks := holdAll(t, lock.New(f), 3, 300*time.Millisecond, skip)
		for i, lk := range locks {
			select {
			case <-lk.Done():
			case <-time.After(timeout):
				t.Fatalf("lock %d: Done not closed, want it lapsed: no refresh reached the strategy", i)
			}
			if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) {
				t.Errorf("lock %d: Err() = %v, want ErrLapsed", i, err)
			}
		}
		if n := len(f.sizes()); n > 0 || skipped.Load() == 0 {
			t.Errorf("%d batches sent, %d refreshes kept back by the hook: want none sent, and some kept back", n, skipped.Load())
		}
	})

	t.Run("a lock found taken ends alone", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake()}
		locks := holdAll(t, lock.New(f), 10, 300*time.Millisecond)
		f.hold(locks[3].Key(), "another owner")
		select {
		case <-locks[3].Done():
		case <-time.After(timeout):
			t.Fatal("Done of the taken lock not closed")
		}
		if err := locks[3].Err(); !errors.Is(err, lock.ErrTaken) {
			t.Errorf("Err() of the taken lock = %v, want ErrTaken", err)
		}
		refreshesOf := func(key string) int {
			n := 0
			for _, c := range f.callsTo("refresh") {
				if c.key == key {
					n++
				}
			}
			return n
		}
		lost, n := refreshesOf(locks[3].Key()), len(f.sizes())
		waitFor(t, "2 more batches", func() bool { return len(f.sizes()) >= n+2 })
		for i, lk := range locks {
			if err := lk.Err(); i != 3 && err != nil {
				t.Errorf("lock %d: Err() = %v, want nil", i, err)
			}
		}
		if got := refreshesOf(locks[3].Key()) - lost; got != 0 {
			t.Errorf("refreshes of the lost lock after its loss = %d, want 0", got)
		}
	})

	t.Run("a batch without an answer is retried, and the locks lapse", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake()}
		f.failRefreshes(errBoom)
		locks := holdAll(t, lock.New(f), 5, 200*time.Millisecond)
		for i, lk := range locks {
			select {
			case <-lk.Done():
			case <-time.After(timeout):
				t.Fatalf("lock %d: Done not closed", i)
			}
			if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) {
				t.Errorf("lock %d: Err() = %v, want ErrLapsed", i, err)
			}
		}
		if got := len(f.sizes()); got < 2 {
			t.Errorf("batches before the locks lapsed = %d, want retries", got)
		}
	})

	t.Run("StopRefresh waits for the batch on its way, and none follows", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake(), gate: make(chan struct{}), entered: make(chan struct{}, 1)}
		lk := holdAll(t, lock.New(f), 1, 2*time.Second, lock.WithRefreshFraction(0.1))[0]
		<-f.entered
		stopped := make(chan struct{})
		go func() {
			lk.StopRefresh()
			close(stopped)
		}()
		select {
		case <-stopped:
			t.Fatal("StopRefresh returned while a batch carrying the lock was on its way, want it to wait")
		case <-time.After(50 * time.Millisecond):
		}
		close(f.gate)
		<-stopped
		n := len(f.callsTo("refresh"))
		time.Sleep(300 * time.Millisecond)
		if got := len(f.callsTo("refresh")); got != n {
			t.Errorf("refreshes after StopRefresh = %d, want 0", got-n)
		}
		if err := lk.Release(context.Background()); err != nil {
			t.Errorf("Release = %v, want nil", err)
		}
	})

	t.Run("each lock's Op hooks wrap its refresh, and Batch hooks each batch", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake()}
		var mu sync.Mutex
		perKey := map[string]int{}
		var batches, linked, carried int
		hooks := lock.WithHooks(&lock.Hooks{
			Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
				if e.Op == "refresh" {
					mu.Lock()
					perKey[e.Key]++
					mu.Unlock()
				}
				return next(ctx)
			},
			Batch: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
				mu.Lock()
				batches, linked, carried = batches+1, linked+len(e.Links), carried+e.Keys
				mu.Unlock()
				return next(ctx)
			},
		})
		l := lock.New(f)
		holdAll(t, l, 4, 300*time.Millisecond, hooks)
		waitFor(t, "3 batches", func() bool { return len(f.sizes()) >= 3 })
		mu.Lock()
		defer mu.Unlock()
		if batches == 0 || linked != carried {
			t.Errorf("Batch hooks: %d batches, %d links for %d locks carried; want some, and a link per hooked lock", batches, linked, carried)
		}
		for i := range 4 {
			if perKey[fmt.Sprintf("key-%d", i)] == 0 {
				t.Errorf("Op hook saw no refresh of key-%d, want some", i)
			}
		}
	})

	t.Run("a refresh limit ends the lock's auto-refresh", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake()}
		lk := holdAll(t, lock.New(f), 1, 200*time.Millisecond, lock.WithMaxRefreshes(2))[0]
		select {
		case <-lk.Done():
		case <-time.After(timeout):
			t.Fatal("Done not closed after the refresh limit")
		}
		if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) {
			t.Errorf("Err() = %v, want ErrLapsed", err)
		}
		if got := len(f.callsTo("refresh")); got != 2 {
			t.Errorf("refreshes = %d, want 2 (WithMaxRefreshes)", got)
		}
	})

	t.Run("the values lost replies may have written are sent as Unsure, and adopted", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake(), replaces: true, losses: []string{"landed", "dropped"}}
		lk := holdAll(t, lock.New(f), 1, 300*time.Millisecond)[0]
		waitFor(t, "4 batches", func() bool { return len(f.sizes()) >= 4 || lk.Err() != nil })
		if err := lk.Err(); err != nil {
			t.Fatalf("Err() after three batches = %v, want nil", err)
		}
		f.mu.Lock()
		values, unsures := append([]string(nil), f.values[:4]...), append([][]string(nil), f.unsures[:4]...)
		f.mu.Unlock()
		if want := [][]string{nil, {"next-1"}, {"next-1", "next-2"}, nil}; !reflect.DeepEqual(unsures, want) {
			t.Errorf("Unsure of the first four batches = %q, want %q: the values each lost reply may have written, until an answer", unsures, want)
		}
		if first := values[0]; !reflect.DeepEqual(values, []string{first, first, first, "next-3"}) {
			t.Errorf("Value of the first four batches = %q, want the first value three times, then the one the third batch wrote", values)
		}
	})

	t.Run("a lock of several keys is refreshed on its own", func(t *testing.T) {
		f := &batchFake{fakeStrategy: newFake()}
		lk, err := lock.New(f).ObtainMany(context.Background(), []string{"a", "b"}, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(context.Background())
		if err := lk.StartRefresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a refresh", func() bool { return len(f.callsTo("refreshKeys")) > 0 })
		if got := f.sizes(); len(got) != 0 {
			t.Errorf("batches = %v, want none", got)
		}
	})
}
