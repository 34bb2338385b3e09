package lockotel_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/locktest"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy/single"
)

func ExampleNewLocker() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	bare, err := single.New(goredis.New(client))
	if err != nil {
		log.Fatal(err)
	}

	// In production the providers come from your SDK setup (or the
	// globals, the default); here the spans are recorded in memory.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	locker := lockotel.NewLocker(bare, lockotel.WithTracerProvider(tp))

	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "report:daily", time.Minute, lock.WithMetadata("web-3 pid=4121"))
	if err != nil {
		log.Fatal(err)
	}
	// A second worker tries three times, and gives up: it queued, was
	// woken (by its timer, or by its subscription's confirmation), and
	// leaves the queue (lock.cleanup). Its span names the holder, and
	// links to the holder's lock.obtain span, whose child lock.hold ends
	// with the release.
	_, _ = locker.Obtain(ctx, "report:daily", time.Minute, lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 3)))
	_ = lk.Release(ctx)

	for _, s := range spans.Ended() {
		fmt.Print(s.Name())
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "locksmith.lock.strategy", "locksmith.lock.outcome", "locksmith.lock.attempts", "locksmith.lock.holder.metadata", "locksmith.lock.end":
				fmt.Printf(" %s=%s", kv.Key, kv.Value.Emit())
			}
		}
		var events []string
		for _, e := range s.Events() {
			events = append(events, e.Name)
		}
		fmt.Printf(" events=%v links=%d status=%s\n", events, len(s.Links()), s.Status().Code)
	}
	// Output:
	// lock.obtain locksmith.lock.strategy=single locksmith.lock.attempts=1 locksmith.lock.outcome=acquired events=[] links=0 status=Unset
	// lock.cleanup locksmith.lock.strategy=single events=[] links=0 status=Unset
	// lock.obtain locksmith.lock.strategy=single locksmith.lock.attempts=3 locksmith.lock.outcome=contended locksmith.lock.holder.metadata=web-3 pid=4121 events=[lock.contended lock.wait.enqueued lock.wait.woken lock.contended lock.wait.woken lock.contended] links=1 status=Unset
	// lock.release locksmith.lock.strategy=single events=[] links=0 status=Unset
	// lock.hold locksmith.lock.strategy=single locksmith.lock.end=released events=[] links=0 status=Unset
}

func ExampleWithGroups() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	bare, err := single.New(goredis.New(client))
	if err != nil {
		log.Fatal(err)
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	// Tenants' locks, "tenant/<id>/<job>", grouped by job: the tenants are
	// too many for a series each.
	locker := lockotel.NewLocker(bare, lockotel.WithMeterProvider(mp), lockotel.WithGroups(func(key string) string {
		return key[strings.LastIndexByte(key, '/')+1:]
	}))

	ctx := context.Background()
	for _, key := range []string{"tenant/7/invoice", "tenant/8/invoice", "tenant/8/export"} {
		lk, err := locker.Obtain(ctx, key, time.Minute)
		if err != nil {
			log.Fatal(err)
		}
		_ = lk.Release(ctx)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "locksmith.lock.attempts" {
			for _, dp := range sum.DataPoints {
				group, _ := dp.Attributes.Value("locksmith.lock.group")
				lines = append(lines, fmt.Sprintf("%s group=%s %d", m.Name, group.Emit(), dp.Value))
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// locksmith.lock.attempts group=export 1
	// locksmith.lock.attempts group=invoice 2
}

func ExampleElectHooks() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker, err := single.New(goredis.New(client))
	if err != nil {
		log.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	hooks := lockotel.ElectHooks(lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp)) // lockotel.ElectHooks() for the global providers
	e, err := elect.New(locker, "scheduler:leader", elect.WithIdentity("web-3"), elect.WithHooks(hooks))
	if err != nil {
		log.Fatal(err)
	}

	// Run records the same as this campaign, and resigns when lead returns.
	ctx := context.Background()
	term, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := term.Resign(ctx); err != nil {
		log.Fatal(err)
	}

	for _, s := range spans.Ended() {
		fmt.Print(s.Name())
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			a[kv.Key] = kv.Value
		}
		for _, k := range []attribute.Key{"locksmith.elect.identity", "locksmith.elect.end"} {
			if v, ok := a[k]; ok {
				fmt.Printf(" %s=%s", k, v.Emit())
			}
		}
		_, numbered := a["locksmith.elect.term"]
		fmt.Printf(" numbered=%v status=%s\n", numbered, s.Status().Code)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "locksmith.elect.leader" {
			for _, dp := range sum.DataPoints {
				group, _ := dp.Attributes.Value("locksmith.lock.group")
				fmt.Printf("%s group=%s %d\n", m.Name, group.Emit(), dp.Value)
			}
		}
	}
	// Output:
	// lock.campaign locksmith.elect.identity=web-3 numbered=true status=Unset
	// lock.term locksmith.elect.identity=web-3 locksmith.elect.end=resigned numbered=true status=Unset
	// lock.resign numbered=true status=Unset
	// locksmith.elect.leader group=scheduler 0
}
