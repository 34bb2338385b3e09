package lockotel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// refuse makes one Obtain of key on l, which must be refused.
func refuse(t *testing.T, l *lock.Locker, key string) {
	t.Helper()
	if lk, err := l.Obtain(context.Background(), key, time.Minute, lock.WithRetry(lock.NoRetry())); err == nil {
		_ = lk.Release(context.Background())
		t.Fatalf("Obtain of a held lock = a lock, want ErrNotObtained")
	}
}

// obtainSpans returns the ended lock.obtain spans, the last one last.
func obtainSpans(rec *recording) []sdktrace.ReadOnlySpan { return rec.ended("lock.obtain") }

// TestHolderLink: for every strategy (the wrapper sees only the Locker,
// and the stamp that carries the trace is the Locker's, so one driver per
// strategy serves), a waiter's lock.obtain span links to its holder's,
// whose lock.hold child covers the hold, and names the holder.
func TestHolderLink(t *testing.T) {
	ctx := context.Background()
	for _, c := range matrix.EachStrategy(t) {
		t.Run(c.Name, func(t *testing.T) {
			_, noMetadata := c.Harness.Skip["MetadataRoundTrips"] // setnx-getset's value is a bare timestamp
			rec := newRecording(t)
			l := rec.wrap(c.Harness.NewLocker(t))
			key := conformance.Key(t)
			var opts []lock.Option
			if !noMetadata {
				opts = append(opts, lock.WithMetadata("web-3 pid=4121"))
			}
			holder, err := l.Obtain(ctx, key, time.Minute, opts...)
			if err != nil {
				t.Fatal(err)
			}
			refuse(t, rec.wrap(c.Harness.NewLocker(t)), key)
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			spans := obtainSpans(rec)
			if len(spans) != 2 {
				t.Fatalf("lock.obtain spans = %d, want the holder's and the waiter's", len(spans))
			}
			held, waiter := spans[0], spans[1]
			a := attrs(waiter)
			if got, want := a["locksmith.lock.holder.fingerprint"].AsString(), strategy.Fingerprint(holder.Token()); got != want {
				t.Errorf("waiter's locksmith.lock.holder.fingerprint = %q, want %q", got, want)
			}
			hold := only(t, rec.ended("lock.hold"), "lock.hold")
			if hold.Parent().SpanID() != held.SpanContext().SpanID() {
				t.Errorf("lock.hold's parent = %v, want the holder's lock.obtain span %v", hold.Parent().SpanID(), held.SpanContext().SpanID())
			}
			if got := attrs(hold)["locksmith.lock.end"].AsString(); got != "released" {
				t.Errorf("lock.hold's locksmith.lock.end = %q, want released", got)
			}
			if noMetadata {
				if len(waiter.Links()) != 0 {
					t.Errorf("waiter's links = %v, want none: the value cannot carry a trace", waiter.Links())
				}
				return
			}
			if got := a["locksmith.lock.holder.metadata"].AsString(); got != "web-3 pid=4121" {
				t.Errorf("waiter's locksmith.lock.holder.metadata = %q, want %q", got, "web-3 pid=4121")
			}
			if a["locksmith.lock.holder.held_for"].AsFloat64() <= 0 {
				t.Errorf("waiter's locksmith.lock.holder.held_for = %v, want positive", a["locksmith.lock.holder.held_for"].Emit())
			}
			if links := waiter.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != held.SpanContext().SpanID() || links[0].SpanContext.TraceID() != held.SpanContext().TraceID() {
				t.Errorf("waiter's links = %v, want one, to the holder's lock.obtain span %v", links, held.SpanContext())
			}
		})
	}
}

func TestHolderChain(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	rec := newRecording(t)
	l := rec.wrap(singleLocker(t, addr))
	key := conformance.Key(t)
	first, err := l.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	refuse(t, l, key) // waits for first
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := l.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	refuse(t, l, key) // waits for second
	s := obtainSpans(rec)
	if len(s) != 4 {
		t.Fatalf("lock.obtain spans = %d, want 4", len(s))
	}
	for i, hop := range [][2]int{{1, 0}, {3, 2}} {
		if links := s[hop[0]].Links(); len(links) != 1 || links[0].SpanContext.SpanID() != s[hop[1]].SpanContext().SpanID() {
			t.Errorf("hop %d: the waiter's links = %v, want one, to its holder's lock.obtain span", i+1, links)
		}
	}
}

