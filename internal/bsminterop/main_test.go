package bsminterop_test

import (
	"os"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

func TestMain(m *testing.M) {
	redistest.Parallel(8) // as package single's: the tests wait on servers and timers
	os.Exit(m.Run())
}
