package rueidis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

func ExampleNew() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	// Any rueidis.Client works: standalone, Sentinel or Cluster.
	// DisableRetry leaves a failed command to the lock call, which bounds
	// it by its context; AlwaysPipelining keeps a context that ends from
	// closing a connection that other callers share (see the package
	// doc); the in-process server has no client-side caching.
	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{srv.Addr()}, ForceSingleClient: true, DisableRetry: true, AlwaysPipelining: true, DisableCache: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	locker, err := single.New(rueidisdriver.New(client))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "reports:weekly", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("obtained", lk.Key())
	fmt.Println(lk.Release(ctx))
	// Output:
	// obtained reports:weekly
	// <nil>
}
