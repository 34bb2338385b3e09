package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/locktest"
)

// A fleet migrating off legacy locks changes one setting, the strategy, and
// no code: lockInvoices is the application's code, which takes the Locker
// and the TTL from the configuration. The legacy settings stay in the
// configuration, unused by single, so that a rollback flips the strategy
// back.
func Example() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	for _, url := range []string{
		"setnx-getset://" + srv.Addr() + "?ttl=30s&format=ms&safety_ttl=1m", // phase 1: what legacy clients read
		"single://" + srv.Addr() + "?ttl=30s&format=ms&safety_ttl=1m",       // phase 2: the strategy flipped
	} {
		cfg, err := config.ParseURL(url) // or config.FromEnv, or JSON
		if err != nil {
			log.Fatal(err)
		}
		locker, err := config.Open(cfg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s\n", cfg.Strategy, lockInvoices(locker, cfg.Defaults().TTL))
		locker.Close()
	}
	// Output:
	// setnx-getset: held "invoices" for 30s, under a timestamp
	// single: held "invoices" for 30s, under a random token
}

func lockInvoices(locker *lock.Locker, ttl time.Duration) string {
	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "invoices", ttl)
	if err != nil {
		return err.Error()
	}
	defer lk.Release(ctx)
	value := "a random token"
	if _, err := strconv.ParseInt(lk.Token(), 10, 64); err == nil {
		value = "a timestamp"
	}
	return fmt.Sprintf("held %q for %v, under %s", lk.Key(), ttl, value)
}

func ExampleParseURL() {
	cfg, err := config.ParseURL("redlock://alice:s3cret@10.0.0.1:6379,10.0.0.2,10.0.0.3/0?driver=redigo&ttl=10s&retry=exponential:10ms,200ms")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Strategy, cfg.Driver, cfg.Addrs, cfg.TTL)
	fmt.Println(cfg) // the password never prints

	_, err = config.ParseURL("redlock://10.0.0.1,10.0.0.2,10.0.0.3?quorum=1")
	fmt.Println(err)
	// Output:
	// redlock redigo [10.0.0.1:6379 10.0.0.2:6379 10.0.0.3:6379] 10s
	// redlock://alice:xxxxx@10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379?driver=redigo&ttl=10s&retry=exponential:10ms,200ms
	// lock: invalid quorum: must be a majority of the 3 nodes, from 2 to 3, got 1
}

func ExampleFromEnv() {
	// As a deployment sets them, with the password from a secret store.
	os.Setenv("APP_LOCK_URL", "setnx-getset://10.0.0.1:6379?format=ms")
	os.Setenv("APP_LOCK_SAFETY_TTL", "1m")
	os.Setenv("APP_LOCK_PASSWORD", "s3cret")

	cfg, err := config.FromEnv("APP_LOCK_")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg)
	// Output: setnx-getset://:xxxxx@10.0.0.1:6379?format=ms&safety_ttl=1m0s
}

func ExampleConfig_UnmarshalJSON() {
	var cfg config.Config
	err := json.Unmarshal([]byte(`{
		"strategy": "redlock",
		"addrs": ["10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"],
		"ttl": "10s",
		"drift_factor": 0.02,
		"otel": true
	}`), &cfg)
	fmt.Println(cfg, err)

	err = json.Unmarshal([]byte(`{"strategy": "single", "addrs": ["10.0.0.1:6379"], "ttl": 30}`), &cfg)
	fmt.Println(err)
	// Output:
	// redlock://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379?ttl=10s&otel=true&drift_factor=0.02 <nil>
	// lock: invalid ttl: want a JSON string (a duration such as "30s" is a string)
}

// The Elector's lease and identity are settings of the configuration, as
// the strategy is: NewElector builds the Elector over the Locker that Open
// built from it. A strategy that numbers no terms is refused.
func ExampleNewElector() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	cfg, err := config.ParseURL("single://" + srv.Addr() + "?lease=10s&stop_grace=2s&identity=web-3")
	if err != nil {
		log.Fatal(err)
	}
	locker, err := config.Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	e, err := config.NewElector(locker, cfg, "{billing}:leader")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = e.Run(ctx, func(ctx context.Context, t *elect.Term) error {
		fmt.Printf("%s leads, with a lease of %v and a stop grace of %v\n", t.Identity(), e.Lease(), e.StopGrace())
		cancel() // a real leader works until ctx ends
		return nil
	})
	fmt.Println(err)

	cfg.Strategy = "redlock"
	redlocker, err := config.Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer redlocker.Close()
	_, err = config.NewElector(redlocker, cfg, "{billing}:leader")
	fmt.Println(err)
	// Output:
	// web-3 leads, with a lease of 10s and a stop grace of 2s
	// context canceled
	// lock: invalid locker: its strategy issues no fencing tokens, which number the terms: use the single strategy
}
