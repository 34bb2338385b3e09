package goredis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

func ExampleNew() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	// Any UniversalClient works: NewClient, NewClusterClient,
	// NewFailoverClient, NewRing. ContextTimeoutEnabled lets the context's
	// deadline bound each command.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()

	locker, err := single.New(goredis.New(client))
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
