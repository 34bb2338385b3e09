package single_test

import (
	"testing"

	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestWithoutScriptsConformance: the whole suite passes over every driver
// without scripts: on Redis 7.0 through transactions, on Valkey 8.1 with
// SET IFEQ (LOCKSMITH_REDIS_SERVER), on the embedded server with DELEX.
func TestWithoutScriptsConformance(t *testing.T) {
	addr, real := redistest.Addr(t)
	matrix.Run(t, matrix.SingleWithoutScripts(addr), matrix.AtOnce(real))
}
