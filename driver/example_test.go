package driver_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/locktest"
)

func ExampleScript() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	conn := goredis.New(client)

	// The SHA-1 is computed once. Run tries EVALSHA and falls back to EVAL
	// when the server has not cached the script yet.
	incr := driver.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		n, err := incr.Int(ctx, conn, []string{"counter"}, 5)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(n)
	}
	// Output:
	// 5
	// 10
}

// A go-redis client whose options would let a command outlive its
// context's deadline is refused by every strategy constructor.
func ExampleCheck() {
	client := redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"}) // no ContextTimeoutEnabled
	defer client.Close()
	fmt.Println(driver.Check(goredis.New(client)))
	// Output: goredis: redis.Options.ContextTimeoutEnabled must be true: without it go-redis bounds each command by its ReadTimeout (5s by default), not by the context's deadline
}
