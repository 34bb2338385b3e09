package single_test

import (
	"context"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestScriptSHA1: the SHA-1 each script computed once matches what the
// server reports from SCRIPT LOAD.
func TestScriptSHA1(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	for _, s := range single.Scripts() {
		got, err := srv.Command(context.Background(), "SCRIPT", "LOAD", s.Source())
		if err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
		if got != s.SHA1() {
			t.Errorf("SCRIPT LOAD = %s, want %s (the SHA-1 computed by driver.NewScript)", got, s.SHA1())
		}
	}
}
