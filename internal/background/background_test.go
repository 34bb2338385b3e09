package background_test

import (
	"testing"

	"github.com/locksmith-go/lock/internal/background"
)

// TestWait: Wait returns at once with no work running, and otherwise once
// every piece of work started before it has ended; a nil Group counts
// nothing.
func TestWait(t *testing.T) {
	t.Run("no work", func(t *testing.T) {
		var g background.Group
		g.Wait()
	})
	t.Run("waits for the work started before it", func(t *testing.T) {
		var g background.Group
		release, ended := make(chan struct{}), make(chan struct{})
		g.Go(func() { <-release; close(ended) })
		done := g.Start()
		waited := make(chan struct{})
		go func() { g.Wait(); close(waited) }()
		close(release)
		<-ended
		select {
		case <-waited:
			t.Fatal("Wait returned with work running (Start's), want it to wait")
		default:
		}
		done()
		<-waited
	})
	t.Run("a nil Group counts nothing", func(t *testing.T) {
		var g *background.Group
		done := g.Start()
		g.Wait()
		done()
	})
}
