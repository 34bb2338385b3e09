package bench

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy/single"
)

// otelFloor is the otel-floor contender: single over go-redis, with the
// OpenTelemetry SDK's calls that otel-sdk's telemetry of an uncontended
// acquire and release comes down to made inline around it, every option and
// attribute set built beforehand, and no wrapper: two spans with their
// attributes, five measurements and three clock readings, as the otel
// package's BenchmarkSDKFloor makes them in memory. Against single it is
// the SDK's own cost, which no instrumentation that records the same
// telemetry avoids; otel-sdk against it is the wrapper's.
type otelFloor struct {
	m                     mutex
	tracer                trace.Tracer
	acquire, hold         metric.Float64Histogram
	attempts              metric.Int64Counter
	active                metric.Int64UpDownCounter
	strategyAdd, acquired []metric.AddOption
	acquiredRec, released []metric.RecordOption
	kind                  []trace.SpanStartOption
	common                []attribute.KeyValue
}

func newOtelFloor(tb testing.TB, addrs []string, cs *counters) mutex {
	l, err := single.New(conn(tb, goredisDriver, addrs[0], cs))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	m := mp.Meter("floor")
	f := &otelFloor{m: locksmith(tb, l, err, cs, lock.WithRetry(lock.Linear(retryEvery))), tracer: tp.Tracer("floor")}
	f.acquire, _ = m.Float64Histogram("acquire", metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	f.hold, _ = m.Float64Histogram("hold", metric.WithExplicitBucketBoundaries(0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600))
	f.attempts, _ = m.Int64Counter("attempts")
	f.active, _ = m.Int64UpDownCounter("active")
	set := func(kvs ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(kvs...))
	}
	strategy := attribute.String("locksmith.lock.strategy", "single")
	group := attribute.String("locksmith.lock.group", "bench") // the wrapper's sets carry the key's group
	acquired := set(strategy, group, attribute.String("locksmith.lock.outcome", "acquired"))
	f.strategyAdd, f.acquired = []metric.AddOption{set(strategy, group)}, []metric.AddOption{acquired}
	f.acquiredRec = []metric.RecordOption{acquired}
	f.released = []metric.RecordOption{set(strategy, group, attribute.String("locksmith.lock.end", "released"))}
	f.kind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	f.common = []attribute.KeyValue{attribute.String("db.system.name", "redis"), strategy, attribute.String("server.address", addrs[0])}
	return f
}

func (f *otelFloor) obtain(ctx context.Context, key string, wait bool) (held, error) {
	start := time.Now()
	ctx, span := f.tracer.Start(ctx, "lock.obtain", f.kind...)
	h, err := f.m.obtain(ctx, key, wait)
	f.attempts.Add(ctx, 1, f.acquired...)
	waited := time.Since(start)
	attrs := make([]attribute.KeyValue, 0, 7) // the SDK keeps what it is given
	attrs = append(attrs, f.common...)
	attrs = append(attrs, attribute.Int("locksmith.lock.attempts", 1), attribute.Float64("locksmith.lock.wait", waited.Seconds()),
		attribute.String("locksmith.lock.outcome", "acquired"), attribute.Float64("locksmith.lock.validity", ttl.Seconds()))
	span.SetAttributes(attrs...)
	span.End()
	if err != nil {
		return nil, err
	}
	f.active.Add(ctx, 1, f.strategyAdd...)
	f.acquire.Record(ctx, waited.Seconds(), f.acquiredRec...)
	return floorHeld{f, h, start}, nil
}

// floorHeld is a lock of otelFloor.
type floorHeld struct {
	f     *otelFloor
	h     held
	start time.Time
}

func (h floorHeld) Release(ctx context.Context) error {
	_, span := h.f.tracer.Start(ctx, "lock.release", h.f.kind...)
	err := h.h.Release(ctx)
	span.SetAttributes(h.f.common...)
	span.End()
	h.f.hold.Record(ctx, time.Since(h.start).Seconds(), h.f.released...)
	h.f.active.Add(ctx, -1, h.f.strategyAdd...)
	return err
}