func TestHoldSpan(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()

	t.Run("lasts as long as the hold duration metric's measurement", func(t *testing.T) {
		rec := newRecording(t)
		lk, err := rec.wrap(singleLocker(t, addr)).Obtain(ctx, conformance.Key(t), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
		hold := only(t, rec.ended("lock.hold"), "lock.hold")
		span := hold.EndTime().Sub(hold.StartTime()).Seconds()
		h := rec.metrics(t)["locksmith.lock.hold.duration"].Data.(metricdata.Histogram[float64])
		if len(h.DataPoints) != 1 || h.DataPoints[0].Sum != span || attrs(hold)["locksmith.lock.held"].AsFloat64() != span {
			t.Errorf("lock.hold lasted %vs, its locksmith.lock.held = %v, the metric's sum %v; want all equal", span, attrs(hold)["locksmith.lock.held"].Emit(), h.DataPoints)
		}
		if ev := hold.Events(); len(ev) != 1 || ev[0].Name != "lock.refresh" {
			t.Errorf("lock.hold events = %v, want one lock.refresh", ev)
		}
	})

	t.Run("ends lost, with why", func(t *testing.T) {
		rec := newRecording(t)
		lk, err := rec.wrap(singleLocker(t, addr)).Obtain(ctx, conformance.Key(t), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := redistest.GoRedis(t, addr, 1).Del(ctx, lk.Key()).Err(); err != nil {
			t.Fatal(err)
		}
		_ = lk.Refresh(ctx, time.Minute)
		a := attrs(only(t, rec.ended("lock.hold"), "lock.hold"))
		if a["locksmith.lock.end"].AsString() != "lost" || a["error.type"].AsString() != "expired" {
			t.Errorf("lock.hold's end, error.type = %v, %v; want lost, expired", a["locksmith.lock.end"].Emit(), a["error.type"].Emit())
		}
	})

	t.Run("ends broken, when a Break deleted it", func(t *testing.T) {
		rec := newRecording(t)
		lk, err := rec.wrap(singleLocker(t, addr)).Obtain(ctx, conformance.Key(t), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := singleLocker(t, addr).Break(ctx, lk.Key(), ""); err != nil {
			t.Fatal(err)
		}
		_ = lk.Refresh(ctx, time.Minute)
		a := attrs(only(t, rec.ended("lock.hold"), "lock.hold"))
		if a["locksmith.lock.end"].AsString() != "broken" || a["error.type"].AsString() != "broken" {
			t.Errorf("lock.hold's end, error.type = %v, %v; want broken, broken", a["locksmith.lock.end"].Emit(), a["error.type"].Emit())
		}
		h := rec.metrics(t)["locksmith.lock.hold.duration"].Data.(metricdata.Histogram[float64])
		if len(h.DataPoints) != 1 {
			t.Fatalf("locksmith.lock.hold.duration = %v, want one series", h.DataPoints)
		}
		if end, _ := h.DataPoints[0].Attributes.Value("locksmith.lock.end"); end.AsString() != "broken" {
			t.Errorf("locksmith.lock.hold.duration's locksmith.lock.end = %v, want broken", end.Emit())
		}
	})

	t.Run("WithoutHolderTrace stores no trace, and waiters link to none", func(t *testing.T) {
		rec := newRecording(t, lockotel.WithoutHolderTrace())
		l := rec.wrap(singleLocker(t, addr))
		key := conformance.Key(t)
		lk, err := l.Obtain(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		refuse(t, l, key)
		if st, _ := l.Inspect(ctx, key); st.Trace != "" || !strings.Contains(st.Verdict, "held") {
			t.Errorf("Inspect: Trace %q, Verdict %q; want no trace, held", st.Trace, st.Verdict)
		}
		if links := obtainSpans(rec)[1].Links(); len(links) != 0 {
			t.Errorf("waiter's links = %v, want none", links)
		}
	})
}
