// Package lockotel instruments any lock.Locker with OpenTelemetry, so that
// SREs can see which locks are hot, who waits and for how long, and when a
// holder loses its lock. Its import path ends in otel; its name is lockotel,
// so it does not clash with go.opentelemetry.io/otel at call sites:
//
//	import lockotel "github.com/locksmith-go/lock/otel"
//
//	locker = lockotel.NewLocker(locker) // the global providers by default
//
// It depends on the OpenTelemetry API only; bring your own SDK. [NewLocker]
// records a client span for each Obtain (the whole wait), Refresh, Release,
// TTL, SetMetadata, Inspect, Break, clean-up and batch of auto-refreshes;
// span events for contended attempts, Redlock nodes' answers and waiting;
// and metrics of the time to acquire and to hold, attempts, locks held and
// lost, wake-ups, lost notifications, handoffs and queue lengths, by lock
// group ([WithGroups]). Keys are omitted by default ([WithKeys]). No span, event
// or metric ever carries a token or a waiter's id, and no metric attribute
// is a key unless a group function makes it one. [ElectHooks] instruments
// an Elector of package elect: its campaigns, terms and resignations, the
// leader it is, its handovers and its overruns. The repository's
// docs/observability.md guide lists every span, attribute and metric.
package lockotel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/wait"
)

// scopeName is the instrumentation scope: this package's import path.
const scopeName = "github.com/locksmith-go/lock/otel"

// version returns the version of the module, as the build records it
// ("devel" when it is the main module or unknown).
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/locksmith-go/lock" {
				if m.Replace != nil && m.Replace.Version != "" {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "devel"
}

// KeyPolicy says how spans record the lock's key.
type KeyPolicy int

const (
	// KeysOmitted records no key: keys can be personal data. The default.
	KeysOmitted KeyPolicy = iota
	// KeysHashed records the first 16 hex digits of the key's SHA-256 as
	// locksmith.lock.key_hash: enough to tell the hot locks apart and to
	// match a key you know, with no raw key in the telemetry.
	KeysHashed
	// KeysRaw records the key as locksmith.lock.key.
	KeysRaw
)

// Option configures NewLocker and ElectHooks.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tp     trace.TracerProvider
	mp     metric.MeterProvider
	keys   KeyPolicy
	groups func(key string) string

	noHolderTrace bool // WithoutHolderTrace
}

// WithTracerProvider sets the TracerProvider. The default is the global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets the MeterProvider. The default is the global one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithKeys sets how spans record keys. The default is KeysOmitted.
func WithKeys(p KeyPolicy) Option { return optionFunc(func(c *config) { c.keys = p }) }

// WithGroups sets the function that names a key's group, the
// locksmith.lock.group attribute of every metric: a name shared by many
// keys, such as a kind of job, so that the metrics tell the hot kinds of
// lock apart without a series per key. A multi-key lock is grouped by its
// first key. The default group is the key's prefix up to its first ':' or
// '{' (the start of a hash tag): "report:daily" is in "report",
// "orders{42}" in "orders". A key with neither, or that starts with one,
// such as "{user:7}:lock", has no prefix: its group is "_ungrouped", as is
// a key for which group returns "". A function that returns the key gives
// a series per key. Whatever the function, a Locker returned by NewLocker
// records at most 100 distinct groups; the keys of any further group are
// recorded in the group "_overflow". group is called for every measurement,
// from many goroutines: make it fast and safe for concurrent use. A nil
// group is the default.
func WithGroups(group func(key string) string) Option {
	return optionFunc(func(c *config) { c.groups = group })
}

// The groups of the keys that have none, and of the keys beyond maxGroups.
const (
	ungrouped = "_ungrouped"
	overflow  = "_overflow"
	maxGroups = 100
)

// prefixGroup is the default group of key: its prefix up to its first ':'
// or '{', or ungrouped.
func prefixGroup(key string) string {
	if i := strings.IndexAny(key, ":{"); i > 0 {
		return key[:i]
	}
	return ungrouped
}

