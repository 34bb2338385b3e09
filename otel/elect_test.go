package lockotel_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
)

// elector returns an Elector for key over a Locker of its own on addr,
// instrumented by ElectHooks with rec's providers, and lock's options (a
// fault, a token catcher) on its Locker.
func (r *recording) elector(t *testing.T, addr, key string, opts []lock.Option, eopts ...elect.Option) *elect.Elector {
	t.Helper()
	eopts = append(eopts, elect.WithHooks(lockotel.ElectHooks(r.opts...)))
	e, err := elect.New(singleLocker(t, addr).With(opts...), key, eopts...)
	if err != nil {
		t.Fatalf("elect.New = %v, want an Elector", err)
	}
	return e
}

// waitEnded waits until rec has n ended spans named name, and returns
// them: the release of Run's lease can end after Run returned.
func (r *recording) waitEnded(t *testing.T, name string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := r.ended(name)
		if len(spans) >= n || time.Now().After(deadline) {
			if len(spans) != n {
				t.Fatalf("%s spans: got %d, want %d", name, len(spans), n)
			}
			return spans
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gauge returns the values of an int64 gauge or sum, by the value of attr.
func gauge(md metricdata.Metrics, attr attribute.Key) map[string]int64 {
	out := map[string]int64{}
	var points []metricdata.DataPoint[int64]
	switch d := md.Data.(type) {
	case metricdata.Gauge[int64]:
		points = d.DataPoints
	case metricdata.Sum[int64]:
		points = d.DataPoints
	}
	for _, dp := range points {
		v, _ := dp.Attributes.Value(attr)
		out[v.AsString()] += dp.Value
	}
	return out
}

// histogram returns the count and sum of a float64 histogram's points.
func histogram(md metricdata.Metrics) (count uint64, sum float64) {
	if d, ok := md.Data.(metricdata.Histogram[float64]); ok {
		for _, dp := range d.DataPoints {
			count += dp.Count
			sum += dp.Sum
		}
	}
	return count, sum
}

const group = attribute.Key("locksmith.lock.group")

// TestElectRun: a Run that leads one term, and resigns when its lead
// returns, records a lock.campaign, a lock.term and a lock.resign span, and
// the election's metrics.
func TestElectRun(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rec := newRecording(t)
	key := conformance.Key(t)
	e := rec.elector(t, addr, key, nil, elect.WithIdentity("web-3"), elect.WithLease(5*time.Second))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		number  int64
		leading map[string]metricdata.Metrics
	)
	err := e.Run(ctx, func(_ context.Context, term *elect.Term) error {
		number, leading = term.Number(), rec.metrics(t)
		stop()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: got %v, want context.Canceled", err)
	}
	// The term can end on the goroutine that watches it, whose Ended hook
	// can run after Run returned.
	resigns := rec.waitEnded(t, "lock.resign", 1)
	term := rec.waitEnded(t, "lock.term", 1)[0]
	campaign := only(t, rec.ended("lock.campaign"), "lock.campaign")
	after := rec.metrics(t)

	t.Run("lock.campaign records the term and the identity", func(t *testing.T) {
		a := attrs(campaign)
		if got := a["locksmith.elect.term"].AsInt64(); got != number {
			t.Errorf("locksmith.elect.term: got %d, want %d", got, number)
		}
		if got := a["locksmith.elect.identity"].AsString(); got != "web-3" {
			t.Errorf("locksmith.elect.identity: got %q, want %q", got, "web-3")
		}
		if got := campaign.Status().Code; got != codes.Unset {
			t.Errorf("status: got %v, want %v", got, codes.Unset)
		}
	})
	t.Run("lock.term is a child of lock.campaign", func(t *testing.T) {
		if got, want := term.Parent().SpanID(), campaign.SpanContext().SpanID(); got != want {
			t.Errorf("lock.term's parent: got %v, want lock.campaign's span %v", got, want)
		}
		if got, want := term.SpanContext().TraceID(), campaign.SpanContext().TraceID(); got != want {
			t.Errorf("lock.term's trace: got %v, want lock.campaign's %v", got, want)
		}
	})
	t.Run("lock.term records the term, the identity, the handover and the end", func(t *testing.T) {
		a := attrs(term)
		if got := a["locksmith.elect.term"].AsInt64(); got != number {
			t.Errorf("locksmith.elect.term: got %d, want %d", got, number)
		}
		if got := a["locksmith.elect.identity"].AsString(); got != "web-3" {
			t.Errorf("locksmith.elect.identity: got %q, want %q", got, "web-3")
		}
		if v, ok := a["locksmith.elect.handover"]; !ok || v.AsFloat64() != 0 {
			t.Errorf("locksmith.elect.handover: got %v (present %v), want 0: no leader before", v.AsFloat64(), ok)
		}
		if got := a["locksmith.elect.end"].AsString(); got != "resigned" {
			t.Errorf("locksmith.elect.end: got %q, want resigned", got)
		}
		for _, k := range []string{"error.type", "locksmith.elect.overrun"} {
			if v, ok := a[k]; ok {
				t.Errorf("%s: got %s, want none for a term resigned in time", k, v.Emit())
			}
		}
		if got := term.Status().Code; got != codes.Unset {
			t.Errorf("status: got %v, want %v", got, codes.Unset)
		}
	})
	t.Run("lock.term ends after lock.campaign, at the resignation", func(t *testing.T) {
		if !term.EndTime().After(campaign.EndTime()) {
			t.Errorf("lock.term ended at %v, want after lock.campaign's end %v", term.EndTime(), campaign.EndTime())
		}
		if rel := resigns[0]; term.EndTime().Before(rel.StartTime()) {
			t.Errorf("lock.term ended at %v, want after lock.resign started at %v: Run resigns before the term ends", term.EndTime(), rel.StartTime())
		}
	})
	t.Run("lock.resign records the term, linked to lock.term", func(t *testing.T) {
		rel := resigns[0]
		if got := attrs(rel)["locksmith.elect.term"].AsInt64(); got != number {
			t.Errorf("locksmith.elect.term: got %d, want %d", got, number)
		}
		if got := rel.Status().Code; got != codes.Unset {
			t.Errorf("status: got %v, want %v", got, codes.Unset)
		}
		if links := rel.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != term.SpanContext().SpanID() {
			t.Errorf("links: got %v, want one to lock.term %v", links, term.SpanContext().SpanID())
		}
	})
	t.Run("keys are omitted by default", func(t *testing.T) {
		for _, s := range []sdktrace.ReadOnlySpan{campaign, term, resigns[0]} {
			for k := range attrs(s) {
				if strings.Contains(k, "key") {
					t.Errorf("%s: got attribute %s, want no key", s.Name(), k)
				}
			}
		}
	})
	t.Run("the leader gauge is 1 while leading, 0 after", func(t *testing.T) {
		if got := gauge(leading["locksmith.elect.leader"], group); got["conformance"] != 1 || len(got) != 1 {
			t.Errorf("locksmith.elect.leader while leading: got %v, want map[conformance:1]", got)
		}
		if got := gauge(after["locksmith.elect.leader"], group); got["conformance"] != 0 || len(got) != 1 {
			t.Errorf("locksmith.elect.leader after: got %v, want map[conformance:0]", got)
		}
	})
	t.Run("the term gauge is the term's number", func(t *testing.T) {
		if got := gauge(after["locksmith.elect.term"], group); got["conformance"] != number || len(got) != 1 {
			t.Errorf("locksmith.elect.term: got %v, want map[conformance:%d]", got, number)
		}
	})
	t.Run("no handover or overrun is recorded without one", func(t *testing.T) {
		for _, name := range []string{"locksmith.elect.handover.duration", "locksmith.elect.overruns", "locksmith.elect.overrun.duration"} {
			if _, ok := after[name]; ok {
				t.Errorf("%s: got it recorded, want none", name)
			}
		}
	})
	t.Run("units", func(t *testing.T) {
		wantUnits(t, after, map[string]string{"locksmith.elect.leader": "{term}", "locksmith.elect.term": "{term}"})
	})
}

// TestElectKeyPolicy: the election spans record the key as the key
// policy says.
func TestElectKeyPolicy(t *testing.T) {
	addr, _ := redistest.Addr(t)
	for _, c := range []struct {
		name   string
		policy lockotel.KeyPolicy
		attr   string
		value  func(key string) string
	}{
		{"hashed", lockotel.KeysHashed, "locksmith.lock.key_hash", hashKey},
		{"raw", lockotel.KeysRaw, "locksmith.lock.key", func(key string) string { return key }},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecording(t, lockotel.WithKeys(c.policy))
			key := conformance.Key(t)
			ctx := context.Background()
			term, err := rec.elector(t, addr, key, nil).Campaign(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := term.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"lock.campaign", "lock.term", "lock.resign"} {
				s := only(t, rec.ended(name), name)
				if got := attrs(s)[c.attr].AsString(); got != c.value(key) {
					t.Errorf("%s: %s: got %q, want %q", name, c.attr, got, c.value(key))
				}
			}
		})
	}
}

