package lockotel_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy/redlock"
	"github.com/locksmith-go/lock/strategy/single"
)

// recording is a recording SDK for one test.
type recording struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	opts   []lockotel.Option
}

func newRecording(t *testing.T, opts ...lockotel.Option) *recording {
	r := &recording{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	r.opts = append([]lockotel.Option{lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp)}, opts...)
	return r
}

func (r *recording) wrap(l *lock.Locker) *lock.Locker { return lockotel.NewLocker(l, r.opts...) }

// ended returns the ended spans named name.
func (r *recording) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func (r *recording) metrics(t *testing.T) map[string]metricdata.Metrics {
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// by sums a metric's data points by the value of the attribute attr:
// their counts for a histogram, their values for a sum.
func by(md metricdata.Metrics, attr attribute.Key) map[string]int64 {
	out := map[string]int64{}
	switch d := md.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			v, _ := dp.Attributes.Value(attr)
			out[v.AsString()] += int64(dp.Count)
		}
	case metricdata.Histogram[int64]:
		for _, dp := range d.DataPoints {
			v, _ := dp.Attributes.Value(attr)
			out[v.AsString()] += int64(dp.Count)
		}
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			v, _ := dp.Attributes.Value(attr)
			out[v.AsString()] += dp.Value
		}
	}
	return out
}

// wantUnits checks that m has each metric of units, with its unit.
func wantUnits(t *testing.T, m map[string]metricdata.Metrics, units map[string]string) {
	t.Helper()
	for name, unit := range units {
		if got, ok := m[name]; !ok || got.Unit != unit {
			t.Errorf("metric %s: present %v, unit %q; want present, %q", name, ok, got.Unit, unit)
		}
	}
}

// sumOf is the sum of the values that an int64 histogram recorded.
func sumOf(md metricdata.Metrics) int64 {
	var sum int64
	if d, ok := md.Data.(metricdata.Histogram[int64]); ok {
		for _, dp := range d.DataPoints {
			sum += dp.Sum
		}
	}
	return sum
}

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// hashKey is the key's locksmith.lock.key_hash under KeysHashed.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

func only(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	if len(spans) != 1 {
		t.Fatalf("%s spans = %d, want 1", name, len(spans))
	}
	return spans[0]
}

