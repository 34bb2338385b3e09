package lockotel

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/locksmith-go/lock/elect"
)

// This file instruments an Elector of package elect, through its hooks.

// Attribute keys of an election's spans.
const (
	attrTerm     = attribute.Key("locksmith.elect.term")
	attrIdentity = attribute.Key("locksmith.elect.identity")
	attrHandover = attribute.Key("locksmith.elect.handover")
	attrTermEnd  = attribute.Key("locksmith.elect.end")
	attrOverrun  = attribute.Key("locksmith.elect.overrun")
)

// ElectHooks returns hooks that instrument an Elector of package elect
// with the spans and metrics of the package doc's elections, configured by
// the options of NewLocker (WithoutHolderTrace aside, which concerns
// locks):
//
//	e, err := elect.New(locker, "scheduler:leader", elect.WithHooks(lockotel.ElectHooks()))
//
// It records a lock.campaign span for each Campaign (Run's too), the whole
// wait; a lock.term span for each term, a child of its campaign's, from
// its election to its end (after Run's lead returned, when it ran); and a
// lock.resign span for each deletion of a term's key. The election's key
// is recorded as the key policy says (WithKeys); the metrics are by the
// group of the key (WithGroups). Each call returns hooks of their own, for
// as many Electors as you like; the groups are bounded per call. Wrap the
// Elector's Locker with NewLocker too for the spans of its Redis calls:
// lock.obtain and the term's lock.refresh spans are then children of
// lock.campaign, and lock.resign a child of lock.release, whose hooks wrap
// the Elector's.
//
// Given the no-op providers of the OpenTelemetry API for both, it returns
// nil, which elect.WithHooks ignores.
func ElectHooks(opts ...Option) *elect.Hooks {
	c, record := newConfig(opts)
	if !record {
		return nil
	}
	t := newElectTelemetry(c)
	return &elect.Hooks{Campaign: t.campaign, Elected: t.elected, Ended: t.ended, Resign: t.resign}
}

// electTelemetry is the telemetry of the Electors of one ElectHooks call.
type electTelemetry struct {
	*telemetry // its tracer, key policy and groups; no lock instrument
	leader     metric.Int64UpDownCounter
	term       metric.Int64Gauge
	handover   metric.Float64Histogram
	overruns   metric.Int64Counter
	overrun    metric.Float64Histogram

	sets  sync.Map // group → *measurement
	terms terms
}

func newElectTelemetry(c config) *electTelemetry {
	base, m := newScope(c)
	t := &electTelemetry{telemetry: base}
	t.leader = instrument(m.Int64UpDownCounter("locksmith.elect.leader", metric.WithUnit("{term}"),
		metric.WithDescription("Terms this process holds: 1 while it leads an election, 0 after.")))
	t.term = instrument(m.Int64Gauge("locksmith.elect.term", metric.WithUnit("{term}"),
		metric.WithDescription("Number of the last term this process was elected to.")))
	t.handover = instrument(m.Float64Histogram("locksmith.elect.handover.duration", metric.WithUnit("s"),
		metric.WithDescription("Time the leadership was vacant before a term, as its candidate saw it: from the release that woke it, or the end of the lease of the leader it found, to its election."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60)))
	t.overruns = instrument(m.Int64Counter("locksmith.elect.overruns", metric.WithUnit("{term}"),
		metric.WithDescription("Terms whose lead returned after the end of the lease, when another candidate could have been elected.")))
	t.overrun = instrument(m.Float64Histogram("locksmith.elect.overrun.duration", metric.WithUnit("s"),
		metric.WithDescription("Time by which a term's lead returned past the end of its lease."),
		metric.WithExplicitBucketBoundaries(0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300)))
	return t
}

// measure returns the measurement of the group of key.
func (t *electTelemetry) measure(key string) *measurement {
	g := t.group(key)
	if m, ok := t.sets.Load(g); ok {
		return m.(*measurement)
	}
	o := metric.WithAttributeSet(attribute.NewSet(attrGroup.String(g)))
	m, _ := t.sets.LoadOrStore(g, &measurement{add: []metric.AddOption{o}, record: []metric.RecordOption{o}})
	return m.(*measurement)
}

// keyAttrs returns the attributes that record key, as the key policy says.
func (t *electTelemetry) keyAttrs(key string) []attribute.KeyValue {
	switch t.keys {
	case KeysHashed:
		return []attribute.KeyValue{attrKeyHash.String(hashKey(key))}
	case KeysRaw:
		return []attribute.KeyValue{attrKey.String(key)}
	}
	return nil
}

// electorKey is the key of the Elector of a campaign in its context, for
// the Elected hook, which is not given it.
type electorKey struct{}

func (t *electTelemetry) campaign(ctx context.Context, e *elect.Elector, next func(context.Context) (*elect.Term, error)) (*elect.Term, error) {
	ctx, span := t.tracer.Start(context.WithValue(ctx, electorKey{}, e), "lock.campaign", trace.WithAttributes(t.keyAttrs(e.Key())...))
	defer span.End() // deferred, so that a campaign that panics ends its span
	term, err := next(ctx)
	switch {
	case !span.IsRecording():
	case err != nil:
		span.SetStatus(codes.Error, t.describeErr(err, e.Key()))
		span.SetAttributes(attrError.String(errorType(err)))
	default:
		span.SetAttributes(attrTerm.Int64(term.Number()), attrIdentity.String(term.Identity()))
	}
	return term, err
}