// Attribute keys.
const (
	attrStrategy = attribute.Key("locksmith.lock.strategy")
	attrKey      = attribute.Key("locksmith.lock.key")
	attrKeyHash  = attribute.Key("locksmith.lock.key_hash")
	attrKeys     = attribute.Key("locksmith.lock.keys")
	attrPermits  = attribute.Key("locksmith.lock.permits")
	attrSide     = attribute.Key("locksmith.lock.side")
	attrAttempts = attribute.Key("locksmith.lock.attempts")
	attrWait     = attribute.Key("locksmith.lock.wait")
	attrOutcome  = attribute.Key("locksmith.lock.outcome")
	attrValidity = attribute.Key("locksmith.lock.validity")
	attrTTL      = attribute.Key("locksmith.lock.ttl")
	attrAttempt  = attribute.Key("locksmith.lock.attempt")
	attrNode     = attribute.Key("locksmith.lock.node")
	attrEnd      = attribute.Key("locksmith.lock.end")
	attrRank     = attribute.Key("locksmith.lock.queue.rank")
	attrReason   = attribute.Key("locksmith.lock.wake.reason")
	attrError    = attribute.Key("error.type")
	attrServer   = attribute.Key("server.address")
	attrBatch    = attribute.Key("locksmith.lock.batch.size")
	attrGroup    = attribute.Key("locksmith.lock.group")
)

var (
	dbSystem   = attribute.String("db.system.name", "redis")
	clientKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)} // one slice: no allocation per span
)

// NewLocker returns l instrumented: its Obtain, ObtainMany, Inspect and
// Break calls, and the locks they return, produce the spans and metrics of
// the package doc. It is l.With(lock.WithHooks(h)), for hooks h of its own:
// l is left as it was, and the two share their strategy. A span is a child
// of the span in its call's context; auto-refresh's lock.refresh spans are
// children of the context given to lock.Do or Lock.StartRefresh. The
// lock.inspect and lock.break spans record the read, not what it found: no
// holder's fingerprint or metadata, which identify holders that no other
// span names, and which the caller has in the lock.State.
//
// Given the no-op providers of the OpenTelemetry API (trace/noop and
// metric/noop), which record nothing, it returns l itself, which then
// costs nothing more. The global providers are always instrumented, since
// an SDK can be installed in them later.
func NewLocker(l *lock.Locker, opts ...Option) *lock.Locker {
	c, record := newConfig(opts)
	if !record {
		return l
	}
	t := newTelemetry(c)
	h := &lock.Hooks{
		Obtain:  t.obtain,
		Attempt: t.attempt,
		Op:      t.op,
		Batch:   t.batch,
		Node:    t.node,
		Wait:    t.wait,
		Ended:   t.ended,
	}
	if !c.noHolderTrace {
		h.Trace = holderTrace
	}
	return l.With(lock.WithHooks(h))
}

// newConfig applies opts to the default configuration, and reports
// whether its providers can record: false when both are the no-op
// providers of the OpenTelemetry API.
func newConfig(opts []Option) (c config, record bool) {
	c = config{tp: otel.GetTracerProvider(), mp: otel.GetMeterProvider()}
	for _, o := range opts {
		o.apply(&c)
	}
	_, noTraces := c.tp.(tracenoop.TracerProvider)
	_, noMetrics := c.mp.(metricnoop.MeterProvider)
	return c, !noTraces || !noMetrics
}

type telemetry struct {
	tracer  trace.Tracer
	keys    KeyPolicy
	acquire metric.Float64Histogram
	hold    metric.Float64Histogram
	tries   metric.Int64Counter
	active  metric.Int64UpDownCounter
	lost    metric.Int64Counter
	wakeups metric.Int64Counter
	missed  metric.Int64Counter
	handoff metric.Float64Histogram
	queue   metric.Int64Histogram

	groupOf  func(key string) string
	groupsMu sync.Mutex  // held to admit a group to groups
	groups   sync.Map    // group → itself, for the groups admitted, at most maxGroups
	admitted int         // len(groups), under groupsMu
	full     atomic.Bool // admitted == maxGroups: the other groups take no lock

	strategies sync.Map // lockKey → *everyLock; written once per strategy and group
	sets       sync.Map // setKey → *measurement, for the sets that everyLock lacks; written once per set
	spans      sync.Map // spanKey → *spanStart; written once per strategy and server
	holds      holds    // the lock.hold spans of the locks held

	// The entries of strategies and spans used last, which are checked
	// first: a Locker has one strategy, over a few servers, and its hot
	// locks are of a few groups, so that they are often the ones sought,
	// and comparing their names costs less than a lookup.
	lastLock atomic.Pointer[everyLock]
	lastSpan atomic.Pointer[spanStart]
}

