package driver_test

import (
	"context"
	"testing"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestScriptSHA1: the SHA-1 that NewScript computes once is the one the
// server reports from SCRIPT LOAD, so that EVALSHA finds a script EVAL ran.
func TestScriptSHA1(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	for _, src := range []string{
		"return 1",
		"return redis.call('GET', KEYS[1])\n-- a comment, and bytes: \x00\xff é",
	} {
		got, err := srv.Command(context.Background(), "SCRIPT", "LOAD", src)
		if err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
		if want := driver.NewScript(src).SHA1(); got != want {
			t.Errorf("SCRIPT LOAD of %q = %s, want %s, the SHA-1 of NewScript", src, got, want)
		}
	}
}
