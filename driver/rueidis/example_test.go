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

	// NewClient sets the options a lock call depends on (NewClusterClient
	// for a Cluster); the in-process server has no client-side caching.
	client, err := rueidisdriver.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
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
