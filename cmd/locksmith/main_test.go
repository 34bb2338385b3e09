package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// bin is the locksmith binary that the tests drive, as a user would: built
// once by TestMain, with the race detector when the tests have it.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "locksmith-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bin = filepath.Join(dir, "locksmith")
	build := []string{"build", "-o", bin}
	if raceEnabled {
		build = append(build, "-race")
	}
	if out, err := exec.Command("go", append(build, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building locksmith: %v\n%s", err, out)
		os.Exit(2)
	}
	redistest.Parallel(8) // most tests wait on the binary, servers and timers
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// hang bounds every locksmith the tests run: a hang detector, not a timing
// assertion.
const hang = 2 * time.Minute

// result is what a finished locksmith did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// environ returns the test process's environment without the variables
// that configure locksmith or OpenTelemetry, plus env.
func environ(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, envPrefix) || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		out = append(out, kv)
	}
	// The race detector's runtime sleeps a second at exit by default.
	return append(append(out, "GORACE=atexit_sleep_ms=0"), env...)
}

// command returns an unstarted locksmith with args and env (added to a clean
// environment), whose output the returned buffers collect.
func command(t *testing.T, env []string, args ...string) (cmd *exec.Cmd, stdout, stderr *bytes.Buffer) {
	t.Helper()
	cmd = exec.Command(bin, args...)
	cmd.Env = environ(env...)
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A process that outlives locksmith and keeps its output open (a
	// grandchild that escaped) must not hang Wait.
	cmd.WaitDelay = 10 * time.Second
	return cmd, stdout, stderr
}

// locksmith runs locksmith to completion and returns what it did.
func locksmith(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd, stdout, stderr := command(t, env, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting locksmith: %v", err)
	}
	return wait(t, cmd, stdout, stderr)
}

// wait waits for a started locksmith, killing it (and failing t) if it hangs.
func wait(t *testing.T, cmd *exec.Cmd, stdout, stderr *bytes.Buffer) result {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(hang):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("locksmith %s hung for %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args[1:], " "), hang, stdout, stderr)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	default:
		t.Fatalf("waiting for locksmith: %v", err)
	}
	return r
}

// url returns LOCKSMITH_URL for strategy over a server of its own: a real
// redis-server, or the embedded one where there is none (see redistest.Addr).
func url(t *testing.T, strategy string) string {
	t.Helper()
	addr, _ := redistest.Addr(t)
	return "LOCKSMITH_URL=" + strategy + "://" + addr
}

func TestHelp(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	r := locksmith(t, nil, "--help")
	if r.code != 0 {
		t.Fatalf("locksmith --help: got %s, want exit 0", r)
	}
	for _, sub := range []string{"run", "elect", "inspect", "break", "check-legacy", "acquire", "refresh", "release", "ls", "top", "fence"} {
		if !strings.Contains(r.stdout, sub) {
			t.Errorf("locksmith --help: got no %q in\n%s", sub, r.stdout)
		}
	}
}

func TestUsageAndConfigErrors(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want int
	}{
		{"unknown command", nil, []string{"frobnicate"}, exitUsage},
		{"unknown flag", nil, []string{"inspect", "--frobnicate", "x"}, exitUsage},
		{"no configuration", nil, []string{"inspect", "x"}, exitConfig},
		{"bad URL", []string{"LOCKSMITH_URL=nosuch://127.0.0.1:1"}, []string{"inspect", "x"}, exitConfig},
		{"bad setting", []string{"LOCKSMITH_URL=single://127.0.0.1:1?ttl=-1s"}, []string{"inspect", "x"}, exitConfig},
		{"bad --url", nil, []string{"--url", "single://127.0.0.1:1?bogus=1", "inspect", "x"}, exitConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := locksmith(t, tc.env, tc.args...)
			if r.code != tc.want {
				t.Errorf("got %s\nwant exit %d", r, tc.want)
			}
		})
	}
}

// ctx returns a context that ends with the test, bounded by hang.
func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	t.Cleanup(cancel)
	return ctx
}
