package lockotel_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy"
)

// variants returns bare, and bare wrapped with no-op providers and with a
// recording SDK, which stores each holder's trace in its lock's value
// unless told not to (otel-sdk-notrace).
func variants(b *testing.B, bare *lock.Locker) []struct {
	name string
	l    *lock.Locker
} {
	tp, mp := providers(b)
	return []struct {
		name string
		l    *lock.Locker
	}{
		{"bare", bare},
		{"otel-noop", lockotel.NewLocker(bare, lockotel.WithTracerProvider(tracenoop.NewTracerProvider()), lockotel.WithMeterProvider(metricnoop.NewMeterProvider()))},
		{"otel-sdk", lockotel.NewLocker(bare, lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp))},
		{"otel-sdk-notrace", lockotel.NewLocker(bare, lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp), lockotel.WithoutHolderTrace())},
	}
}

// providers returns a recording SDK: every span sampled and recorded, in
// full, and handed to a processor that counts it. The export pipeline (a
// batch processor's goroutine, an exporter) is left out: its cost is the
// same for any instrumentation. Run with -tags batcher to include it.
func providers(b *testing.B) (*sdktrace.TracerProvider, *sdkmetric.MeterProvider) {
	var ended counter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spanProcessor(&ended)), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	return tp, mp
}

func obtainRelease(b *testing.B, l *lock.Locker) {
	ctx := context.Background()
	lk, err := l.Obtain(ctx, "bench:otel", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	if err := lk.Release(ctx); err != nil {
		b.Fatal(err)
	}
}

// realServer returns a single-strategy locker over a real server (or the
// embedded one).
func realServer(b *testing.B) *lock.Locker {
	addr, _ := redistest.Addr(b)
	return singleLocker(b, addr)
}

// BenchmarkObtainRelease measures an uncontended Obtain+Release against a
// real server for each variant, with its allocations.
//
//	go test -run '^$' -bench ObtainRelease -count 10 ./otel/
func BenchmarkObtainRelease(b *testing.B) {
	for _, v := range variants(b, realServer(b)) {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obtainRelease(b, v.l)
			}
		})
	}
}

// BenchmarkOverhead runs the variants interleaved, in rotating order, so
// that the drift of a noisy machine cancels out, and reports each one's
// time and the wrapper's overhead over the bare locker, in percent.
//
//	go test -run '^$' -bench Overhead -benchtime 5000x -count 5 ./otel/
func BenchmarkOverhead(b *testing.B) {
	vs := variants(b, realServer(b))
	spent := make([]time.Duration, len(vs))
	i := 0
	for b.Loop() {
		for j := range vs {
			k := (i + j) % len(vs)
			start := time.Now()
			obtainRelease(b, vs[k].l)
			spent[k] += time.Since(start)
		}
		i++
	}
	for k, v := range vs {
		b.ReportMetric(float64(spent[k].Nanoseconds())/float64(i), v.name+"-ns/op")
	}
	for k, v := range vs[1:] {
		b.ReportMetric(100*(float64(spent[k+1])/float64(spent[0])-1), v.name+"-overhead-%")
	}
}

// BenchmarkWrapperCost measures what the wrapper adds to an Obtain+Release,
// with no network in the way: over an in-memory strategy, each variant's
// time is the library's own work, and the differences are the wrapper's
// cost, steady from run to run. Divided by BenchmarkObtainRelease's bare
// time, they give the overhead against a real server without its noise.
//
//	go test -run '^$' -bench WrapperCost -count 5 ./otel/
func BenchmarkWrapperCost(b *testing.B) {
	for _, v := range variants(b, lock.New(&memory{})) {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obtainRelease(b, v.l)
			}
		})
	}
}

