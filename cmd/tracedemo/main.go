// Command tracedemo shows what the otel package records when workers contend
// for locks: it runs them on an embedded in-process server (or a Redis of
// your own), records every span and metric with the OpenTelemetry SDK, and
// prints a waterfall of the trace (each worker's lock.obtain, lock.hold and
// lock.release spans, and the holders its lock.obtain span links to), the
// lock.obtain spans, the hottest locks and the metrics. With -svg it also
// draws the waterfall as an SVG image, each link an arrow from the waiter's
// attempt to its holder's hold (docs/observability.md's picture is drawn by
// it).
//
//	go run ./cmd/tracedemo
//	go run ./cmd/tracedemo -svg docs/contention.svg
//	go run ./cmd/tracedemo -addr 127.0.0.1:6380
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/testing/embedded"
	lockotel "github.com/locksmith-go/lock/otel"
)

func main() {
	addr := flag.String("addr", "", "Redis address (default: an embedded in-process server)")
	svg := flag.String("svg", "", "also write the waterfall as an SVG image to this file")
	hold := flag.Duration("hold", 15*time.Millisecond, "how long each worker holds its lock")
	apart := flag.Duration("apart", 5*time.Millisecond, "how long after the one before each worker starts")
	flag.Parse()
	log.SetFlags(0)

	bare, closeLocker, err := embedded.Single(*addr)
	if err != nil {
		log.Fatal(err)
	}
	defer closeLocker()

	ctx := context.Background()
	rec := newRecorder()
	defer rec.shutdown(ctx)
	jobs := []job{{1, "report:daily"}, {2, "report:daily"}, {3, "invoice:42"}, {4, "report:daily"}, {5, "invoice:42"}, {6, "report:daily"}}
	fmt.Printf("%d workers contend for 2 locks, starting %v apart; each holds its lock for %v\n", len(jobs), *apart, *hold)
	tr, err := rec.run(ctx, bare, jobs, *apart, *hold)
	if err != nil {
		log.Fatal(err)
	}
	tr.text(os.Stdout)
	if err := printMetrics(os.Stdout, rec.reader); err != nil {
		log.Fatal(err)
	}
	if *svg != "" {
		f, err := os.Create(*svg)
		if err != nil {
			log.Fatal(err)
		}
		tr.svg(f)
		if err := f.Close(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("\nwrote %s\n", *svg)
	}
}

// recorder records in memory what a Locker that lockotel instruments with
// its providers does; in production the SDK exports to a collector, and
// the Locker sees only the providers.
type recorder struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

func newRecorder() *recorder {
	rec := &recorder{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	rec.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec.spans))
	rec.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(rec.reader))
	return rec
}

func (rec *recorder) shutdown(ctx context.Context) {
	_ = rec.tp.Shutdown(ctx)
	_ = rec.mp.Shutdown(ctx)
}

// run runs jobs (see run) on bare, instrumented by lockotel, and returns
// their trace.
func (rec *recorder) run(ctx context.Context, bare *lock.Locker, jobs []job, apart, hold time.Duration) (waterfall, error) {
	locker := lockotel.NewLocker(bare,
		lockotel.WithTracerProvider(rec.tp), lockotel.WithMeterProvider(rec.mp), lockotel.WithKeys(lockotel.KeysHashed))
	start := time.Now()
	if err := run(ctx, rec.tp, locker, jobs, apart, hold); err != nil {
		return waterfall{}, err
	}
	return collect(rec.spans.Ended(), jobs, start), nil
}

// job is one worker and the key it locks.
type job struct {
	worker int
	key    string
}

