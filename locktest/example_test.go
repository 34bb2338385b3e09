package locktest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

// In a test of your own, one line gives a Locker on a fresh embedded
// server, stopped when the test ends.
func ExampleGoRedis() {
	t := &testing.T{} // given to your test function

	locker, err := single.New(locktest.GoRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Obtain(context.Background(), "invoice:42", time.Minute); err != nil {
		t.Fatalf("Obtain = %v, want nil", err)
	}
}

// The same over redigo.
func ExampleRedigo() {
	t := &testing.T{} // given to your test function

	locker, err := single.New(locktest.Redigo(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Obtain(context.Background(), "invoice:42", time.Minute); err != nil {
		t.Fatalf("Obtain = %v, want nil", err)
	}
}

// A test that needs the server itself: a client of its own to look at the
// key, or the address for code under test that dials it.
func ExampleNewServer() {
	t := &testing.T{} // given to your test function
	ctx := context.Background()

	srv := locktest.NewServer(t) // closed when t ends
	client := srv.GoRedisClient()
	locker, err := single.New(goredis.New(client))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Obtain(ctx, "invoice:42", time.Minute, lock.WithMetadata("worker 7")); err != nil {
		t.Fatalf("Obtain = %v, want nil", err)
	}
	if n, err := client.Exists(ctx, "invoice:42").Result(); n != 1 {
		t.Fatalf("EXISTS = %d, %v; want 1, nil", n, err)
	}
	_ = srv.Addr() // for code that dials the server itself
}

// Outside a test, in an Example or a demo: start a server, and close it.
// Keys expire in real time, as on a real server.
func ExampleStartServer() {
	srv, err := locktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close() // closes the clients it handed out too

	locker, err := single.New(goredis.New(srv.GoRedisClient()))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "report:daily", 100*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("obtained", lk)

	time.Sleep(200 * time.Millisecond)
	_, err = lk.TTL(ctx)
	fmt.Println("expired:", errors.Is(err, lock.ErrExpired))
	// Output:
	// obtained lock "report:daily"
	// expired: true
}

// A redigo pool of the server, with the address for the driver.
func ExampleServer_RedigoPool() {
	srv, err := locktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	locker, err := single.New(redigo.New(srv.RedigoPool(), redigo.WithAddr(srv.Addr())))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "report:daily", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("obtained", lk)
	fmt.Println(lk.Release(ctx))
	// Output:
	// obtained lock "report:daily"
	// <nil>
}
