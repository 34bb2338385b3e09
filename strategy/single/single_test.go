package single_test

import (
	"testing"

	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/matrix"
	"github.com/locksmith-go/lock/internal/redistest"
)

func TestConformance(t *testing.T) {
	addr, _ := redistest.Addr(t)
	matrix.Run(t, matrix.Single(addr))
	t.Run("goredis-cluster", func(t *testing.T) {
		conformance.Run(t, matrix.SingleCluster(redistest.StartCluster(t, 3).Addrs()).Harness)
	})
}