// run starts the jobs, one every apart. Each runs in a span of its own (a
// "job" span, as an application's would be), so that its lock spans are
// its children, and obtains its lock with the worker's name as metadata,
// which the spans of the workers that wait for it name it by.
func run(ctx context.Context, tp *sdktrace.TracerProvider, locker *lock.Locker, jobs []job, apart, hold time.Duration) error {
	tracer := tp.Tracer("tracedemo")
	var wg sync.WaitGroup
	errs := make(chan error, len(jobs))
	for i, j := range jobs {
		if i > 0 {
			time.Sleep(apart) // the next job arrives
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, span := tracer.Start(ctx, "job", trace.WithAttributes(attribute.Int("worker", j.worker), attribute.String("key", j.key)))
			defer span.End()
			lk, err := locker.Obtain(ctx, j.key, 5*time.Second, lock.WithRetry(lock.Linear(100*time.Millisecond)),
				lock.WithMetadata(fmt.Sprintf("worker %d", j.worker)))
			if err != nil {
				errs <- fmt.Errorf("worker %d: %w", j.worker, err)
				return
			}
			time.Sleep(hold) // the work the lock protects
			if err := lk.Release(ctx); err != nil {
				errs <- fmt.Errorf("worker %d: %w", j.worker, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// row is one job's part of the trace, in milliseconds from the start.
type row struct {
	job
	keyHash                  string
	obtain                   trace.SpanID
	obtainStart, obtainEnd   float64
	holdStart, holdEnd       float64
	releaseStart, releaseEnd float64
	contended                []float64
	links                    []link
	attempts                 int64
	outcome                  string
}

// link is a lock.contended event of a waiter's lock.obtain span: the first
// that met a holder, with the span link to the holder's lock.obtain span,
// or one that met no holder, without a link (the lock was free, but
// promised to the head of the queue of waiters, or its holder released it
// before the waiter read it back).
type link struct {
	at     float64      // when the attempt ended
	holder string       // the holder's metadata, as the waiter read it back; empty if no holder
	span   trace.SpanID // the holder's lock.obtain span
	to     int          // the holder's row, or -1
}

type waterfall struct {
	rows []row
	end  float64
}

// collect turns the recorded spans into rows, one per job: grouped by key,
// in the order of jobs, and by when each obtained its lock.
func collect(spans []sdktrace.ReadOnlySpan, jobs []job, start time.Time) waterfall {
	ms := func(t time.Time) float64 { return float64(t.Sub(start).Microseconds()) / 1000 }
	byParent := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	var tr waterfall
	for _, s := range spans {
		byParent[s.Parent().SpanID()] = append(byParent[s.Parent().SpanID()], s)
	}
	for _, s := range spans {
		if s.Name() != "job" {
			continue
		}
		r := row{}
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "worker":
				r.worker = int(kv.Value.AsInt64())
			case "key":
				r.key = kv.Value.AsString()
			}
		}
		for _, c := range byParent[s.SpanContext().SpanID()] {
			a := attrMap(c.Attributes())
			switch c.Name() {
			case "lock.obtain":
				r.obtain = c.SpanContext().SpanID()
				r.obtainStart, r.obtainEnd = ms(c.StartTime()), ms(c.EndTime())
				r.keyHash = a["locksmith.lock.key_hash"].AsString()
				r.attempts = a["locksmith.lock.attempts"].AsInt64()
				r.outcome = a["locksmith.lock.outcome"].AsString()
				for _, e := range c.Events() {
					if e.Name == "lock.contended" {
						r.contended = append(r.contended, ms(e.Time))
					}
				}
				r.links = links(c, ms)
				for _, h := range byParent[r.obtain] {
					if h.Name() == "lock.hold" {
						r.holdStart, r.holdEnd = ms(h.StartTime()), ms(h.EndTime())
					}
				}
			case "lock.release":
				r.releaseStart, r.releaseEnd = ms(c.StartTime()), ms(c.EndTime())
			}
		}
		tr.end = max(tr.end, r.releaseEnd, r.holdEnd)
		tr.rows = append(tr.rows, r)
	}
	rank := map[string]int{}
	for i, j := range slices.Backward(jobs) {
		rank[j.key] = i
	}
	slices.SortFunc(tr.rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(rank[a.key], rank[b.key]), cmp.Compare(a.obtainEnd, b.obtainEnd))
	})
	for _, r := range tr.rows {
		for i := range r.links {
			r.links[i].to = slices.IndexFunc(tr.rows, func(h row) bool { return h.obtain == r.links[i].span })
		}
	}
	return tr
}

// links are the holders that the attempts of c, a waiter's lock.obtain
// span, met: its links, each named by the holder's fingerprint, at the
// first lock.contended event with that fingerprint, and its
// lock.contended events that name no holder.
func links(c sdktrace.ReadOnlySpan, ms func(time.Time) float64) []link {
	spans := map[string]trace.SpanID{}
	for _, l := range c.Links() {
		spans[attrMap(l.Attributes)["locksmith.lock.holder.fingerprint"].AsString()] = l.SpanContext.SpanID()
	}
	var met []link
	for _, e := range c.Events() {
		a := attrMap(e.Attributes)
		fp := a["locksmith.lock.holder.fingerprint"].AsString()
		if span, ok := spans[fp]; e.Name == "lock.contended" && (ok || fp == "") {
			met = append(met, link{at: ms(e.Time), holder: a["locksmith.lock.holder.metadata"].AsString(), span: span})
			delete(spans, fp)
		}
	}
	return met
}

func attrMap(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// text prints the waterfall, the obtain spans and the hottest locks.
func (tr waterfall) text(w io.Writer) {
	const width = 64
	col := func(t float64) int { return min(width-1, int(t/tr.end*width)) }
	fmt.Fprintf(w, "\nwaterfall, 0 to %.0fms: ░ waiting in lock.obtain, ┃ a contended attempt (span event), █ lock.hold, ▌ lock.release, → linked to the holder\n", tr.end)
	for _, r := range tr.rows {
		line := []rune(strings.Repeat(" ", width))
		for c := col(r.obtainStart); c <= col(r.obtainEnd); c++ {
			line[c] = '░'
		}
		for _, t := range r.contended {
			line[col(t)] = '┃'
		}
		for c := col(r.holdStart); c < col(r.releaseStart); c++ { // the hold ends with the release
			line[c] = '█'
		}
		line[col(r.releaseStart)] = '▌'
		var holders []string
		for _, l := range r.links {
			holders = append(holders, cmp.Or(l.holder, "no holder"))
		}
		bar := string(line)
		if len(holders) > 0 {
			bar += " → " + strings.Join(holders, ", ")
		}
		fmt.Fprintf(w, "  worker %d %-13s %s\n", r.worker, r.key, strings.TrimRight(bar, " "))
	}

	fmt.Fprintf(w, "\nlock.obtain spans (locksmith.lock.*)\n  %-8s %-18s %8s %9s  %s\n", "worker", "key_hash", "attempts", "wait", "outcome")
	for _, r := range tr.rows {
		fmt.Fprintf(w, "  %-8d %-18s %8d %7.1fms  %s\n", r.worker, r.keyHash, r.attempts, r.obtainEnd-r.obtainStart, r.outcome)
	}

	type heat struct {
		hash, key          string
		obtains, contended int
		totalWait, maxWait float64
	}
	var hot []*heat
	byHash := map[string]*heat{}
	for _, r := range tr.rows {
		h := byHash[r.keyHash]
		if h == nil {
			h = &heat{hash: r.keyHash, key: r.key}
			byHash[r.keyHash] = h
			hot = append(hot, h)
		}
		wait := r.obtainEnd - r.obtainStart
		h.obtains++
		h.contended += len(r.contended)
		h.totalWait += wait
		h.maxWait = max(h.maxWait, wait)
	}
	slices.SortFunc(hot, func(a, b *heat) int { return cmp.Compare(b.totalWait, a.totalWait) })
	fmt.Fprintf(w, "\nhottest locks: lock.obtain spans grouped by locksmith.lock.key_hash\n  %-18s %7s %10s %11s %9s  %s\n", "key_hash", "obtains", "contended", "total wait", "max wait", "(the key, known to you)")
	for _, h := range hot {
		fmt.Fprintf(w, "  %-18s %7d %10d %9.1fms %7.1fms  %s\n", h.hash, h.obtains, h.contended, h.totalWait, h.maxWait, h.key)
	}
}

// printMetrics prints what the metric instruments recorded: each
// instrument's points, by their attributes.
func printMetrics(w io.Writer, reader *sdkmetric.ManualReader) error {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		return err
	}
	type point struct{ instrument, labels, value string }
	var points []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var ps []point
			add := func(set attribute.Set, format string, args ...any) {
				ps = append(ps, point{m.Name, labels(set), fmt.Sprintf(format, args...)})
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, "count=%d sum=%.3fs max=%.3fs", dp.Count, dp.Sum, maxOf(dp.Max))
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, "count=%d sum=%d max=%d", dp.Count, dp.Sum, maxOf(dp.Max))
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, "%d", dp.Value)
				}
			}
			slices.SortFunc(ps, func(a, b point) int { return cmp.Compare(a.labels, b.labels) })
			points = append(points, ps...)
		}
	}
	width := 0
	for _, p := range points {
		width = max(width, len(p.labels))
	}
	fmt.Fprintf(w, "\nmetrics\n")
	for _, p := range points {
		fmt.Fprintf(w, "  %-32s %-*s %s\n", p.instrument, width, p.labels, p.value)
	}
	return nil
}