// TestElectCampaignError: a campaign that its context ends records the
// error as lock.obtain does, and no term.
func TestElectCampaignError(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rec := newRecording(t)
	key := conformance.Key(t)
	ctx := context.Background()
	held, err := rec.elector(t, addr, key, nil).Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Resign(ctx)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := rec.elector(t, addr, key, nil).Campaign(cctx); err == nil {
		t.Fatal("the second Campaign: got a term, want the context's error")
	}
	s := rec.ended("lock.campaign")[1]
	a := attrs(s)
	if got := a["error.type"].AsString(); got != "timeout" {
		t.Errorf("error.type: got %q, want timeout", got)
	}
	if got := s.Status().Code; got != codes.Error {
		t.Errorf("status: got %v, want %v", got, codes.Error)
	}
	if d := s.Status().Description; strings.Contains(d, key) {
		t.Errorf("status description: got %q, want the key redacted", d)
	}
	if _, ok := a["locksmith.elect.term"]; ok {
		t.Errorf("locksmith.elect.term: got %v, want none for a campaign that failed", a["locksmith.elect.term"].Emit())
	}
}

// TestElectHandover: a candidate elected when the leader it waited for
// resigned records how long the leadership was vacant.
func TestElectHandover(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rec := newRecording(t)
	key := conformance.Key(t)
	ctx := context.Background()
	first, err := rec.elector(t, addr, key, nil).Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The second candidate waits for a release's message once it is
	// subscribed, and has found the first leader since: its wake-up then
	// says when the leadership fell vacant.
	var subscribed, waiting atomic.Bool
	met := make(chan struct{})
	watch := lock.WithHooks(&lock.Hooks{
		Wait: func(ctx context.Context, e lock.Event) {
			if e.Op == "woken" && e.Reason == "subscribed" {
				subscribed.Store(true)
			}
		},
		Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			err := next(ctx)
			if errors.Is(err, lock.ErrNotObtained) && subscribed.Load() && !waiting.Swap(true) {
				close(met)
			}
			return err
		},
	})
	elected := make(chan *elect.Term, 1)
	go func() {
		term, err := rec.elector(t, addr, key, []lock.Option{watch}).Campaign(ctx)
		if err != nil {
			t.Errorf("the second Campaign: got %v, want a term", err)
		}
		elected <- term
	}()
	select {
	case <-met:
	case <-time.After(10 * time.Second):
		t.Fatal("the second candidate: got no attempt after it subscribed, want one that found the first leader")
	}
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-elected
	if second == nil {
		t.FailNow()
	}
	if err := second.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	m := rec.metrics(t)
	terms := rec.ended("lock.term")

	t.Run("the histogram records the handover", func(t *testing.T) {
		count, sum := histogram(m["locksmith.elect.handover.duration"])
		if count != 1 || sum <= 0 {
			t.Errorf("locksmith.elect.handover.duration: got count %d, sum %vs; want 1, more than 0", count, sum)
		}
		wantUnits(t, m, map[string]string{"locksmith.elect.handover.duration": "s"})
	})
	t.Run("the histogram is by group", func(t *testing.T) {
		if got := by(m["locksmith.elect.handover.duration"], group); len(got) != 1 || got["conformance"] != 1 {
			t.Errorf("locksmith.elect.handover.duration by group: got %v, want map[conformance:1]", got)
		}
	})
	t.Run("the term's span records the handover", func(t *testing.T) {
		if len(terms) != 2 {
			t.Fatalf("lock.term spans: got %d, want 2", len(terms))
		}
		if got := attrs(terms[1])["locksmith.elect.term"].AsInt64(); got != second.Number() {
			t.Fatalf("the second lock.term's term: got %d, want %d", got, second.Number())
		}
		if got := attrs(terms[1])["locksmith.elect.handover"].AsFloat64(); got <= 0 {
			t.Errorf("the second lock.term's locksmith.elect.handover: got %vs, want more than 0", got)
		}
	})
}