// BenchmarkSDKFloor measures the SDK's own work for one instrumented
// Obtain+Release, without any lock: the floor under what the wrapper can
// cost. It makes the calls that the wrapper's telemetry of an uncontended
// Obtain+Release comes down to, with every option and attribute set built
// beforehand: the lock.obtain span with its seven attributes and the
// lock.release span with its three (those of a strategy with a server
// address, such as single's; the in-memory strategy of BenchmarkWrapperCost
// has none, one attribute fewer per span), each of kind client and given
// its attributes in one call; the two readings of the clock that the wait
// takes; and the five measurements (active +1 and -1, acquire.duration,
// attempts, hold.duration), those of the Obtain within its span's context,
// which makes the SDK offer them as exemplars. BenchmarkWrapperCost's
// otel-sdk less its bare, less this, is about the wrapper's own cost.
// The bench module's otel-floor contender makes the same calls around a
// lock on a real server, where they cost several times more (bench/README.md).
//
//	go test -run '^$' -bench 'WrapperCost|SDKFloor' -count 5 ./otel/
func BenchmarkSDKFloor(b *testing.B) {
	tp, mp := providers(b)
	tracer := tp.Tracer("floor")
	m := mp.Meter("floor")
	acquire, _ := m.Float64Histogram("acquire", metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	hold, _ := m.Float64Histogram("hold", metric.WithExplicitBucketBoundaries(0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600))
	tries, _ := m.Int64Counter("attempts")
	active, _ := m.Int64UpDownCounter("active")
	set := func(kvs ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(kvs...))
	}
	strategy := attribute.String("locksmith.lock.strategy", "memory")
	group := attribute.String("locksmith.lock.group", "bench")
	base := set(strategy, group)
	acquired := set(strategy, group, attribute.String("locksmith.lock.outcome", "acquired"))
	released := set(strategy, group, attribute.String("locksmith.lock.end", "released"))
	baseAdd, acquiredAdd := []metric.AddOption{base}, []metric.AddOption{acquired}
	acquiredRecord, releasedRecord := []metric.RecordOption{acquired}, []metric.RecordOption{released}
	kind := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	common := []attribute.KeyValue{attribute.String("db.system.name", "redis"), strategy, attribute.String("server.address", "127.0.0.1:6379")}
	b.ReportAllocs()
	for b.Loop() {
		bg := context.Background()
		start := time.Now()
		ctx, span := tracer.Start(bg, "lock.obtain", kind...)
		tries.Add(ctx, 1, acquiredAdd...)
		waited := time.Since(start)
		attrs := make([]attribute.KeyValue, 0, 7) // as the wrapper must: the SDK keeps what it is given
		attrs = append(attrs, common...)
		attrs = append(attrs, attribute.Int("locksmith.lock.attempts", 1), attribute.Float64("locksmith.lock.wait", waited.Seconds()),
			attribute.String("locksmith.lock.outcome", "acquired"), attribute.Float64("locksmith.lock.validity", 60))
		span.SetAttributes(attrs...)
		span.End()
		active.Add(ctx, 1, baseAdd...)
		acquire.Record(ctx, waited.Seconds(), acquiredRecord...)

		_, span = tracer.Start(bg, "lock.release", kind...)
		span.SetAttributes(common...)
		span.End()
		hold.Record(bg, waited.Seconds(), releasedRecord...)
		active.Add(bg, -1, baseAdd...)
	}
}

// memory is a strategy.Strategy that holds its keys in a map: enough for one
// goroutine's uncontended Obtain+Release.
type memory struct {
	mu   sync.Mutex
	keys map[string]string
}

func (m *memory) String() string { return "memory" }

func (m *memory) Inspect(context.Context, string) (strategy.State, error) {
	return strategy.State{}, errors.ErrUnsupported
}

func (m *memory) Acquire(_ context.Context, r strategy.Request) (strategy.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, held := m.keys[r.Key]; held {
		return strategy.Grant{}, lock.ErrNotObtained
	}
	if m.keys == nil {
		m.keys = map[string]string{}
	}
	m.keys[r.Key] = r.Value()
	return strategy.Grant{}, nil
}

func (m *memory) Release(_ context.Context, key, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys[key] != value {
		return lock.ErrNotHeld
	}
	delete(m.keys, key)
	return nil
}

func (m *memory) Refresh(context.Context, string, string, time.Duration) (strategy.Grant, error) {
	return strategy.Grant{}, lock.ErrNotHeld
}

func (m *memory) TTL(context.Context, string, string) (time.Duration, error) {
	return 0, lock.ErrNotHeld
}

// counter is a span processor that counts the spans that end.
type counter struct{ n atomic.Int64 }

func (c *counter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *counter) OnEnd(sdktrace.ReadOnlySpan)                     { c.n.Add(1) }
func (c *counter) Shutdown(context.Context) error                  { return nil }
func (c *counter) ForceFlush(context.Context) error                { return nil }