// heldKey returns a key that l holds until the test ends.
func heldKey(t *testing.T, l *lock.Locker) string {
	t.Helper()
	key := conformance.Key(t)
	held, err := l.Obtain(context.Background(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	return key
}

func singleLocker(t testing.TB, addr string) *lock.Locker {
	l, err := single.New(goredis.New(redistest.GoRedis(t, addr, 3)))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestObtainSpans(t *testing.T) {
	addr, real := redistest.Addr(t)
	ctx := context.Background()

	t.Run("acquired", func(t *testing.T) {
		rec := newRecording(t)
		lk, err := rec.wrap(singleLocker(t, addr)).Obtain(ctx, conformance.Key(t), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		s := only(t, rec.ended("lock.obtain"), "lock.obtain")
		a := attrs(s)
		for k, want := range map[string]string{
			"db.system.name": "redis", "locksmith.lock.strategy": "single",
			"server.address": addr, "locksmith.lock.outcome": "acquired",
		} {
			if got := a[k].AsString(); got != want {
				t.Errorf("attribute %s = %q, want %q", k, got, want)
			}
		}
		if got := a["locksmith.lock.attempts"].AsInt64(); got != 1 {
			t.Errorf("attempts = %d, want 1", got)
		}
		if v := a["locksmith.lock.validity"].AsFloat64(); v <= 0 || v > 60 {
			t.Errorf("validity = %vs, want in (0, 60]", v)
		}
		if _, ok := a["locksmith.lock.wait"]; !ok {
			t.Errorf("no locksmith.lock.wait attribute")
		}
		if s.SpanKind() != trace.SpanKindClient || s.Status().Code != codes.Unset {
			t.Errorf("kind, status = %v, %v; want client, unset", s.SpanKind(), s.Status().Code)
		}
		if sc, want := s.InstrumentationScope(), "github.com/locksmith-go/lock/otel"; sc.Name != want || sc.Version == "" {
			t.Errorf("scope = %q %q, want %q and a version", sc.Name, sc.Version, want)
		}
		for k := range a {
			if strings.Contains(k, "key") {
				t.Errorf("attribute %s present; by default keys are omitted", k)
			}
		}
	})

	t.Run("ObtainMany goes through the hooks", func(t *testing.T) {
		rec := newRecording(t)
		key := conformance.Key(t)
		// One key, once duplicates are removed: every strategy takes it.
		lk, err := rec.wrap(singleLocker(t, addr)).ObtainMany(ctx, []string{key, key}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		s := only(t, rec.ended("lock.obtain"), "lock.obtain")
		if got := attrs(s)["locksmith.lock.outcome"].AsString(); got != "acquired" {
			t.Errorf("outcome = %q, want %q", got, "acquired")
		}
	})

	t.Run("contended: an answer, not an error", func(t *testing.T) {
		rec := newRecording(t)
		l := rec.wrap(singleLocker(t, addr))
		key := heldKey(t, l)
		if _, err := l.Obtain(ctx, key, time.Minute, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 3))); err == nil {
			t.Fatal("second Obtain succeeded")
		}
		s := rec.ended("lock.obtain")[1]
		if got := attrs(s)["locksmith.lock.outcome"].AsString(); got != "contended" || s.Status().Code != codes.Unset {
			t.Errorf("outcome, status = %q, %v; want contended, unset", got, s.Status().Code)
		}
		if got := attrs(s)["locksmith.lock.attempts"].AsInt64(); got != 3 {
			t.Errorf("attempts = %d, want 3", got)
		}
		names, _ := events(s, "")
		if n := strings.Count(strings.Join(names, " "), "lock.contended"); n != 3 || names[0] != "lock.contended" {
			t.Errorf("events = %v, want 3 lock.contended, the first first", names)
		}
	})

	t.Run("timed out", func(t *testing.T) {
		rec := newRecording(t)
		l := rec.wrap(singleLocker(t, addr))
		key := heldKey(t, l)
		dctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond) // after the first attempt found it held, on a loaded machine
		defer cancel()
		if _, err := l.Obtain(dctx, key, time.Minute, lock.WithRetry(lock.Linear(5*time.Millisecond))); err == nil {
			t.Fatal("Obtain succeeded")
		}
		s := rec.ended("lock.obtain")[1]
		a := attrs(s)
		if a["locksmith.lock.outcome"].AsString() != "timed_out" || a["error.type"].AsString() != "timeout" || s.Status().Code != codes.Error {
			t.Errorf("outcome, error.type, status = %q, %q, %v; want timed_out, timeout, error", a["locksmith.lock.outcome"].AsString(), a["error.type"].AsString(), s.Status().Code)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		rec := newRecording(t)
		l := rec.wrap(singleLocker(t, addr))
		key := heldKey(t, l)
		cctx, cancel := context.WithCancel(ctx)
		held := &lock.Hooks{Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
			err := next(ctx)
			if errors.Is(err, lock.ErrNotObtained) {
				cancel() // while it waits, once an attempt found the lock held
			}
			return err
		}}
		if _, err := l.Obtain(cctx, key, time.Minute, lock.WithRetry(lock.Linear(5*time.Millisecond)), lock.WithHooks(held)); err == nil {
			t.Fatal("Obtain succeeded")
		}
		s := rec.ended("lock.obtain")[1]
		a := attrs(s)
		if a["locksmith.lock.outcome"].AsString() != "timed_out" || a["error.type"].AsString() != "canceled" || s.Status().Code != codes.Error {
			t.Errorf("outcome, error.type, status = %q, %q, %v; want timed_out, canceled, error", a["locksmith.lock.outcome"].AsString(), a["error.type"].AsString(), s.Status().Code)
		}
	})

	t.Run("a Redis error, with the key redacted", func(t *testing.T) {
		rec := newRecording(t)
		key := conformance.Key(t)
		rdb := redistest.GoRedis(t, addr, 3)
		if err := rdb.HSet(ctx, key, "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
		defer rdb.Del(ctx, key)
		if _, err := rec.wrap(singleLocker(t, addr)).Obtain(ctx, key, time.Minute); err == nil {
			t.Fatal("Obtain of a hash succeeded")
		}
		s := only(t, rec.ended("lock.obtain"), "lock.obtain")
		want := "WRONGTYPE"
		if !real {
			want = "ERR" // the embedded server reports a script's error as ERR
		}
		if got := attrs(s)["error.type"].AsString(); got != want || s.Status().Code != codes.Error {
			t.Errorf("error.type, status = %q, %v; want %s, error", got, s.Status().Code, want)
		}
		if d := s.Status().Description; strings.Contains(d, key) || !strings.Contains(d, "<key>") {
			t.Errorf("status description = %q, want the key redacted as <key>", d)
		}
	})

	t.Run("an invalid argument", func(t *testing.T) {
		rec := newRecording(t)
		_, _ = rec.wrap(singleLocker(t, addr)).Obtain(ctx, "", time.Minute)
		s := only(t, rec.ended("lock.obtain"), "lock.obtain")
		if got := attrs(s)["error.type"].AsString(); got != "invalid_argument" {
			t.Errorf("error.type = %q, want invalid_argument", got)
		}
		if v, ok := attrs(s)["locksmith.lock.attempts"]; !ok || v.AsInt64() != 0 {
			t.Errorf("attempts = %v (present %v), want 0", v.AsInt64(), ok)
		}
	})
}

func TestOperationSpans(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	rec := newRecording(t)
	l := rec.wrap(singleLocker(t, addr))

	lk, err := l.Obtain(ctx, conformance.Key(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := lk.SetMetadata(ctx, "web-3"); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.TTL(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.GuardCommands(ctx, []string{lk.Key() + ":data"}, []any{"SET", lk.Key() + ":data", "1"}); err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lock.refresh", "lock.metadata", "lock.ttl", "lock.guard", "lock.release"} {
		s := only(t, rec.ended(name), name)
		if s.SpanKind() != trace.SpanKindClient || s.Status().Code != codes.Unset || attrs(s)["locksmith.lock.strategy"].AsString() != "single" {
			t.Errorf("%s: kind, status, strategy = %v, %v, %q; want client, unset, single", name, s.SpanKind(), s.Status().Code, attrs(s)["locksmith.lock.strategy"].AsString())
		}
	}
	if got := attrs(rec.ended("lock.refresh")[0])["locksmith.lock.ttl"].AsFloat64(); got != 60 {
		t.Errorf("refresh ttl = %vs, want 60", got)
	}

	// A lock found gone.
	short, err := l.Obtain(ctx, conformance.Key(t), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := short.TTL(ctx); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = short.Refresh(ctx, time.Minute)
	ttls := rec.ended("lock.ttl")
	s := ttls[len(ttls)-1]
	if got := attrs(s)["error.type"].AsString(); got != "expired" || s.Status().Code != codes.Error {
		t.Errorf("TTL of a lost lock: error.type, status = %q, %v; want expired, error", got, s.Status().Code)
	}
}

func TestKeyPolicy(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
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
			lk, err := rec.wrap(singleLocker(t, addr)).Obtain(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			_ = lk.Release(ctx)
			for _, s := range rec.spans.Ended() {
				if got := attrs(s)[c.attr].AsString(); got != c.value(key) {
					t.Errorf("%s: %s = %q, want %q", s.Name(), c.attr, got, c.value(key))
				}
			}
		})
	}
}

func TestRedlockNodeEvents(t *testing.T) {
	l, servers := redlockOneNodeDown(t)
	rec := newRecording(t)
	ctx := context.Background()
	lk, err := rec.wrap(l).Obtain(ctx, conformance.Key(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_ = lk.Release(ctx)
	s := only(t, rec.ended("lock.obtain"), "lock.obtain")
	// Obtain returns at quorum: a node that had not answered by then, the
	// dead one included on a loaded machine, is reported pending.
	outcomes := nodeOutcomes(s)
	for i, want := range []string{"ok", "ok", "refused"} {
		if got := outcomes[servers[i].Addr]; got != want && got != "pending" {
			t.Errorf("obtain: node %d event outcome = %q, want %q or pending", i, got, want)
		}
	}
	// Release returns at quorum too: the dead node is refused or pending.
	rel := only(t, rec.ended("lock.release"), "lock.release")
	if got := nodeOutcomes(rel)[servers[2].Addr]; got != "refused" && got != "pending" {
		t.Errorf("release: dead node's event outcome = %q, want refused or pending", got)
	}
	if got := attrs(s)["locksmith.lock.strategy"].AsString(); got != "redlock" {
		t.Errorf("strategy = %q, want redlock", got)
	}
	if len(rel.Events()) != 3 {
		t.Errorf("release node events = %d, want 3", len(rel.Events()))
	}
}

func TestMetrics(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	rec := newRecording(t)
	l := rec.wrap(singleLocker(t, addr))
	key := conformance.Key(t)

	a, err := l.Obtain(ctx, key, time.Minute) // acquired
	if err != nil {
		t.Fatal(err)
	}
	_, _ = l.Obtain(ctx, key, time.Minute) // contended
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := l.Obtain(ctx, conformance.Key(t), 100*time.Millisecond) // will be lost
	if err != nil {
		t.Fatal(err)
	}
	for b.Refresh(ctx, 100*time.Millisecond) == nil {
		time.Sleep(150 * time.Millisecond)
	}

	m := rec.metrics(t)
	wantUnits(t, m, map[string]string{
		"locksmith.lock.acquire.duration": "s", "locksmith.lock.hold.duration": "s",
		"locksmith.lock.attempts": "{attempt}", "locksmith.lock.active": "{lock}", "locksmith.lock.lost": "{lock}",
	})
	for _, c := range []struct {
		metric string
		attr   attribute.Key
		want   map[string]int64
	}{
		{"locksmith.lock.acquire.duration", "locksmith.lock.outcome", map[string]int64{"acquired": 2, "contended": 1}},
		{"locksmith.lock.attempts", "locksmith.lock.outcome", map[string]int64{"acquired": 2, "contended": 1}},
		{"locksmith.lock.active", "locksmith.lock.strategy", map[string]int64{"single": 0}}, // one released, one lost
		{"locksmith.lock.hold.duration", "locksmith.lock.end", map[string]int64{"released": 1, "lost": 1}},
		{"locksmith.lock.lost", "error.type", map[string]int64{"expired": 1}},
	} {
		if got := by(m[c.metric], c.attr); !maps.Equal(got, c.want) {
			t.Errorf("%s by %s = %v, want %v", c.metric, c.attr, got, c.want)
		}
	}
	for name, md := range m {
		if strings.Contains(fmt.Sprint(md.Data), key) {
			t.Errorf("metric %s carries the key", name)
		}
	}
}

// TestNoTokenInTelemetry: no span, event, status or metric ever carries a
// token, even with raw keys and failing operations.
func TestNoTokenInTelemetry(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	rec := newRecording(t, lockotel.WithKeys(lockotel.KeysRaw))
	l := rec.wrap(singleLocker(t, addr))
	var tokens []string
	key := conformance.Key(t)
	const chosen = "chosen-token-012345678"
	a, err := l.Obtain(ctx, key, 100*time.Millisecond, lock.WithToken(chosen), lock.WithMetadata("meta"))
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, a.Token())
	_, _ = l.Obtain(ctx, key, time.Minute)
	for a.Refresh(ctx, 100*time.Millisecond) == nil {
		time.Sleep(150 * time.Millisecond)
	}
	b, err := l.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, b.Token())
	_ = a.Release(ctx)
	_, _ = a.TTL(ctx)
	_ = b.Refresh(ctx, time.Minute)
	_ = b.Release(ctx)
	_ = b.Release(ctx)

	if n := wantNoToken(t, rec, tokens); n < 20 {
		t.Errorf("telemetry pieces checked = %d, want a full run", n)
	}
}

// wantNoToken fails t if a span (its name, status, attributes or links),
// an event or a metric that rec recorded contains one of tokens, and
// returns how many pieces of telemetry it checked.
func wantNoToken(t *testing.T, rec *recording, tokens []string) int {
	t.Helper()
	var texts []string
	for _, s := range rec.spans.Ended() {
		texts = append(texts, s.Name(), s.Status().Description, fmt.Sprint(s.Attributes()), fmt.Sprint(s.Links()))
		for _, e := range s.Events() {
			texts = append(texts, e.Name, fmt.Sprint(e.Attributes))
		}
	}
	for _, md := range rec.metrics(t) {
		texts = append(texts, fmt.Sprint(md.Data))
	}
	for _, text := range texts {
		for _, tok := range tokens {
			if strings.Contains(text, tok) {
				t.Fatalf("telemetry %q contains a token", text)
			}
		}
	}
	return len(texts)
}

// TestConformance: the suite passes on wrapped lockers, for each strategy,
// with a recording SDK. The wrapper sees only the Locker, so one driver per
// strategy is enough; the strategies' own tests cover every driver.
func TestConformance(t *testing.T) {
	rec := newRecording(t)
	combos := matrix.EachStrategy(t)
	for i, c := range combos {
		combos[i] = c.Wrap(func(_ *testing.T, l *lock.Locker) *lock.Locker { return rec.wrap(l) })
		// MutualExclusion at its full size (2000 acquisitions) runs on the
		// same strategies in their own packages: here a quarter checks that
		// the instrumentation keeps them exclusive.
		combos[i].Harness.Acquisitions = 500
	}
	matrix.Run(t, combos, 0)
}

// redlockOneNodeDown returns a Redlock Locker over 3 nodes, and the nodes'
// servers, the third of which is killed.
func redlockOneNodeDown(t *testing.T) (*lock.Locker, []*redistest.Server) {
	t.Helper()
	servers := redistest.Start(t, 3)
	servers[2].Kill()
	var conns []driver.Conn
	for _, s := range servers {
		conns = append(conns, goredis.New(redistest.GoRedis(t, s.Addr, 3)))
	}
	l, err := redlock.New(conns)
	if err != nil {
		t.Fatal(err)
	}
	return l, servers
}

// nodeEvents returns the node events of s as "node=outcome", in order.
func nodeEvents(s sdktrace.ReadOnlySpan) []string {
	var events []string
	for _, e := range s.Events() {
		if e.Name != "lock.node" {
			continue
		}
		var node, outcome string
		for _, kv := range e.Attributes {
			switch kv.Key {
			case "locksmith.lock.node":
				node = kv.Value.AsString()
			case "locksmith.lock.outcome":
				outcome = kv.Value.AsString()
			}
		}
		events = append(events, node+"="+outcome)
	}
	return events
}

// nodeOutcomes returns the outcome of each node event of s, by node.
func nodeOutcomes(s sdktrace.ReadOnlySpan) map[string]string {
	outcomes := map[string]string{}
	for _, e := range nodeEvents(s) {
		i := strings.LastIndexByte(e, '=')
		outcomes[e[:i]] = e[i+1:]
	}
	return outcomes
}

// TestSeveralKeys: the spans of a lock of several keys carry their number,
// and no key but the first, as the key policy allows: not even in the
// status of an ObtainMany that found the last key held.
func TestSeveralKeys(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	for _, policy := range []lockotel.KeyPolicy{lockotel.KeysOmitted, lockotel.KeysHashed} {
		rec := newRecording(t, lockotel.WithKeys(policy))
		l := rec.wrap(singleLocker(t, addr))
		base := conformance.Key(t)
		keys := []string{"{" + base + "}:a", "{" + base + "}:b", "{" + base + "}:c"}
		held, err := singleLocker(t, addr).Obtain(ctx, keys[2], time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.ObtainMany(ctx, keys, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("ObtainMany with a key held = %v, want ErrNotObtained", err)
		}
		_ = held.Release(ctx)
		lk, err := l.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		_ = lk.Release(ctx)
		for _, s := range rec.spans.Ended() {
			if got := attrs(s)["locksmith.lock.keys"].AsInt64(); got != 3 {
				t.Errorf("policy %d: %s: locksmith.lock.keys = %d, want 3", policy, s.Name(), got)
			}
			for _, k := range keys {
				if strings.Contains(s.Status().Description, k) {
					t.Errorf("policy %d: %s: status %q shows key %q", policy, s.Name(), s.Status().Description, k)
				}
			}
		}
	}
}

// TestSharedLocks: the spans of a semaphore's permit carry its limit, and
// those of a read-write lock's side the side.
func TestSharedLocks(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opt  lock.Option
		attr string
		want attribute.Value
	}{
		{"semaphore", lock.WithPermits(3), "locksmith.lock.permits", attribute.IntValue(3)},
		{"read side", lock.WithRead(), "locksmith.lock.side", attribute.StringValue("read")},
		{"write side", lock.WithWrite(), "locksmith.lock.side", attribute.StringValue("write")},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecording(t)
			lk, err := rec.wrap(singleLocker(t, addr)).Obtain(ctx, conformance.Key(t), time.Minute, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Fatal(err)
			}
			spans := rec.spans.Ended()
			if len(spans) == 0 {
				t.Fatal("no span ended, want the obtain's and the release's")
			}
			for _, s := range spans {
				if got := attrs(s)[c.attr]; got != c.want {
					t.Errorf("%s: %s = %v, want %v", s.Name(), c.attr, got.Emit(), c.want.Emit())
				}
			}
		})
	}
}