// cutOff returns an option whose hooks keep the refreshes of a Locker
// from the server while cut is set, as the conformance suite's fault does:
// each hangs until its context ends, as it would if the process were cut
// off.
func cutOff(cut *atomic.Bool) lock.Option {
	return lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
		if e.Op == "refresh" && cut.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return next(ctx)
	}})
}

// TestElectOverrun: a leader whose refreshes are cut off steps down, and
// its lead returns only once the next leader is elected: an overrun, which
// the metrics count and the term's span records, and whose span ends once,
// after lead returned.
func TestElectOverrun(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rec := newRecording(t)
	key := conformance.Key(t)
	ctx := context.Background()
	const lease = 600 * time.Millisecond // the conformance suite's
	timing := []elect.Option{elect.WithLease(lease), elect.WithStopGrace(lease / 4), elect.WithInterval(lease / 10)}
	var cut atomic.Bool
	old := rec.elector(t, addr, key, []lock.Option{cutOff(&cut)}, timing...)
	next, err := elect.New(singleLocker(t, addr), key, timing...)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		termsWhileOverrunning int
		leaderWhileOverrun    map[string]int64
		successor             *elect.Term
	)
	var leadReturned time.Time
	err = old.Run(rctx, func(lctx context.Context, _ *elect.Term) error {
		cut.Store(true)
		<-lctx.Done() // it stepped down
		// It goes on past its lease, until the next leader is in.
		term, err := next.Campaign(ctx)
		if err != nil {
			t.Errorf("the next candidate's Campaign: got %v, want a term", err)
		}
		successor = term
		termsWhileOverrunning = len(rec.ended("lock.term"))
		leaderWhileOverrun = gauge(rec.metrics(t)["locksmith.elect.leader"], group)
		stop()
		leadReturned = time.Now()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run: got %v, want context.Canceled", err)
	}
	if successor != nil {
		defer successor.Resign(ctx)
	}
	m := rec.metrics(t)
	terms := rec.ended("lock.term")

	t.Run("the overrun counter counts the term", func(t *testing.T) {
		if got := by(m["locksmith.elect.overruns"], group); len(got) != 1 || got["conformance"] != 1 {
			t.Errorf("locksmith.elect.overruns by group: got %v, want map[conformance:1]", got)
		}
	})
	t.Run("the overrun histogram records the overrun", func(t *testing.T) {
		count, sum := histogram(m["locksmith.elect.overrun.duration"])
		if count != 1 || sum <= 0 {
			t.Errorf("locksmith.elect.overrun.duration: got count %d, sum %vs; want 1, more than 0", count, sum)
		}
		wantUnits(t, m, map[string]string{"locksmith.elect.overruns": "{term}", "locksmith.elect.overrun.duration": "s"})
	})
	t.Run("lock.term records the overrun and the step-down", func(t *testing.T) {
		s := only(t, terms, "lock.term")
		a := attrs(s)
		if got := a["locksmith.elect.overrun"].AsFloat64(); got <= 0 {
			t.Errorf("locksmith.elect.overrun: got %vs, want more than 0", got)
		}
		if got := a["locksmith.elect.end"].AsString(); got != "stepped_down" {
			t.Errorf("locksmith.elect.end: got %q, want stepped_down", got)
		}
		// The refreshes failed with their context's deadline.
		if got := a["error.type"].AsString(); got != "timeout" && got != "lapsed" {
			t.Errorf("error.type: got %q, want timeout or lapsed", got)
		}
		if got := s.Status().Code; got != codes.Error {
			t.Errorf("status: got %v, want %v", got, codes.Error)
		}
	})
	t.Run("lock.term ends once, after lead returned", func(t *testing.T) {
		if termsWhileOverrunning != 0 {
			t.Errorf("lock.term spans ended while lead overran: got %d, want 0", termsWhileOverrunning)
		}
		s := only(t, terms, "lock.term")
		if s.EndTime().Before(leadReturned) {
			t.Errorf("lock.term ended at %v, want after lead returned at %v", s.EndTime(), leadReturned)
		}
	})
	t.Run("the leader gauge returns to 0 after lead returned", func(t *testing.T) {
		if leaderWhileOverrun["conformance"] != 1 {
			t.Errorf("locksmith.elect.leader while lead overran: got %v, want map[conformance:1]: Ended comes after lead", leaderWhileOverrun)
		}
		if got := gauge(m["locksmith.elect.leader"], group); len(got) != 1 || got["conformance"] != 0 {
			t.Errorf("locksmith.elect.leader after: got %v, want map[conformance:0]", got)
		}
	})
}

