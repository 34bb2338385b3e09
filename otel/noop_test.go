package lockotel_test

import (
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
)

// TestNoopProviders: given the API's no-op providers for both traces and
// metrics, NewLocker returns the Locker it was given, which then costs
// nothing more; with one of them recording, it instruments.
func TestNoopProviders(t *testing.T) {
	addr, _ := redistest.Addr(t)
	l := singleLocker(t, addr)
	noTraces := lockotel.WithTracerProvider(tracenoop.NewTracerProvider())
	noMetrics := lockotel.WithMeterProvider(metricnoop.NewMeterProvider())
	if got := lockotel.NewLocker(l, noTraces, noMetrics); got != l {
		t.Errorf("NewLocker with no-op providers = %T, want the Locker it was given", got)
	}
	metrics := lockotel.WithMeterProvider(sdkmetric.NewMeterProvider())
	if got := lockotel.NewLocker(l, noTraces, metrics); got == l {
		t.Error("NewLocker with a recording meter provider returned the Locker it was given, want it instrumented")
	}
	if got := lockotel.NewLocker(l); got == l {
		t.Error("NewLocker with the global providers returned the Locker it was given, want it instrumented (an SDK can be installed later)")
	}
}

// TestNoopElectHooks: given the API's no-op providers for both, ElectHooks
// returns nil, which elect.WithHooks ignores; with one of them recording,
// or the global providers, it returns hooks.
func TestNoopElectHooks(t *testing.T) {
	noTraces := lockotel.WithTracerProvider(tracenoop.NewTracerProvider())
	noMetrics := lockotel.WithMeterProvider(metricnoop.NewMeterProvider())
	if got := lockotel.ElectHooks(noTraces, noMetrics); got != nil {
		t.Errorf("ElectHooks with no-op providers: got %+v, want nil", got)
	}
	if got := lockotel.ElectHooks(noTraces, lockotel.WithMeterProvider(sdkmetric.NewMeterProvider())); got == nil {
		t.Error("ElectHooks with a recording meter provider: got nil, want hooks")
	}
	if got := lockotel.ElectHooks(); got == nil {
		t.Error("ElectHooks with the global providers: got nil, want hooks (an SDK can be installed later)")
	}
}
