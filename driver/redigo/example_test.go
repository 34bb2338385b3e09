package redigo_test

import (
	"context"
	"fmt"
	"log"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"

	"github.com/locksmith-go/lock/driver/redigo"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

func ExampleNew() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	pool := &redigoredis.Pool{
		MaxIdle: 8,
		DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
			return redigoredis.DialContext(ctx, "tcp", srv.Addr())
		},
	}
	defer pool.Close()

	locker, err := single.New(redigo.New(pool))
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
