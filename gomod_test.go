package lock_test

import (
	"os"
	"strings"
	"testing"
)

// TestGoModRequiresNoCLIDependency: the library's go.mod requires none of
// the modules that only the CLI needs, so that they never enter a library
// user's module graph. The CLI is a module of its own, cmd/locksmith; its
// TestLibraryDoesNotImportTheCLIsDependencies checks the imports.
func TestGoModRequiresNoCLIDependency(t *testing.T) {
	cliOnly := []string{
		"github.com/spf13/cobra",
		"github.com/spf13/pflag",
		"go.opentelemetry.io/contrib/exporters/autoexport",
		"google.golang.org/grpc",
		"google.golang.org/protobuf",
		"github.com/prometheus/",
		"go.opentelemetry.io/otel/exporters/",
	}
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(data), "\n") {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "require "))
		if len(fields) == 0 {
			continue
		}
		for _, p := range cliOnly {
			if strings.HasPrefix(fields[0], p) {
				t.Errorf("go.mod:%d: got a requirement of %s, want none: only the CLI (cmd/locksmith/go.mod) needs it", i+1, fields[0])
			}
		}
	}
}
