package single_test

import (
	"testing"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

func newLocker(t testing.TB, c driver.Conn) lock.Locker {
	t.Helper()
	l, err := single.New(c)
	if err != nil {
		t.Fatalf("single.New: %v", err)
	}
	return l
}

// harness runs the suite over conns opened by open.
func harness(open func(t testing.TB) driver.Conn, unreachable func(t testing.TB) driver.Conn) conformance.Harness {
	return conformance.Harness{
		NewLocker:      func(t *testing.T) lock.Locker { return newLocker(t, open(t)) },
		Conns:          func(t *testing.T) []driver.Conn { return []driver.Conn{open(t)} },
		NewUnreachable: func(t *testing.T) lock.Locker { return newLocker(t, unreachable(t)) },
		NewWithNilConn: func() (lock.Locker, error) { return single.New(nil) },
	}
}

func TestConformance(t *testing.T) {
	addr, _ := redistest.Addr(t)
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			conformance.Run(t, harness(
				func(t testing.TB) driver.Conn { return d.Conn(t, addr) },
				func(t testing.TB) driver.Conn { return d.Conn(t, redistest.ClosedAddr(t)) },
			))
		})
	}
	t.Run("goredis-cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3)
		conformance.Run(t, harness(
			func(t testing.TB) driver.Conn { return goredis.New(redistest.GoRedisCluster(t, c.Addrs())) },
			func(t testing.TB) driver.Conn {
				return goredis.New(redistest.GoRedisCluster(t, []string{redistest.ClosedAddr(t)}))
			},
		))
	})
}
