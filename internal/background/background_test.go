package background_test

import (
	"context"
	"testing"

	"github.com/locksmith-go/lock/internal/background"
)

// TestWait: Wait returns at once with no work running, and otherwise once
// every piece of work started on a context carrying the Group has ended;
// work on a context without one is not counted.
func TestWait(t *testing.T) {
	t.Run("no work", func(t *testing.T) {
		var g background.Group
		g.Wait()
	})
	t.Run("waits for the work started before it", func(t *testing.T) {
		var g background.Group
		ctx := background.With(context.Background(), &g)
		release, ended := make(chan struct{}), make(chan struct{})
		background.Go(ctx, func() { <-release; close(ended) })
		done := background.Start(ctx)
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
	t.Run("a context without a Group counts nothing", func(t *testing.T) {
		var g background.Group
		done := background.Start(context.Background())
		g.Wait()
		done()
		if got := background.From(context.Background()); got != nil {
			t.Errorf("From(Background()) = %p, want nil", got)
		}
	})
}
