package readme

import (
	"context"
	"fmt"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/elect"
)

// schedule stands for a leader's work.
func schedule(ctx context.Context, term int64) error {
	<-ctx.Done()
	return ctx.Err()
}

// Lead is docs/election.md's first fragment.
func Lead(ctx context.Context, locker *lock.Locker) error {
	e, err := elect.New(locker, "{billing}:leader", elect.WithIdentity("web-3"))
	if err != nil {
		return err
	}
	return e.Run(ctx, func(ctx context.Context, t *elect.Term) error {
		return schedule(ctx, t.Number()) // ctx ends a stop grace before the lease could pass on
	})
}

// Follow is docs/election.md's fragment of followers.
func Follow(ctx context.Context, e *elect.Elector) {
	for ev := range e.Observe(ctx) {
		switch ev.Kind {
		case elect.Elected:
			fmt.Println("leader:", ev.Leader.Identity, "term", ev.Leader.Term)
		case elect.Vacant:
			fmt.Println("no leader")
		case elect.Gap:
			fmt.Println("missed", ev.Missed, "terms")
		}
	}
}
