package lockotel_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy"
)

// variants returns bare, and bare wrapped with no-op providers and with a
// recording SDK.
func variants(b *testing.B, bare lock.Locker) []struct {
	name string
	l    lock.Locker
} {
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

// realServer returns a single-strategy locker over a real server (or the
// embedded one).
func realServer(b *testing.B) lock.Locker {
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
