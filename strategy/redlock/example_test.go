package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
)

func ExampleNew() {
	// Three independent masters (in-process servers, for the example),
	// reached through a mix of drivers.
	var nodes []driver.Conn
	for i := range 3 {
		srv, err := locktest.StartServer()
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		if i == 2 {
			pool := &redigoredis.Pool{DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
				return redigoredis.DialContext(ctx, "tcp", srv.Addr())
			}}
			defer pool.Close()
			nodes = append(nodes, redigo.New(pool, redigo.WithAddr(srv.Addr())))
			continue
		}
		// For a Redlock node: the context bounds each command, and a dead
		// node fails at once instead of retrying within the node timeout.
		client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		defer client.Close()
		nodes = append(nodes, goredis.New(client))
	}

	locker, err := redlock.New(nodes)
	if err != nil {
		log.Fatal(err)
	}
	locker = locker.With(lock.WithMaxRefreshes(10)) // as the specification asks
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "payments:settle", 10*time.Second,
		lock.WithRetry(lock.Exponential(10*time.Millisecond, 200*time.Millisecond)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held on a quorum until", time.Until(lk.ValidUntil()) <= 10*time.Second)
	fmt.Println(lk.Release(ctx))
	// Output:
	// held on a quorum until true
	// <nil>
}

// A QuorumError says what each node answered.
func ExampleQuorumError() {
	srv, err := locktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1}) // nothing listens there
	defer down.Close()
	defer srv.Close()

	locker, err := redlock.New([]driver.Conn{goredis.New(client), goredis.New(down)})
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.Obtain(context.Background(), "payments:settle", 10*time.Second)
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		fmt.Printf("needed %d of %d nodes\n", qe.Quorum, len(qe.Nodes))
		fmt.Println("127.0.0.1:1:", qe.Nodes[1].Outcome)
	}
	// Output:
	// needed 2 of 2 nodes
	// 127.0.0.1:1: refused
}

// Inspect reads every node, and says the lock is held only when a quorum of
// them hold one holder's value.
func ExampleStrategy_Inspect() {
	var nodes []driver.Conn
	var clients []*redis.Client
	for range 3 {
		srv, err := locktest.StartServer() // in-process servers, for the example
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		defer client.Close()
		nodes, clients = append(nodes, goredis.New(client)), append(clients, client)
	}
	locker, err := redlock.New(nodes)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "payments:settle", 10*time.Second, lock.WithMetadata("host=web-3"))
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	st, err := locker.Inspect(ctx, "payments:settle")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Held, st.Metadata, st.Fingerprint == strategy.Fingerprint(lk.Token())) // Verdict: held on 3 of 3 nodes (quorum 2)
	holding := 0
	for _, n := range st.Nodes {
		if n.Held && n.Fingerprint == st.Fingerprint {
			holding++
		}
	}
	// Obtain returned once a quorum granted it; the last grant may still
	// be on its way.
	fmt.Println("nodes holding it, a quorum or more:", holding >= 2) // the quorum of 3 nodes

	// One node holds a value: an acquisition under way, or a lock expiring.
	clients[0].Set(ctx, "payments:refund", "BEzb3iRQgpoTxxpuOWiT1w", 10*time.Second)
	st, err = locker.Inspect(ctx, "payments:refund")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Verdict, st.Held)
	// Output:
	// true host=web-3 true
	// nodes holding it, a quorum or more: true
	// no quorum: held on 1 of 3 nodes false
}
