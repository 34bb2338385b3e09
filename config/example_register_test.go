package config_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/locktest"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
)

// unit is a format of expiry timestamps in unix nanoseconds or
// microseconds, which a fleet's legacy clients write and setnx-getset has
// no name for.
type unit time.Duration

var units = map[string]unit{"ns": unit(time.Nanosecond), "us": unit(time.Microsecond)}

func (u unit) Encode(now time.Time, ttl time.Duration) string {
	ns := now.Add(ttl).UnixNano()
	return strconv.FormatInt((ns+int64(u)-1)/int64(u), 10) // rounded up: never before now+ttl
}

func (u unit) Decode(s string) (time.Time, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n*int64(u)), err == nil && n > 0
}

// The fleet's own strategy, known by name to every configuration form. It
// has a setting of its own, legacy_unit, and takes those of setnx-getset.
func init() {
	config.RegisterStrategy("setnx-getset-fine", config.Strategy{
		Params: []string{"legacy_unit"}, // its own settings, in Config.Params
		Check: func(c config.Config) error {
			if _, ok := units[c.Params["legacy_unit"]]; !ok {
				return &lock.ArgumentError{Name: "legacy_unit", Reason: "want ns or us"}
			}
			return nil
		},
		// conns holds a client of the configured driver, which Close closes.
		New: func(c config.Config, conns []driver.Conn) (*lock.Locker, error) {
			return setnxgetset.New(conns[0], setnxgetset.WithFormat(units[c.Params["legacy_unit"]]),
				setnxgetset.WithSafetyTTL(c.SafetyTTL), setnxgetset.WithClockSkew(c.ClockSkew))
		},
	})
}

func ExampleRegisterStrategy() {
	srv, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	cfg, err := config.ParseURL("setnx-getset-fine://" + srv.Addr() + "?legacy_unit=us&safety_ttl=1m&clock_skew=2s")
	if err != nil {
		log.Fatal(err)
	}
	locker, err := config.Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "reports", 0) // the configured TTL
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)
	us, _ := strconv.ParseInt(lk.Token(), 10, 64)
	fmt.Println("expires in about 30s:", time.Until(time.UnixMicro(us)).Round(time.Second) == 30*time.Second)

	_, err = config.ParseURL("setnx-getset-fine://" + srv.Addr() + "?legacy_unit=ms")
	fmt.Println(err)
	// Output:
	// expires in about 30s: true
	// lock: invalid legacy_unit: want ns or us
}
