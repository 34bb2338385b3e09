package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestLibraryDoesNotImportTheCLIsDependencies: a program that imports only
// the library compiles none of the packages that the CLI alone needs (its
// flag parser, the OpenTelemetry SDK's exporters and what they pull in),
// as go list -deps tells.
func TestLibraryDoesNotImportTheCLIsDependencies(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	lib := []string{
		"github.com/locksmith-go/lock",
		"github.com/locksmith-go/lock/config",
		"github.com/locksmith-go/lock/otel",
		"github.com/locksmith-go/lock/conformance",
		"github.com/locksmith-go/lock/locktest",
		"github.com/locksmith-go/lock/driver/...",
		"github.com/locksmith-go/lock/strategy/...",
	}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, lib...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	cliOnly := []string{
		"github.com/spf13/",
		"go.opentelemetry.io/contrib/",
		"go.opentelemetry.io/otel/exporters/",
		"go.opentelemetry.io/otel/sdk", // the library uses the API; the SDK is the program's choice
		"google.golang.org/grpc",
		"google.golang.org/protobuf",
		"github.com/prometheus/",
		"github.com/locksmith-go/lock/cmd/",
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, p := range cliOnly {
			if strings.HasPrefix(d, p) {
				t.Errorf("the library imports %s: got it in go list -deps, want only the CLI to need it", d)
			}
		}
	}
	// The CLI does need them: the check above would pass vacuously otherwise.
	out, err = exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps .: %v\n%s", err, out)
	}
	for _, p := range []string{"github.com/spf13/cobra", "go.opentelemetry.io/contrib/exporters/autoexport"} {
		if !strings.Contains(string(out), p+"\n") {
			t.Errorf("the CLI's go list -deps: got no %s, want it (is the check above still meaningful?)", p)
		}
	}
}
