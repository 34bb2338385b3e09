package setnxgetset_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
)

// A fleet whose Java services lock with jedis-lock writes millisecond
// timestamps: lock the same keys, in the same format, from Go.
func ExampleNew() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()

	locker, err := setnxgetset.New(goredis.New(client),
		setnxgetset.WithFormat(setnxgetset.Milliseconds),
		setnxgetset.WithSafetyTTL(time.Minute),   // a crashed holder leaves no immortal key
		setnxgetset.WithClockSkew(2*time.Second), // the fleet's clocks agree to 2s
	)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "lock.invoices", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	// The value is what legacy clients expect: an expiry timestamp.
	value, _ := client.Get(ctx, "lock.invoices").Result()
	ms, _ := strconv.ParseInt(value, 10, 64)
	fmt.Println("expires in about 30s:", time.Until(time.UnixMilli(ms)).Round(time.Second) == 30*time.Second)

	// A value that is not a timestamp belongs to a non-legacy owner.
	client.Set(ctx, "lock.reports", "BEzb3iRQgpoTxxpuOWiT1w", time.Minute)
	_, err = locker.Obtain(ctx, "lock.reports", 30*time.Second)
	fmt.Println(errors.Is(err, strategy.ErrNotObtained), errors.Is(err, setnxgetset.ErrNotTimestamp))
	// Output:
	// expires in about 30s: true
	// true true
}

// Inspect decodes a legacy lock's timestamp, and says whether an Obtain
// would take the lock over now.
func ExampleStrategy_Inspect() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker, err := setnxgetset.New(goredis.New(client), setnxgetset.WithFormat(setnxgetset.Milliseconds))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "lock.invoices", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	st, err := locker.Inspect(ctx, "lock.invoices")
	if err != nil {
		log.Fatal(err)
	}
	ms, _ := strconv.ParseInt(lk.Token(), 10, 64) // the value: the expiry timestamp
	fmt.Println(st.Verdict, st.Takeover)
	fmt.Println("Expiry is the timestamp:", st.Expiry.Equal(time.UnixMilli(ms)))
	fmt.Println("the holder's fingerprint:", st.Fingerprint == strategy.Fingerprint(lk.Token()))
	fmt.Println("no expiry on the key, as legacy clients write it:", st.TTL < 0)

	// A crashed legacy holder's lock, expired an hour ago.
	client.Set(ctx, "lock.reports", time.Now().Add(-time.Hour).UnixMilli(), 0)
	st, err = locker.Inspect(ctx, "lock.reports")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Verdict, st.Takeover)
	// Output:
	// held false
	// Expiry is the timestamp: true
	// the holder's fingerprint: true
	// no expiry on the key, as legacy clients write it: true
	// expired: Obtain takes it over true
}
