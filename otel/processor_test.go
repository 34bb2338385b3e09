//go:build !batcher

package lockotel_test

import sdktrace "go.opentelemetry.io/otel/sdk/trace"

func spanProcessor(c *counter) sdktrace.SpanProcessor { return c }
