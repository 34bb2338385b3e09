package single_test

import (
	"os"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

func TestMain(m *testing.M) {
	redistest.Parallel(8) // most tests wait on servers and timers
	os.Exit(m.Run())
}
