package readme

import lockotel "github.com/locksmith-go/lock/otel"

import (
	"strings"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/locksmith-go/lock"
)

// OTel is docs/observability.md's first fragment.
func OTel(locker *lock.Locker, tp trace.TracerProvider, mp metric.MeterProvider) *lock.Locker {
	locker = lockotel.NewLocker(locker) // the global TracerProvider and MeterProvider

	// or choose the providers, and how keys are recorded:
	locker = lockotel.NewLocker(locker,
		lockotel.WithTracerProvider(tp),
		lockotel.WithMeterProvider(mp),
		lockotel.WithKeys(lockotel.KeysHashed), // default: lockotel.KeysOmitted
	)
	return locker
}

// OTelGroups is docs/observability.md's fragment of lock groups.
func OTelGroups(locker *lock.Locker) *lock.Locker {
	// Tenants' locks, "tenant/<id>/<job>", grouped by job: the tenants are too many for a series each.
	locker = lockotel.NewLocker(locker, lockotel.WithGroups(func(key string) string {
		return key[strings.LastIndexByte(key, '/')+1:]
	}))
	return locker
}