// spanKey names the attributes that every span of a strategy and server
// starts with (see commonAttrs).
type spanKey struct{ strategy, server string }

// spanStart is the attributes that every span of a strategy and server
// starts with.
type spanStart struct {
	spanKey
	attrs []attribute.KeyValue
}

// setKey names a metric attribute set: the strategy, the group, and the
// values of the other attributes (empty ones are left out). The sets are
// few (strategies × groups × outcomes, with groups bounded by maxGroups),
// so each is built once and kept.
type setKey struct{ strategy, group, outcome, errType, end, reason string }

// lockKey names the sets of an everyLock.
type lockKey struct{ strategy, group string }

// measurement holds one attribute set as the option lists that Add and
// Record take, so that recording allocates nothing.
type measurement struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// everyLock holds, for one strategy and group, the attribute sets that
// every lock records: its strategy and group alone (locksmith.lock.active),
// an attempt or an Obtain that acquired (locksmith.lock.attempts,
// acquire.duration), and a release (hold.duration).
type everyLock struct {
	lockKey
	base, acquired, released *measurement
}

// measure returns the measurement of the set k for a lock of key, whose
// group it fills in. Those of everyLock take no lookup when the strategy
// and group are the last one's, and one by them alone otherwise, cheaper
// than one by the whole key; the others, one by k.
func (t *telemetry) measure(key string, k setKey) *measurement {
	k.group = t.group(key)
	sets := t.lastLock.Load()
	if sets == nil || sets.lockKey != (lockKey{k.strategy, k.group}) {
		lk := lockKey{k.strategy, k.group}
		if s, ok := t.strategies.Load(lk); ok {
			sets = s.(*everyLock)
		} else {
			s, _ := t.strategies.LoadOrStore(lk, &everyLock{
				lockKey:  lk,
				base:     newMeasurement(setKey{strategy: k.strategy, group: k.group}),
				acquired: newMeasurement(setKey{strategy: k.strategy, group: k.group, outcome: "acquired"}),
				released: newMeasurement(setKey{strategy: k.strategy, group: k.group, end: "released"}),
			})
			sets = s.(*everyLock)
		}
		t.lastLock.Store(sets)
	}
	switch (setKey{outcome: k.outcome, errType: k.errType, end: k.end, reason: k.reason}) {
	case setKey{}:
		return sets.base
	case setKey{outcome: "acquired"}:
		return sets.acquired
	case setKey{end: "released"}:
		return sets.released
	}
	if m, ok := t.sets.Load(k); ok {
		return m.(*measurement)
	}
	m, _ := t.sets.LoadOrStore(k, newMeasurement(k))
	return m.(*measurement)
}

// group returns the group of key that the metrics record: the group
// function's, if it is one of the first maxGroups distinct ones, or
// overflow. The last lock's group takes no lookup.
func (t *telemetry) group(key string) string {
	g := t.groupOf(key)
	if g == "" {
		g = ungrouped
	}
	if last := t.lastLock.Load(); last != nil && last.group == g {
		return last.group
	}
	if known, ok := t.groups.Load(g); ok {
		return known.(string)
	}
	if t.full.Load() {
		return overflow
	}
	t.groupsMu.Lock()
	defer t.groupsMu.Unlock()
	if known, ok := t.groups.Load(g); ok {
		return known.(string)
	}
	if t.admitted == maxGroups {
		t.full.Store(true)
		return overflow
	}
	g = strings.Clone(g) // a group cut from a key would keep the whole key
	t.groups.Store(g, g)
	t.admitted++
	return g
}

// newMeasurement builds the measurement of the set k.
func newMeasurement(k setKey) *measurement {
	kvs := []attribute.KeyValue{attrStrategy.String(k.strategy), attrGroup.String(k.group)}
	for _, kv := range []attribute.KeyValue{attrOutcome.String(k.outcome), attrError.String(k.errType), attrEnd.String(k.end), attrReason.String(k.reason)} {
		if kv.Value.AsString() != "" {
			kvs = append(kvs, kv)
		}
	}
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return &measurement{add: []metric.AddOption{o}, record: []metric.RecordOption{o}}
}