func (t *electTelemetry) elected(ctx context.Context, term *elect.Term, handover time.Duration) {
	var key string
	if e, ok := ctx.Value(electorKey{}).(*elect.Elector); ok {
		key = e.Key()
	}
	attrs := append(t.keyAttrs(key), attrTerm.Int64(term.Number()), attrIdentity.String(term.Identity()),
		attrHandover.Float64(handover.Seconds()))
	_, span := t.tracer.Start(ctx, "lock.term", trace.WithTimestamp(term.Elected()), trace.WithAttributes(attrs...))
	m := t.measure(key)
	t.leader.Add(ctx, 1, m.add...) // before the term is known, so that its end's -1 comes after
	t.term.Record(ctx, term.Number(), m.record...)
	if handover > 0 {
		t.handover.Record(ctx, handover.Seconds(), m.record...)
	}
	if st, ended := t.terms.elected(term, key, span); ended {
		t.endTerm(term, st) // its Ended came first
	}
}

func (t *electTelemetry) ended(term *elect.Term, err error, overrun time.Duration) {
	if st, elected := t.terms.ended(term, err, overrun, time.Now()); elected {
		t.endTerm(term, st)
	}
}

// endTerm ends the lock.term span of term, which Elected started and
// Ended ended, as st records them, and counts the term's end.
func (t *electTelemetry) endTerm(term *elect.Term, st termEnd) {
	ctx := context.Background()
	m := t.measure(st.key)
	t.leader.Add(ctx, -1, m.add...)
	if st.overrun > 0 {
		t.overruns.Add(ctx, 1, m.add...)
		t.overrun.Record(ctx, st.overrun.Seconds(), m.record...)
	}
	if !st.span.IsRecording() {
		return
	}
	end := "lost"
	switch {
	case errors.Is(st.err, elect.ErrResigned):
		end = "resigned"
	case errors.Is(st.err, elect.ErrStepDown):
		end = "stepped_down"
	}
	attrs := []attribute.KeyValue{attrTermEnd.String(end), attrIdentity.String(term.Identity())} // as last proclaimed
	if end != "resigned" {
		attrs = append(attrs, attrError.String(errorType(st.err)))
		st.span.SetStatus(codes.Error, t.describeErr(st.err, st.key))
	}
	if st.overrun > 0 {
		attrs = append(attrs, attrOverrun.Float64(st.overrun.Seconds()))
		if end == "resigned" {
			st.span.SetStatus(codes.Error, "overrun: lead returned after the end of the lease")
		}
	}
	st.span.SetAttributes(attrs...)
	st.span.End(trace.WithTimestamp(st.at))
}

func (t *electTelemetry) resign(ctx context.Context, term *elect.Term, next func(context.Context) error) error {
	key, termSpan := t.terms.lookup(term)
	opts := []trace.SpanStartOption{trace.WithAttributes(append(t.keyAttrs(key), attrTerm.Int64(term.Number()))...)}
	if sc := termSpan.SpanContext(); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := t.tracer.Start(ctx, "lock.resign", opts...)
	defer span.End()
	err := next(ctx)
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, t.describeErr(err, key))
		span.SetAttributes(attrError.String(errorType(err)))
	}
	return err
}

// terms is what the hooks know of each term: its key and lock.term span,
// from Elected, and its end, from Ended, each of which package elect calls
// once per term. Either hook can come first: the
// term can end (on the goroutine that watches it) before its Elected hook
// ran, and a term whose refreshes failed to start ends with no Elected at
// all. Resign can come after Ended, and needs the key. So an entry lives as
// long as its Term does, not as long as the term: the map holds its Term
// weakly, and the entry is deleted once the Term is garbage-collected.
type terms struct {
	mu sync.Mutex
	m  map[weak.Pointer[elect.Term]]*termState
}

// termState is what the hooks know of one term.
type termState struct {
	termEnd
	elected, ended bool
}

// termEnd is what ending a term's span takes.
type termEnd struct {
	key     string        // from Elected
	span    trace.Span    // lock.term, from Elected
	err     error         // from Ended
	overrun time.Duration // from Ended
	at      time.Time     // when Ended ran
}

// state returns the state of term, new if need be. ts.mu must be held.
func (ts *terms) state(term *elect.Term) *termState {
	wp := weak.Make(term)
	if st, ok := ts.m[wp]; ok {
		return st
	}
	if ts.m == nil {
		ts.m = make(map[weak.Pointer[elect.Term]]*termState)
	}
	st := &termState{}
	ts.m[wp] = st
	runtime.AddCleanup(term, ts.forget, wp)
	return st
}

// forget deletes the state of a term that was garbage-collected.
func (ts *terms) forget(wp weak.Pointer[elect.Term]) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.m, wp)
}

// elected records the Elected hook of term, and returns how to end its
// span if its Ended hook came first.
func (ts *terms) elected(term *elect.Term, key string, span trace.Span) (termEnd, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	st := ts.state(term)
	st.elected, st.key, st.span = true, key, span
	return st.termEnd, st.ended
}

// ended records the Ended hook of term, and returns how to end its span
// if its Elected hook came first.
func (ts *terms) ended(term *elect.Term, err error, overrun time.Duration, at time.Time) (termEnd, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	st := ts.state(term)
	st.ended, st.err, st.overrun, st.at = true, err, overrun, at
	return st.termEnd, st.elected
}

// lookup returns the key and the lock.term span of term, if its Elected
// hook ran: otherwise "" and a span that records nothing.
func (ts *terms) lookup(term *elect.Term) (string, trace.Span) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if st, ok := ts.m[weak.Make(term)]; ok && st.elected {
		return st.key, st.span
	}
	return "", trace.SpanFromContext(context.Background())
}
