// Package background counts the work that outlives a call, such as the
// clean-up that deletes what an attempt without an answer may have
// written, so that a Locker's Close can wait for it before the
// connections it uses are closed. The lock package and the strategies
// start such work with a Group's [Group.Go] or [Group.Start].
package background

import "sync"

// Group counts work in the background. The zero Group is ready to use; a
// nil *Group counts nothing.
type Group struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil until Wait needs it
}

// Start counts one piece of work, and returns the function that ends it:
// call it once, when the work is done. Call Start before the call that
// started the work returns, so that a Wait after that call sees it.
func (g *Group) Start() (done func()) {
	if g == nil {
		return nop
	}
	g.Add()
	return g.Done
}

func nop() {}

// Add counts one piece of work, as Start does, without a function to
// allocate: [Group.Done] ends it.
func (g *Group) Add() {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
}

// Go runs f in a goroutine of its own, counted from now until f returns.
func (g *Group) Go(f func()) {
	done := g.Start()
	go func() {
		defer done()
		f()
	}()
}

// Done ends a piece of work that Add counted.
func (g *Group) Done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// Wait waits until no work that g counts is running. Each piece of work is
// bounded by its own deadline (strategy.CleanupTimeout for a clean-up), so
// Wait is too, once no new work starts.
func (g *Group) Wait() {
	if g == nil {
		return
	}
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
