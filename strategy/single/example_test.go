package single_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

func ExampleNew() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()

	locker, err := single.New(goredis.New(client))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "jobs:nightly", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	_, err = locker.Obtain(ctx, "jobs:nightly", 10*time.Second)
	fmt.Println(errors.Is(err, lock.ErrNotObtained))
	// Output: true
}

// A Locker built over the Strategy with lock.New applies its defaults to
// every Obtain: here, a retry policy, so that an Obtain waits for a lock
// held elsewhere.
func ExampleNewStrategy() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()

	s, err := single.NewStrategy(goredis.New(client))
	if err != nil {
		log.Fatal(err)
	}
	locker := lock.New(s, lock.WithRetry(lock.Linear(10*time.Millisecond)))
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "jobs:nightly", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	released := make(chan error)
	go func() {
		time.Sleep(20 * time.Millisecond)
		released <- lk.Release(ctx)
	}()

	next, err := locker.Obtain(ctx, "jobs:nightly", 10*time.Second) // retried until the release
	fmt.Println(<-released, err)
	fmt.Println(next.Release(ctx))
	// Output:
	// <nil> <nil>
	// <nil>
}

func ExampleNew_nilDriver() {
	_, err := single.New(nil)
	fmt.Println(err)
	fmt.Println(errors.As(err, new(*lock.ArgumentError)))
	// Output:
	// lock: invalid conn: must not be nil
	// true
}

// Inspect reads a lock without holding it: whether it is held, by whom (a
// fingerprint of the holder's token, never the token, and its metadata),
// for how long yet, and the last fencing token issued for the key.
func ExampleStrategy_Inspect() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker, err := single.New(goredis.New(client))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "jobs:nightly", time.Minute, lock.WithMetadata("host=web-3"), lock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}

	st, err := locker.Inspect(ctx, "jobs:nightly")
	if err != nil {
		log.Fatal(err)
	}
	fence, _ := lk.Fence()
	fmt.Println(st.Verdict, st.Metadata)
	fmt.Println("the holder's fingerprint:", st.Fingerprint == strategy.Fingerprint(lk.Token()))
	fmt.Println("the holder's fence:", st.Fence == fence)
	fmt.Println("TTL within the minute:", st.TTL > 0 && st.TTL <= time.Minute)

	if err := lk.Release(ctx); err != nil {
		log.Fatal(err)
	}
	st, err = locker.Inspect(ctx, "jobs:nightly")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Verdict, st.Held)
	// Output:
	// held host=web-3
	// the holder's fingerprint: true
	// the holder's fence: true
	// TTL within the minute: true
	// free false
}

// WithReplicas counts an acquisition only once WAIT confirms that enough
// replicas have it. The example's in-process server has no replica, so the
// lock is refused with a *ReplicaError, not ErrNotObtained, and the key it
// wrote is deleted.
func ExampleWithReplicas() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()

	locker, err := single.New(goredis.New(client), single.WithReplicas(1, 100*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	_, err = locker.Obtain(ctx, "jobs:nightly", 10*time.Second)
	var re *single.ReplicaError
	if errors.As(err, &re) {
		fmt.Printf("%d of %d replicas\n", re.Got, re.Want)
	}
	fmt.Println(errors.Is(err, lock.ErrNotObtained))
	fmt.Println(client.Exists(ctx, "jobs:nightly").Val())
	// Output:
	// 0 of 1 replicas
	// false
	// 0
}