func newTelemetry(c config) *telemetry {
	t, m := newScope(c)
	t.acquire = instrument(m.Float64Histogram("locksmith.lock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time Obtain took, waiting included."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)))
	t.hold = instrument(m.Float64Histogram("locksmith.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a lock was held, from Obtain to its release or loss."),
		metric.WithExplicitBucketBoundaries(0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)))
	t.tries = instrument(m.Int64Counter("locksmith.lock.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts to obtain a lock, by outcome.")))
	t.active = instrument(m.Int64UpDownCounter("locksmith.lock.active", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held by this process.")))
	t.lost = instrument(m.Int64Counter("locksmith.lock.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks found gone, or whose validity lapsed before a refresh confirmed them.")))
	t.wakeups = instrument(m.Int64Counter("locksmith.lock.wait.wakeups", metric.WithUnit("{wakeup}"),
		metric.WithDescription("Times waiters woke to try again, by reason.")))
	t.missed = instrument(m.Int64Counter("locksmith.lock.wait.missed", metric.WithUnit("{notification}"),
		metric.WithDescription("Lost notifications: locks obtained after a timer woke the waiter though a message was due.")))
	t.handoff = instrument(m.Float64Histogram("locksmith.lock.handoff.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the end of a wait, when the waiter woke, to the lock obtained: the attempt that took it over."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)))
	t.queue = instrument(m.Int64Histogram("locksmith.lock.queue.length", metric.WithUnit("{waiter}"),
		metric.WithDescription("Length of the queue that a waiter joined, itself included: its rank, 1 for the head."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 10, 20, 50, 100, 200, 500, 1000)))
	return t
}

// newScope returns the telemetry of c without its instruments: its
// tracer, key policy and groups; and the meter to build them with.
func newScope(c config) (*telemetry, metric.Meter) {
	t := &telemetry{
		tracer: c.tp.Tracer(scopeName, trace.WithInstrumentationVersion(version())),
		keys:   c.keys,

		groupOf: c.groups,
	}
	if t.groupOf == nil {
		t.groupOf = prefixGroup
	}
	return t, c.mp.Meter(scopeName, metric.WithInstrumentationVersion(version()))
}

// instrument returns v, handing err to otel.Handle: there is no caller to
// return it to, and the instrument falls back to a no-op.
func instrument[T any](v T, err error) T {
	if err != nil {
		otel.Handle(err)
	}
	return v
}

// spanAttrs returns the attributes every span of e gets, which the callers
// must not change: those of a lock of one key, whose key is omitted (the
// common case), are commonAttrs' shared list, and cost no allocation.
func (t *telemetry) spanAttrs(e lock.Event) []attribute.KeyValue {
	attrs := t.commonAttrs(e.Strategy, e.Server)
	if t.keys == KeysOmitted && e.Keys == 0 && e.Permits == 0 && e.Side == "" {
		return attrs
	}
	switch t.keys { // appending copies the shared list, whose capacity is its length
	case KeysHashed:
		attrs = append(attrs, attrKeyHash.String(hashKey(e.Key)))
	case KeysRaw:
		attrs = append(attrs, attrKey.String(e.Key))
	}
	if e.Keys > 0 { // a lock of several keys: their number, never the others
		attrs = append(attrs, attrKeys.Int(e.Keys))
	}
	if e.Permits > 0 {
		attrs = append(attrs, attrPermits.Int(e.Permits))
	}
	if e.Side != "" {
		attrs = append(attrs, attrSide.String(e.Side))
	}
	return attrs
}

// commonAttrs returns the attributes that every span of strategy and
// server starts with: db.system.name, the strategy and, when known, the
// server. The list is built once per pair and shared: never change it. Its
// capacity is its length, so that appending to it copies it.
func (t *telemetry) commonAttrs(strategy, server string) []attribute.KeyValue {
	k := spanKey{strategy, server}
	if last := t.lastSpan.Load(); last != nil && last.spanKey == k {
		return last.attrs
	}
	var start *spanStart
	if s, ok := t.spans.Load(k); ok {
		start = s.(*spanStart)
	} else {
		attrs := []attribute.KeyValue{dbSystem, attrStrategy.String(strategy)}
		if server != "" {
			attrs = append(attrs, attrServer.String(server))
		}
		s, _ := t.spans.LoadOrStore(k, &spanStart{k, attrs[:len(attrs):len(attrs)]})
		start = s.(*spanStart)
	}
	t.lastSpan.Store(start)
	return start.attrs
}

