//go:build batcher

package lockotel_test

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// With -tags batcher, the recording SDK of the benchmark batches its spans
// and exports them, to an exporter that drops them, as in production.
func spanProcessor(*counter) sdktrace.SpanProcessor { return sdktrace.NewBatchSpanProcessor(discard{}) }

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
