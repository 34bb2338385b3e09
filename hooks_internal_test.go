package lock

import (
	"context"
	"testing"
)

// BenchmarkHookChain measures the hook chain alone: Obtain, Attempt and Op
// hooks that only call next, around a next that does nothing. "one" is a
// single set of hooks, as the otel package installs; "skip" puts before it
// a set whose Obtain, Attempt and Op are nil; "three" nests three sets.
// The allocations are the chain's own.
//
//	go test -run '^$' -bench HookChain -benchmem -count 5 .
func BenchmarkHookChain(b *testing.B) {
	pass := &Hooks{
		Obtain: func(ctx context.Context, _ Event, next func(context.Context) (*Lock, error)) (*Lock, error) {
			return next(ctx)
		},
		Attempt: func(ctx context.Context, _ Event, next func(context.Context) error) error { return next(ctx) },
		Op:      func(ctx context.Context, _ Event, next func(context.Context) error) error { return next(ctx) },
	}
	none := &Hooks{Ended: func(Event) {}}
	held := &Lock{}
	obtained := func(context.Context) (*Lock, error) { return held, nil }
	done := func(context.Context) error { return nil }
	ctx := context.Background()
	e := Event{Strategy: "single", Op: "obtain", Key: "k"}
	for _, c := range []struct {
		name string
		hs   hookList
	}{
		{"one", hookList{pass}},
		{"skip", hookList{none, pass}},
		{"three", hookList{pass, pass, pass}},
	} {
		b.Run(c.name+"/obtain", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := chain(ctx, c.hs, obtainHook, e, obtained); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/attempt", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.hs.wrap(ctx, nil, e, attemptHook, done); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/op", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.hs.wrap(ctx, nil, e, opHook, done); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