func maxOf[N int64 | float64](e metricdata.Extrema[N]) N {
	v, _ := e.Value()
	return v
}

func labels(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		parts = append(parts, strings.TrimPrefix(string(kv.Key), "locksmith.lock.")+"="+kv.Value.Emit())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// svg draws the waterfall, with each waiter's links to its holders: an
// arc from the attempt that met the holder up to the holder's lock.hold
// bar at that time, named by the holder's metadata.
func (tr waterfall) svg(w io.Writer) {
	const (
		left, right, top, rowH, barH = 190.0, 100.0, 58.0, 34.0, 16.0
		width                        = 960.0
		linkColor                    = "#6c3483"
	)
	plot := width - left - right
	x := func(t float64) float64 { return left + t/tr.end*plot }
	y := func(i int) float64 { return top + rowH*float64(i) }
	height := y(len(tr.rows)) + 52
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", width, height)
	fmt.Fprintf(w, `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="%s"/></marker></defs>`+"\n", linkColor)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="12" y="22" font-size="15" font-weight="bold">%d workers contend for 2 locks: spans recorded by lockotel</text>`+"\n", len(tr.rows))
	legend := []struct{ color, label string }{{"#f4b860", "waiting (lock.obtain)"}, {"#c0392b", "contended attempt (event)"}, {"#2e8b57", "lock.hold"}, {"#2c6fbb", "lock.release"}, {linkColor, "link to the holder"}}
	lx := 12.0
	for _, l := range legend {
		fmt.Fprintf(w, `<rect x="%.0f" y="33" width="12" height="12" fill="%s"/><text x="%.0f" y="44">%s</text>`+"\n", lx, l.color, lx+16, l.label)
		lx += 36 + 7.2*float64(len(l.label))
	}
	for ms := 0.0; ms <= tr.end; ms += tickStep(tr.end) {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", x(ms), top-4, x(ms), height-40)
		fmt.Fprintf(w, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%.0fms</text>`+"\n", x(ms), height-24, ms)
	}
	for i, r := range tr.rows {
		fmt.Fprintf(w, `<text x="12" y="%.0f">worker %d · %s</text>`+"\n", y(i)+barH-3, r.worker, r.key)
		fmt.Fprintf(w, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="#f4b860"><title>lock.obtain: %.1fms, %d attempts</title></rect>`+"\n",
			x(r.obtainStart), y(i), max(1, x(r.obtainEnd)-x(r.obtainStart)), barH, r.obtainEnd-r.obtainStart, r.attempts)
		for _, t := range r.contended {
			fmt.Fprintf(w, `<rect x="%.1f" y="%.0f" width="2" height="%.0f" fill="#c0392b"/>`+"\n", x(t)-1, y(i), barH)
		}
		fmt.Fprintf(w, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="#2e8b57"><title>lock.hold: %.1fms</title></rect>`+"\n",
			x(r.holdStart), y(i), max(1, x(r.holdEnd)-x(r.holdStart)), barH, r.holdEnd-r.holdStart)
		fmt.Fprintf(w, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="#2c6fbb"/>`+"\n", x(r.releaseStart), y(i), max(3, x(r.releaseEnd)-x(r.releaseStart)), barH)
		fmt.Fprintf(w, `<text x="%.1f" y="%.0f" fill="#555" font-size="11">%s</text>`+"\n", x(r.releaseEnd)+8, y(i)+barH-4, plural(r.attempts, "attempt"))
	}
	// The links last, over the bars: an arc from the top of the waiter's
	// bar, at its contended attempt, to the bottom of the holder's, as far
	// out to the right as the rows are apart, so that arcs to one holder
	// nest.
	for i, r := range tr.rows {
		for _, l := range r.links {
			x0, y0 := x(l.at), y(i)
			if l.to < 0 {
				fmt.Fprintf(w, `<text x="%.1f" y="%.0f" fill="#777" font-size="11">no holder</text>`+"\n", x0+4, y0+barH+11)
				continue
			}
			fmt.Fprintf(w, `<text x="%.1f" y="%.0f" fill="%s" font-size="11">%s</text>`+"\n", x0+4, y0+barH+11, linkColor, l.holder)
			y1, k := y(l.to)+barH, 20*float64(i-l.to)
			d := fmt.Sprintf("M%.1f %.0fC%.1f %.0f %.1f %.0f %.1f %.0f", x0, y0, x0+k, y0-6, x0+k, y1+6, x0+1, y1+1)
			fmt.Fprintf(w, `<path d="%s" fill="none" stroke="white" stroke-width="4"/><path d="%s" fill="none" stroke="%s" stroke-width="1.5" marker-end="url(#arrow)"/>`+"\n", d, d, linkColor)
		}
	}
	fmt.Fprintln(w, `</svg>`)
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// tickStep picks a round axis step for a span of end milliseconds.
func tickStep(end float64) float64 {
	for _, s := range []float64{5, 10, 20, 25, 50, 100, 200, 250, 500, 1000} {
		if end/s <= 10 {
			return s
		}
	}
	return 2000
}
