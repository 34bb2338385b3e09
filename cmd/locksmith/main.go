// Command locksmith runs a command while holding a distributed lock on Redis,
// and lets the people on call inspect and break locks, and check a fleet for
// legacy SETNX clients before a migration.
//
//	locksmith run [flags] NAME -- CMD [ARG...]   run CMD under the lock NAME
//	locksmith run [flags] A B -- CMD [ARG...]    … under one lock of A and B
//	locksmith run --permits N NAME -- CMD        … as one of N at most
//	locksmith elect [flags] NAME -- CMD [ARG...] run CMD while leading NAME
//	locksmith elect NAME | elect -l NAME         hold the leadership; watch it
//	locksmith inspect NAME                       show who holds NAME
//	locksmith break NAME --fingerprint F         delete a stale lock, guarded
//	locksmith check-legacy                       find SETNX/GETSET clients
//	locksmith acquire|refresh|release NAME       plumbing for shell scripts
//	locksmith fence set KEY VALUE                write KEY behind $LOCKSMITH_FENCE
//
// The servers, the strategy and its settings come from one URL, read by the
// library's config package: --url or LOCKSMITH_URL, which the other
// LOCKSMITH_* variables override (LOCKSMITH_PASSWORD, LOCKSMITH_TTL, …).
// OTEL_* variables turn on OpenTelemetry spans and metrics.
//
// It is a module of its own. Install it from a clone, at the repository
// root, with
//
//	go install ./cmd/locksmith
//
// and, once a release of it is tagged, with
//
//	go install github.com/locksmith-go/lock/cmd/locksmith@latest
package main

import (
	"context"
	"fmt"
	"os"

	goredis "github.com/redis/go-redis/v9"

	// Every driver and the instrumentation, for any configuration.
	_ "github.com/locksmith-go/lock/config/otelconfig"
	_ "github.com/locksmith-go/lock/config/redigoconfig"
	_ "github.com/locksmith-go/lock/config/rueidisconfig"
)

func main() {
	// locksmith reports errors itself, once: go-redis would print its own
	// lines too, such as every failed dial.
	goredis.SetLogger(quiet{})
	os.Exit(run(context.Background(), os.Args[1:]))
}

// quiet is a go-redis logger that prints nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == watchCommand { // elect's watchdog, hidden: see watch.go
		return watchMain(args[1:])
	}
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	err := a.execute(ctx, args)
	defer a.flushNotes()
	if err == nil {
		return 0
	}
	code := codeOf(err)
	if msg := err.Error(); msg != "" && !silent(err) {
		fmt.Fprintf(os.Stderr, "locksmith: %s\n", msg)
	}
	return code
}