func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// describeErr is the span status description of err: its text, with the key
// and the keys of a lock of several keys (which errors quote, the latter in
// *lock.KeyError) written as the policy allows.
func (t *telemetry) describeErr(err error, key string) string {
	if t.keys == KeysRaw {
		return err.Error()
	}
	msg := err.Error()
	hide := func(k string) {
		shown := "<key>"
		if t.keys == KeysHashed {
			shown = "<key " + hashKey(k) + ">"
		}
		msg = strings.ReplaceAll(msg, strconv.Quote(k), shown)
	}
	for _, ke := range lock.KeyErrors(err) {
		hide(ke.Key)
	}
	hide(key)
	return msg
}

// obtainState is the state of one Obtain whose span records: its attempts,
// counted by the Attempt hook, and the span's attributes, which the span is
// given in one call as it ends, so that the SDK grows its list of
// attributes once. buf holds them all, within this one allocation, for a
// lock of one key whose key is omitted: db.system.name, the strategy, the
// server, then the attempts, the wait, the outcome, and the validity or
// error.type. It is also the context that the Obtain runs in, which
// carries it to the Attempt hook without a context of its own.
type obtainState struct {
	context.Context                      // the Obtain's, with its span
	attempts        int                  // counted by the Attempt hook
	attemptStart    time.Time            // when the last attempt started
	hold            trace.Span           // the lock.hold span of the lock the Obtain returned
	holder          []attribute.KeyValue // the last holder that an attempt met (see contended)
	linked          string               // the trace of the last holder linked to
	attrs           []attribute.KeyValue // over buf, or a list of its own if they outgrow it
	buf             [7]attribute.KeyValue
}

// stateKey is the key of the obtainState in its context.
type stateKey struct{}

// Value returns the state itself for stateKey, and the values of the
// Obtain's context for any other key.
func (st *obtainState) Value(key any) any {
	if key == (stateKey{}) {
		return st
	}
	return st.Context.Value(key)
}

func (t *telemetry) obtain(ctx context.Context, e lock.Event, next func(context.Context) (*lock.Lock, error)) (*lock.Lock, error) {
	start := time.Now()
	ctx, span := t.tracer.Start(ctx, "lock.obtain", clientKind...)
	var st *obtainState // for a recording span only
	if span.IsRecording() {
		st = &obtainState{Context: ctx}
		st.attrs = append(st.buf[:0], t.spanAttrs(e)...)
		ctx = st
	}
	defer func() {
		// Deferred, so that an Obtain that panics ends its span with the
		// attributes of every span.
		if st != nil {
			span.SetAttributes(st.attrs...)
		}
		span.End()
	}()
	lk, err := next(ctx)
	now := time.Now()
	waited := now.Sub(start)

	outcome := obtainOutcome(ctx, err)
	var errType string
	if outcome == "timed_out" || outcome == "error" {
		errType = errorType(err)
		if outcome == "timed_out" {
			errType = "timeout"
			if errors.Is(ctx.Err(), context.Canceled) {
				errType = "canceled"
			}
		}
		if st != nil {
			span.SetStatus(codes.Error, t.describeErr(err, e.Key))
		}
	}
	if st != nil {
		st.attrs = append(st.attrs, attrAttempts.Int(st.attempts), attrWait.Float64(waited.Seconds()), attrOutcome.String(outcome))
		switch {
		case lk != nil:
			st.attrs = append(st.attrs, attrValidity.Float64(lk.ValidUntil().Sub(now).Seconds()))
			t.startHold(st, e, lk)
		case errType != "":
			st.attrs = append(st.attrs, attrError.String(errType))
		}
		st.attrs = append(st.attrs, st.holder...)
	}
	// Each instrument is asked first, so that no-op metrics cost no lookup.
	if lk != nil && t.active.Enabled(ctx) {
		t.active.Add(ctx, 1, t.measure(e.Key, setKey{strategy: e.Strategy}).add...)
	}
	if t.acquire.Enabled(ctx) {
		t.acquire.Record(ctx, waited.Seconds(), t.measure(e.Key, setKey{strategy: e.Strategy, outcome: outcome, errType: errType}).record...)
	}
	return lk, err
}

