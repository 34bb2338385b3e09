package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// TestOTelFromEnvironment: the OTEL_* variables turn on the library's spans
// and metrics, through the SDK's own conventions (here the console
// exporters, which write to stdout), and neither holds the token.
func TestOTelFromEnvironment(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	env, srvs := servers(t, "single", 1)
	file := filepath.Join(t.TempDir(), "handle")
	otel := []string{env, "OTEL_TRACES_EXPORTER=console", "OTEL_METRICS_EXPORTER=console", "OTEL_SERVICE_NAME=cron-billing"}

	t.Run("acquire records lock.obtain and the metrics", func(t *testing.T) {
		r := locksmith(t, otel, "acquire", "billing", "--handle-file", file)
		if r.code != 0 {
			t.Fatalf("acquire: got %s\nwant exit 0", r)
		}
		for _, want := range []string{`"Name":"lock.obtain"`, `"Value":"cron-billing"`, `"Name":"locksmith.lock.`} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("acquire's stdout: got no %s in\n%s", want, r.stdout)
			}
		}
		token, _ := strategy.SplitValue(get(t, srvs[0], "billing"))
		noSecret(t, token, r)
	})

	t.Run("inspect records lock.inspect", func(t *testing.T) {
		r := locksmith(t, otel, "inspect", "billing")
		if r.code != 0 || !strings.Contains(r.stdout, `"Name":"lock.inspect"`) {
			t.Errorf("inspect: got %s\nwant exit 0 and a lock.inspect span on stdout", r)
		}
	})

	t.Run("without OTEL_* variables, nothing is recorded", func(t *testing.T) {
		r := locksmith(t, []string{env}, "inspect", "billing")
		if r.code != 0 || strings.Contains(r.stdout, "lock.inspect") {
			t.Errorf("inspect: got %s\nwant exit 0 and no span", r)
		}
	})

	t.Run("OTEL_SDK_DISABLED turns it off", func(t *testing.T) {
		r := locksmith(t, append(otel, "OTEL_SDK_DISABLED=true"), "inspect", "billing")
		if r.code != 0 || strings.Contains(r.stdout, "lock.inspect") {
			t.Errorf("inspect: got %s\nwant exit 0 and no span", r)
		}
	})
}
