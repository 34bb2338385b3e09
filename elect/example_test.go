package elect_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

// newLocker starts an in-process Redis and returns a single-instance
// Locker on it, and a function that stops both. In an application, build
// the go-redis client from your own configuration instead.
func newLocker() (*lock.Locker, func()) {
	s, err := locktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	locker, err := single.New(goredis.New(client))
	if err != nil {
		log.Fatal(err)
	}
	return locker, func() {
		_ = locker.Close()
		_ = client.Close()
		s.Close()
	}
}

// Run leads while elected: lead's context ends a stop grace before the
// lease could pass to another candidate, and Run releases only after lead
// returned.
func Example() {
	locker, stop := newLocker()
	defer stop()
	e, err := elect.New(locker, "{billing}:leader", elect.WithIdentity("web-3"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = e.Run(ctx, func(ctx context.Context, t *elect.Term) error {
		fmt.Println("leading; the term is a fencing token:", t.Number() > 0)
		cancel() // a real leader works until ctx ends
		<-ctx.Done()
		return nil
	})
	fmt.Println(err)
	// Output:
	// leading; the term is a fencing token: true
	// context canceled
}

// scheduler is the interface of gocron's Elector (go-co-op/gocron's
// WithDistributedElector): a job runs only where IsLeader returns nil.
type scheduler interface {
	IsLeader(ctx context.Context) error
}

// An Elector is a gocron Elector: IsLeader reads the leader's own count of
// its lease, with no round trip. Run campaigns in the background.
func ExampleElector_IsLeader() {
	locker, stop := newLocker()
	defer stop()
	e, err := elect.New(locker, "{jobs}:leader")
	if err != nil {
		log.Fatal(err)
	}
	var s scheduler = e // gocron.WithDistributedElector(e)
	fmt.Println(s.IsLeader(context.Background()))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading := make(chan struct{})
	go func() {
		_ = e.Run(ctx, func(ctx context.Context, _ *elect.Term) error {
			close(leading)
			<-ctx.Done()
			return nil
		})
	}()
	<-leading
	fmt.Println(s.IsLeader(context.Background()))
	// Output:
	// elect: not the leader
	// <nil>
}

// Campaign returns a held term, for a program that drives the steps
// itself; Resign wakes the next candidate at once.
func ExampleElector_Campaign() {
	locker, stop := newLocker()
	defer stop()
	e, err := elect.New(locker, "{shard:7}:owner", elect.WithLease(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	t, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := t.Proclaim(ctx, "web-3 addr=10.0.0.7:8080"); err != nil {
		log.Fatal(err)
	}
	l, err := e.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(l.Identity, l.Term == t.Number())
	fmt.Println(t.Resign(ctx), t.Err())
	// Output:
	// web-3 addr=10.0.0.7:8080 true
	// <nil> elect: not the leader: resigned
}

// Observe yields each change of leadership, in order, with the exact count
// of the terms it did not see.
func ExampleElector_Observe() {
	locker, stop := newLocker()
	defer stop()
	e, err := elect.New(locker, "{billing}:leader", elect.WithIdentity("web-3"), elect.WithInterval(10*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	for ev := range e.Observe(ctx) {
		switch ev.Kind {
		case elect.Vacant:
			fmt.Println("vacant")
			if seen++; seen == 1 {
				t, err := e.Campaign(ctx)
				if err != nil {
					log.Fatal(err)
				}
				defer t.Resign(context.Background())
			}
		case elect.Elected:
			fmt.Println("elected:", ev.Leader.Identity)
			cancel()
		}
	}
	// Output:
	// vacant
	// elected: web-3
}