// obtainOutcome classifies an Obtain's result; ctx is the caller's, which
// alone says whether the wait timed out (a Redlock node's own timeout is in
// the error's tree too).
func obtainOutcome(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, lock.ErrNotObtained) && wait.Over(ctx):
		return "timed_out"
	case errors.Is(err, lock.ErrNotObtained):
		return "contended"
	}
	return "error"
}

func (t *telemetry) attempt(ctx context.Context, e lock.Event, next func(context.Context) error) error {
	var start time.Time // of an attempt after a wait: a handoff, if it acquires
	if e.Attempt > 1 {
		start = time.Now()
	}
	st, recording := ctx.Value(stateKey{}).(*obtainState) // set by a recording obtain span
	if recording {
		st.attempts++
		st.attemptStart = time.Now()
	}
	err := next(ctx)
	if err == nil && e.Attempt > 1 && t.handoff.Enabled(ctx) {
		t.handoff.Record(ctx, time.Since(start).Seconds(), t.measure(e.Key, setKey{strategy: e.Strategy}).record...)
	}
	outcome := "acquired"
	switch {
	case err == nil:
	case errors.Is(err, lock.ErrNotObtained):
		outcome = "contended"
		if recording {
			st.contended(trace.SpanFromContext(ctx), e.Attempt, err)
		}
	default:
		outcome = "error"
	}
	if t.tries.Enabled(ctx) {
		t.tries.Add(ctx, 1, t.measure(e.Key, setKey{strategy: e.Strategy, outcome: outcome}).add...)
	}
	return err
}

func (t *telemetry) node(ctx context.Context, e lock.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attrNode.String(e.Node), attrOutcome.String(e.Outcome)}
	if e.Err != nil {
		attrs = append(attrs, attrError.String(errorType(e.Err)))
	}
	span.AddEvent("lock.node", trace.WithAttributes(attrs...))
}

// wait records the progress of a waiting Obtain: span events on its span,
// and the wake-up metrics. The waiter's id is never among them.
func (t *telemetry) wait(ctx context.Context, e lock.Event) {
	span := trace.SpanFromContext(ctx)
	recording := span.IsRecording()
	switch e.Op {
	case "enqueued":
		if recording {
			span.AddEvent("lock.wait.enqueued", trace.WithAttributes(attrRank.Int(e.Rank)))
		}
		if t.queue.Enabled(ctx) {
			t.queue.Record(ctx, int64(e.Rank), t.measure(e.Key, setKey{strategy: e.Strategy}).record...)
		}
	case "woken":
		if recording {
			span.AddEvent("lock.wait.woken", trace.WithAttributes(attrReason.String(e.Reason)))
		}
		if t.wakeups.Enabled(ctx) {
			t.wakeups.Add(ctx, 1, t.measure(e.Key, setKey{strategy: e.Strategy, reason: e.Reason}).add...)
		}
	case "missed":
		if recording {
			span.AddEvent("lock.wait.missed")
		}
		if t.missed.Enabled(ctx) {
			t.missed.Add(ctx, 1, t.measure(e.Key, setKey{strategy: e.Strategy}).add...)
		}
	}
}

func (t *telemetry) op(ctx context.Context, e lock.Event, next func(context.Context) error) error {
	ctx, span := t.tracer.Start(ctx, opSpanName(e.Op), clientKind...)
	defer span.End()
	if span.IsRecording() {
		attrs := t.spanAttrs(e)
		if e.TTL > 0 {
			attrs = append(attrs[:len(attrs):len(attrs)], attrTTL.Float64(e.TTL.Seconds()))
		}
		span.SetAttributes(attrs...) // one call: the SDK grows its list once
	}
	err := next(ctx)
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, t.describeErr(err, e.Key))
		span.SetAttributes(attrError.String(errorType(err)))
	}
	if e.Op == "refresh" && e.Lock != nil {
		t.refreshed(e.Lock, err)
	}
	return err
}

