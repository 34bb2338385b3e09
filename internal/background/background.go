// Package background counts the work that outlives a call, such as the
// clean-up that deletes what an attempt without an answer may have
// written, so that the owner of the connections it uses can wait for it
// before closing them: config.Locker's Close does. The lock package and
// the strategies start such work with [Go] or [Start], on the context of
// the call it belongs to; a context without a [Group] counts nothing.
package background

import (
	"context"
	"sync"
)

// Group counts the work started on the contexts that carry it ([With]).
// The zero Group is ready to use.
type Group struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil until Wait needs it
}

type key struct{}

// With returns ctx carrying g; a nil g, or a nil ctx (which the callee
// refuses), returns ctx.
func With(ctx context.Context, g *Group) context.Context {
	if g == nil || ctx == nil {
		return ctx
	}
	return context.WithValue(ctx, key{}, g)
}

// From returns the Group ctx carries, or nil.
func From(ctx context.Context) *Group {
	g, _ := ctx.Value(key{}).(*Group)
	return g
}

// Start counts one piece of work in ctx's Group, if any, and returns the
// function that ends it: call it once, when the work is done. Call Start
// before the call that starts the work returns, so that a Wait that
// follows that call waits for the work.
func Start(ctx context.Context) (done func()) {
	g := From(ctx)
	if g == nil {
		return nop
	}
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	return g.done
}

func nop() {}

// Go runs f in a goroutine of its own, counted in ctx's Group.
func Go(ctx context.Context, f func()) {
	done := Start(ctx)
	go func() {
		defer done()
		f()
	}()
}

func (g *Group) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// Wait waits until no work counted in g is running.
func (g *Group) Wait() {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	<-idle
}
