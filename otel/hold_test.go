package lockotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// lostAndHeld returns the lost counter by error.type, and the hold
// duration's count by locksmith.lock.end.
func lostAndHeld(t *testing.T, rec *recording) (lost map[string]int64, ends map[string]uint64) {
	t.Helper()
	m := rec.metrics(t)
	lost, ends = map[string]int64{}, map[string]uint64{}
	if sum, ok := m["locksmith.lock.lost"].Data.(metricdata.Sum[int64]); ok {
		for _, dp := range sum.DataPoints {
			v, _ := dp.Attributes.Value("error.type")
			lost[v.AsString()] += dp.Value
		}
	}
	if hist, ok := m["locksmith.lock.hold.duration"].Data.(metricdata.Histogram[float64]); ok {
		for _, dp := range hist.DataPoints {
			v, _ := dp.Attributes.Value("locksmith.lock.end")
			ends[v.AsString()] += dp.Count
		}
	}
	return lost, ends
}

// TestAutoRefresh: auto-refresh records a lock.refresh span for each
// refresh, and the loss it finds, or a lapse, is recorded in
// locksmith.lock.lost and locksmith.lock.hold.duration by the time the
// holder learns of it.
func TestAutoRefresh(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()

	t.Run("refresh spans, and a loss that auto-refresh finds", func(t *testing.T) {
		rec := newRecording(t)
		key := conformance.Key(t)
		lk, err := rec.wrap(singleLocker(t, addr)).Obtain(ctx, key, 2*time.Second, lock.WithRefreshFraction(0.1))
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatal(err)
		}
		defer lk.StopRefresh()
		for len(rec.ended("lock.refresh")) < 2 {
			if err := lk.Err(); err != nil {
				t.Fatalf("lost before two refreshes: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := redistest.GoRedis(t, addr, 3).Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lk.Done():
		case <-time.After(time.Minute):
			t.Fatal("Done not closed a minute after the key was deleted")
		}

		spans := rec.ended("lock.refresh")
		for _, s := range spans[:2] {
			if s.Status().Code != codes.Unset || attrs(s)["locksmith.lock.ttl"].AsFloat64() != 2 {
				t.Errorf("refresh span: status %v, ttl %vs; want unset, 2s", s.Status().Code, attrs(s)["locksmith.lock.ttl"].AsFloat64())
			}
		}
		last := spans[len(spans)-1]
		if got := attrs(last)["error.type"].AsString(); got != "expired" || last.Status().Code != codes.Error {
			t.Errorf("the refresh that found the loss: error.type %q, status %v; want expired, error", got, last.Status().Code)
		}
		lost, ends := lostAndHeld(t, rec)
		if len(lost) != 1 || lost["expired"] != 1 {
			t.Errorf("locksmith.lock.lost by error.type = %v, want expired: 1", lost)
		}
		if len(ends) != 1 || ends["lost"] != 1 {
			t.Errorf("locksmith.lock.hold.duration counts by end = %v, want lost: 1", ends)
		}
	})

	t.Run("a lock that lapses", func(t *testing.T) {
		rec := newRecording(t)
		lk, err := rec.wrap(singleLocker(t, addr)).Obtain(ctx, conformance.Key(t), 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-lk.Done():
		case <-time.After(time.Minute):
			t.Fatal("Done not closed a minute after the lock's validity ended")
		}
		lost, ends := lostAndHeld(t, rec)
		if len(lost) != 1 || lost["lapsed"] != 1 {
			t.Errorf("locksmith.lock.lost by error.type = %v, want lapsed: 1", lost)
		}
		if len(ends) != 1 || ends["lost"] != 1 {
			t.Errorf("locksmith.lock.hold.duration counts by end = %v, want lost: 1", ends)
		}
	})
}

// TestBatchedRefreshSpans: locks that one Locker refreshes together keep a
// lock.refresh span each, a child of the context given to StartRefresh,
// and each batch adds one lock.refresh.batch span, a root, linked to the
// lock.refresh spans of its locks.
func TestBatchedRefreshSpans(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	rec := newRecording(t)
	l := rec.wrap(singleLocker(t, addr))
	const n = 5
	for range n {
		lk, err := l.Obtain(ctx, conformance.Key(t), 2*time.Second, lock.WithRefreshFraction(0.1))
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.StartRefresh(ctx); err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
	}
	for len(rec.ended("lock.refresh.batch")) < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	b := rec.ended("lock.refresh.batch")[0]
	refreshes := map[trace.SpanID]bool{}
	for start := time.Now(); len(refreshes) < len(b.Links()) && time.Since(start) < time.Minute; time.Sleep(10 * time.Millisecond) {
		for _, s := range rec.ended("lock.refresh") { // they end after the batch's, which they wrap
			refreshes[s.SpanContext().SpanID()] = true
		}
	}
	if b.Parent().IsValid() {
		t.Errorf("batch span's parent = %v, want none (a root)", b.Parent().SpanID())
	}
	if got := attrs(b)["locksmith.lock.batch.size"].AsInt64(); got < 1 || got > n {
		t.Errorf("locksmith.lock.batch.size = %d, want 1 to %d", got, n)
	}
	if got, want := len(b.Links()), int(attrs(b)["locksmith.lock.batch.size"].AsInt64()); got != want {
		t.Errorf("batch span's links = %d, want one per lock, %d", got, want)
	}
	for _, link := range b.Links() {
		if !refreshes[link.SpanContext.SpanID()] {
			t.Errorf("batch span links %v, want a lock.refresh span", link.SpanContext.SpanID())
		}
	}
}
