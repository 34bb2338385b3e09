package conformance_test

import (
	"testing"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// This file compiles and runs the snippet for third parties of
// docs/extending.md ("Testing it with conformance"), as it is, over
// stand-ins for the names it leaves to the reader: single and go-redis play
// the third party's strategy and driver. Keep the function below identical
// to the guide's.

// myredis stands in for a third party's driver package.
var myredis = struct{ New func(driver.Conn) driver.Conn }{
	New: func(c driver.Conn) driver.Conn { return c },
}

// mystrategy stands in for a third party's strategy package.
var mystrategy = struct {
	New func(driver.Conn) (*lock.Locker, error)
}{New: func(c driver.Conn) (*lock.Locker, error) { return single.New(c) }}

// startRedis returns the address of a server started for t.
func startRedis(t *testing.T) string {
	addr, _ := redistest.Addr(t)
	return addr
}

// newClient returns a client of addr, closed when t ends.
func newClient(t *testing.T, addr string) driver.Conn {
	return goredis.New(redistest.GoRedis(t, addr, 3))
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string { return redistest.ClosedAddr(t) }

func TestConformance(t *testing.T) {
	addr := startRedis(t) // your own server, started for the test
	newLocker := func(t *testing.T, addr string) *lock.Locker {
		l, err := mystrategy.New(myredis.New(newClient(t, addr)))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	conformance.RunDriver(t, func(t *testing.T) driver.Conn { return myredis.New(newClient(t, addr)) })
	conformance.Run(t, conformance.Harness{
		NewLocker: func(t *testing.T) *lock.Locker { return newLocker(t, addr) },
		// Every server behind the Locker, to plant and inspect keys.
		Conns: func(t *testing.T) []driver.Conn {
			return []driver.Conn{myredis.New(newClient(t, addr))}
		},
		// A Locker whose Redis is down: here, a client of a closed port.
		NewUnreachable: func(t *testing.T) *lock.Locker { return newLocker(t, closedAddr(t)) },
		// What your constructor returns for a nil driver.
		NewWithNilConn: func() (*lock.Locker, error) { return mystrategy.New(nil) },
	})
}
