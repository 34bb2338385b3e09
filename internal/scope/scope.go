// Package scope carries the hooks of an Obtain, or of an operation on a
// held lock, through the context of a strategy's call: from the lock
// package, which runs the hooks, to strategy.ReportNode and
// strategy.CleanUp, which a strategy calls and which cannot import the lock
// package.
package scope

import "context"

// Scope is what a strategy's call can report to.
type Scope interface {
	// Node reports one node's answer to the Node hooks.
	Node(ctx context.Context, node, outcome string, err error)
	// Op runs fn, the operation op on key (such as a clean-up), through the
	// Op hooks.
	Op(ctx context.Context, op, key string, fn func(context.Context) error) error
}

type key struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s Scope) context.Context { return context.WithValue(ctx, key{}, s) }

// From returns the Scope ctx carries, or nil.
func From(ctx context.Context) Scope {
	s, _ := ctx.Value(key{}).(Scope)
	return s
}