// opSpanNames are the names of the spans of the known operations, kept as
// they are, so that naming a span allocates nothing.
var opSpanNames = map[string]string{"refresh": "lock.refresh", "release": "lock.release", "ttl": "lock.ttl",
	"metadata": "lock.metadata", "guard": "lock.guard", "cleanup": "lock.cleanup", "inspect": "lock.inspect", "break": "lock.break"}

// opSpanName is the name of the span of an Op hook's operation: lock.
// and the operation.
func opSpanName(op string) string {
	if name, ok := opSpanNames[op]; ok {
		return name
	}
	return "lock." + op
}

// batch records a lock.refresh.batch span, a root span linked to the
// lock.refresh spans of the locks that the batch refreshes.
func (t *telemetry) batch(ctx context.Context, e lock.Event, next func(context.Context) error) error {
	links := make([]trace.Link, 0, len(e.Links))
	for _, c := range e.Links {
		if sc := trace.SpanContextFromContext(c); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := t.tracer.Start(ctx, "lock.refresh.batch", trace.WithSpanKind(trace.SpanKindClient), trace.WithLinks(links...))
	defer span.End()
	if span.IsRecording() {
		attrs := []attribute.KeyValue{dbSystem, attrStrategy.String(e.Strategy), attrBatch.Int(e.Keys), attrServer.String(e.Server)}
		if e.Server == "" {
			attrs = attrs[:3]
		}
		span.SetAttributes(attrs...) // one call: the SDK grows its list once
	}
	return next(ctx)
}

func (t *telemetry) ended(e lock.Event) {
	ctx := context.Background()
	end := "released"
	if e.Err != nil {
		end = "lost"
		if errors.Is(e.Err, lock.ErrBroken) {
			end = "broken"
		}
		if t.lost.Enabled(ctx) {
			t.lost.Add(ctx, 1, t.measure(e.Key, setKey{strategy: e.Strategy, errType: errorType(e.Err)}).add...)
		}
	}
	if t.hold.Enabled(ctx) {
		t.hold.Record(ctx, e.Held.Seconds(), t.measure(e.Key, setKey{strategy: e.Strategy, end: end}).record...)
	}
	t.endHold(e, end)
	if t.active.Enabled(ctx) {
		t.active.Add(ctx, -1, t.measure(e.Key, setKey{strategy: e.Strategy}).add...)
	}
}

// sentinelTypes are the error.type of the errors of the context and of
// package lock, in the order errorType tries them: the first that err
// matches.
var sentinelTypes = []struct {
	err  error
	name string
}{
	{context.DeadlineExceeded, "timeout"}, {context.Canceled, "canceled"}, {lock.ErrNoAnswer, "no_answer"},
	{lock.ErrBroken, "broken"}, {lock.ErrExpired, "expired"}, {lock.ErrTaken, "taken"}, {lock.ErrLapsed, "lapsed"}, {lock.ErrNotHeld, "not_held"},
	{lock.ErrNotObtained, "not_obtained"}, {lock.ErrRefreshLimit, "refresh_limit"},
}

// errorType is the error.type of err, a low-cardinality identifier, as
// OpenTelemetry's semantic conventions ask: the ErrorType method's result
// for an error that has one (no_quorum for a Redlock *QuorumError); else
// timeout, canceled, no_answer, broken, expired, taken, lapsed, not_held,
// not_obtained, refresh_limit or invalid_argument for the errors of the
// context and of package lock; else the prefix of a Redis error (such as ERR, WRONGTYPE
// or NOSCRIPT); else _OTHER, the conventions' fallback.
func errorType(err error) string {
	var typed interface{ ErrorType() string }
	if errors.As(err, &typed) {
		return typed.ErrorType()
	}
	for _, s := range sentinelTypes {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	if errors.As(err, new(*lock.ArgumentError)) {
		return "invalid_argument"
	}
	inner := err
	for u := errors.Unwrap(inner); u != nil; u = errors.Unwrap(inner) {
		inner = u
	}
	if prefix, _, _ := strings.Cut(inner.Error(), " "); prefix != "" && strings.ToUpper(prefix) == prefix && strings.Trim(prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
		return prefix // a Redis error: ERR, WRONGTYPE, NOSCRIPT, ...
	}
	return "_OTHER"
}
