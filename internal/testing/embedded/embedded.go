// Package embedded builds the demos' Locker: on a Redis of the user's, or on
// an embedded server from [locktest].
package embedded

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

// Single returns a Locker of the single strategy over go-redis, on addr
// when it is set, and otherwise on a new embedded server, which it announces
// on stdout. close closes the client and stops the server. The demos use
// it for their -addr flag.
func Single(addr string) (_ *lock.Locker, close func(), err error) {
	var client *redis.Client
	if addr == "" {
		s, err := locktest.StartServer()
		if err != nil {
			return nil, nil, err
		}
		fmt.Printf("embedded Redis on %s\n", s.Addr())
		client, close = s.GoRedisClient(), s.Close // Close closes the client too
	} else {
		client = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		close = func() { _ = client.Close() }
	}
	l, err := single.New(goredis.New(client))
	if err != nil {
		close()
		return nil, nil, err
	}
	return l, close, nil
}
