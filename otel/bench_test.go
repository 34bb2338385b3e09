package lockotel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
)

// variants returns the bare locker, and the locker wrapped with no-op
// providers and with a recording SDK, over one real server.
func variants(b *testing.B) []struct {
	name string
	l    lock.Locker
} {
	addr := redistest.Start(b, 1)[0].Addr
	bare := singleLocker(b, addr)
	// A recording SDK: every span sampled and recorded, in full, and
	// handed to a processor that counts it. The export pipeline (a batch
	// processor's goroutine, an exporter) is left out: its cost is the same
	// for any instrumentation. Run with -tags batcher to include it.
	var ended counter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spanProcessor(&ended)), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	return []struct {
		name string
		l    lock.Locker
	}{
		{"bare", bare},
		{"otel-noop", lockotel.NewLocker(bare, lockotel.WithTracerProvider(tracenoop.NewTracerProvider()), lockotel.WithMeterProvider(metricnoop.NewMeterProvider()))},
		{"otel-sdk", lockotel.NewLocker(bare, lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp))},
	}
}

func obtainRelease(b *testing.B, l lock.Locker) {
	ctx := context.Background()
	lk, err := l.Obtain(ctx, "bench:otel", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	if err := lk.Release(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkObtainRelease measures an uncontended Obtain+Release against a
// real server for each variant, with its allocations.
//
//	go test -run '^$' -bench ObtainRelease -count 10 ./otel/
func BenchmarkObtainRelease(b *testing.B) {
	for _, v := range variants(b) {
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
	vs := variants(b)
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

// counter is a span processor that counts the spans that end.
type counter struct{ n atomic.Int64 }

func (c *counter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *counter) OnEnd(sdktrace.ReadOnlySpan)                     { c.n.Add(1) }
func (c *counter) Shutdown(context.Context) error                  { return nil }
func (c *counter) ForceFlush(context.Context) error                { return nil }
