package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy/redlock"
	"github.com/locksmith-go/lock/strategy/single"
)

// multiLocker names a Locker that BenchmarkMultiKey measures, and builds it.
type multiLocker struct {
	name string
	new  func(tb testing.TB) *lock.Locker
}

// BenchmarkMultiKey measures a lock of several keys, uncontended: one
// ObtainMany of n keys and its Release (one-lock), against n Obtain calls,
// in the keys' order, and n Releases (separate), which take the same keys
// without atomicity. The two take turns within each iteration, in a random
// order, as BenchmarkInterleaved's contenders do, and each reports its time
// per iteration as <way>-ns/op. The keys share a hash tag.
//
//	go test -run '^$' -bench MultiKey -benchtime 300ms
func BenchmarkMultiKey(b *testing.B) {
	addrs := servers(b)
	var lockers []multiLocker
	for _, d := range drivers {
		lockers = append(lockers, multiLocker{d + "/single", func(tb testing.TB) *lock.Locker {
			l, err := single.New(conn(tb, d, addrs[0], nil))
			if err != nil {
				tb.Fatal(err)
			}
			return l
		}})
	}
	lockers = append(lockers, multiLocker{goredisDriver + "/redlock-3", func(tb testing.TB) *lock.Locker {
		conns := make([]driver.Conn, 3)
		for i, a := range addrs[:3] {
			conns[i] = conn(tb, goredisDriver, a, nil)
		}
		l, err := redlock.New(conns, redlock.WithNodeTimeout(500*time.Millisecond))
		if err != nil {
			tb.Fatal(err)
		}
		return l
	}})
	ctx := context.Background()
	for _, lc := range lockers {
		l := lc.new(b)
		for _, n := range []int{2, 10} {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("{multi:%s}:%02d", lc.name, i)
			}
			ways := []struct {
				name  string
				cycle func() error
			}{
				{"one-lock", func() error {
					lk, err := l.ObtainMany(ctx, keys, ttl)
					if err != nil {
						return err
					}
					return lk.Release(ctx)
				}},
				{"separate", func() error {
					held := make([]*lock.Lock, 0, n)
					for _, k := range keys {
						lk, err := l.Obtain(ctx, k, ttl)
						if err != nil {
							return err
						}
						held = append(held, lk)
					}
					for _, lk := range slices.Backward(held) {
						if err := lk.Release(ctx); err != nil {
							return err
						}
					}
					return nil
				}},
			}
			b.Run(fmt.Sprintf("%s/%d-keys", lc.name, n), func(b *testing.B) {
				spent := make([]time.Duration, len(ways))
				iterations := 0
				for b.Loop() {
					for _, k := range rand.Perm(len(ways)) {
						start := time.Now()
						if err := ways[k].cycle(); err != nil {
							b.Fatal(err)
						}
						spent[k] += time.Since(start)
					}
					iterations++
				}
				b.ReportMetric(0, "ns/op") // an iteration runs both ways
				for k, w := range ways {
					b.ReportMetric(float64(spent[k].Nanoseconds())/float64(iterations), w.name+"-ns/op")
				}
			})
		}
	}
}