// TestElectEndedBeforeElected: a term that ends before its Elected hook
// ran (here, an outer hook resigns it) has its span ended once, and leaves
// the leader gauge at 0.
func TestElectEndedBeforeElected(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rec := newRecording(t)
	ctx := context.Background()
	resigned := make(chan error, 1)
	first := elect.WithHooks(&elect.Hooks{Elected: func(ctx context.Context, term *elect.Term, _ time.Duration) {
		resigned <- term.Resign(ctx) // runs the Ended hooks, before the next Elected hook
	}})
	term, err := rec.elector(t, addr, conformance.Key(t), nil, first).Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-resigned; err != nil {
		t.Fatalf("Resign: got %v, want nil", err)
	}
	if term.Err() == nil {
		t.Fatal("the term: got it held, want it resigned")
	}
	m := rec.metrics(t)

	t.Run("lock.term ends once, resigned", func(t *testing.T) {
		s := only(t, rec.ended("lock.term"), "lock.term")
		if got := attrs(s)["locksmith.elect.end"].AsString(); got != "resigned" {
			t.Errorf("locksmith.elect.end: got %q, want resigned", got)
		}
	})
	t.Run("the leader gauge is 0", func(t *testing.T) {
		if got := gauge(m["locksmith.elect.leader"], group); len(got) != 1 || got["conformance"] != 0 {
			t.Errorf("locksmith.elect.leader: got %v, want map[conformance:0]", got)
		}
	})
}

// TestElectInstrumentedLocker: an Elector over a Locker that NewLocker
// instruments too, with raw keys, whose leader proclaims a new identity.
func TestElectInstrumentedLocker(t *testing.T) {
	addr, _ := redistest.Addr(t)
	rec := newRecording(t, lockotel.WithKeys(lockotel.KeysRaw))
	var (
		mu     sync.Mutex
		tokens []string
	)
	catch := lock.WithHooks(&lock.Hooks{Obtain: func(ctx context.Context, e lock.Event, next func(context.Context) (*lock.Lock, error)) (*lock.Lock, error) {
		lk, err := next(ctx)
		if lk != nil {
			mu.Lock()
			tokens = append(tokens, lk.Token())
			mu.Unlock()
		}
		return lk, err
	}})
	key := conformance.Key(t)
	e, err := elect.New(rec.wrap(singleLocker(t, addr)).With(catch), key, elect.WithIdentity("web-3"),
		elect.WithHooks(lockotel.ElectHooks(rec.opts...)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	err = e.Run(ctx, func(lctx context.Context, term *elect.Term) error {
		if err := term.Proclaim(lctx, "web-3 addr=10.0.0.7:8080"); err != nil {
			return err
		}
		stop()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: got %v, want context.Canceled", err)
	}
	resign := rec.waitEnded(t, "lock.resign", 1)[0]
	term := rec.waitEnded(t, "lock.term", 1)[0]
	campaign := only(t, rec.ended("lock.campaign"), "lock.campaign")

	t.Run("no span or metric carries the token", func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		if len(tokens) == 0 {
			t.Fatal("tokens caught: got none, want the term's")
		}
		for _, name := range []string{"lock.campaign", "lock.term", "lock.resign", "lock.obtain", "lock.metadata", "lock.release"} {
			if len(rec.ended(name)) == 0 {
				t.Errorf("%s spans: got none, want some checked", name)
			}
		}
		if n := wantNoToken(t, rec, tokens); n < 10 {
			t.Errorf("telemetry pieces checked: got %d, want a full run", n)
		}
	})
	t.Run("lock.obtain is a child of lock.campaign", func(t *testing.T) {
		obtain := only(t, rec.ended("lock.obtain"), "lock.obtain")
		if got, want := obtain.Parent().SpanID(), campaign.SpanContext().SpanID(); got != want {
			t.Errorf("lock.obtain's parent: got %v, want lock.campaign's span %v", got, want)
		}
	})
	t.Run("lock.resign is a child of lock.release", func(t *testing.T) {
		release := only(t, rec.ended("lock.release"), "lock.release")
		if got, want := resign.Parent().SpanID(), release.SpanContext().SpanID(); got != want {
			t.Errorf("lock.resign's parent: got %v, want lock.release's span %v", got, want)
		}
	})
	t.Run("lock.term records the identity last proclaimed", func(t *testing.T) {
		if got, want := attrs(term)["locksmith.elect.identity"].AsString(), "web-3 addr=10.0.0.7:8080"; got != want {
			t.Errorf("locksmith.elect.identity: got %q, want %q", got, want)
		}
	})
}
