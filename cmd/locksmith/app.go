package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
)

// envPrefix names the environment variables that config.FromEnv reads.
const envPrefix = "LOCKSMITH_"

// app is what every subcommand shares: the global flags, the streams, and
// the Locker they open.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	url     string // --url; LOCKSMITH_URL when empty
	json    bool   // --json
	verbose bool   // -v
	quiet   bool   // -q

	started bool                      // a subcommand began: later errors are not usage errors
	signal  atomic.Pointer[os.Signal] // the signal that interrupted a subcommand other than run
	notes   []string                  // warnings for the end of the output, after the error
}

// execute parses args and runs the subcommand they name.
func (a *app) execute(ctx context.Context, args []string) error {
	root := a.command()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := root.ExecuteContext(ctx)
	if sig := a.signal.Load(); sig != nil {
		return exit(exitSignal+signum(*sig), fmt.Errorf("interrupted by %v", *sig))
	}
	if err != nil && !a.started && !errors.As(err, new(*exitError)) {
		// cobra's own errors: an unknown command or flag, a missing argument.
		fmt.Fprintf(a.stderr, "Run 'locksmith --help' for usage.\n")
		return exit(exitUsage, err)
	}
	return err
}

func (a *app) command() *cobra.Command {
	root := &cobra.Command{
		Use:   "locksmith",
		Short: "Run commands under distributed locks on Redis, and inspect them",
		Long: `locksmith runs a command while holding a distributed lock on Redis, or
while leading an election (elect), and lets the people on call inspect and
break locks, and check a fleet for legacy SETNX/GETSET clients before a
migration. fence set writes a key behind a lock's fencing token.

Configuration comes from one URL, read by the library's config package:
--url, or the LOCKSMITH_URL variable, which the other LOCKSMITH_* variables
override (LOCKSMITH_PASSWORD, LOCKSMITH_TTL, LOCKSMITH_DRIVER, ...). The
scheme is the strategy:

  single://127.0.0.1:6379                       SET NX PX, compare-and-delete
  redlock://h1:6379,h2:6379,h3:6379?quorum=2    Redlock over independent masters
  setnx-getset://127.0.0.1:6379?format=ms       the legacy SETNX + GETSET locks
  single://user@host:6379/0?driver=redigo&wait=poll

Keep the password out of the URL and in LOCKSMITH_PASSWORD. Every setting of
the URL is listed in the library's docs/config.md ("Every setting").

OTEL_* variables turn on OpenTelemetry spans and metrics for every lock
operation, with the SDK's own conventions: OTEL_TRACES_EXPORTER and
OTEL_METRICS_EXPORTER (otlp, console or none), OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES.

Exit codes of locksmith's own outcomes (run and elect pass on their
command's status; each subcommand's help has its own table):
  0   success                  1   no (inspect: free; break: not broken;
  64  usage error                      check-legacy: legacy activity found;
  69  Redis unavailable                fence set: a stale token)
  70  internal error           3   check-legacy: inconclusive
  75  lock not obtained, or    79  lock lost (run, refresh, release),
      not elected (elect)              leadership lost (elect)
  78  bad configuration        124 --max-runtime ran out (run)
                               126/127 command not executable / not found
  128+N killed by, or interrupted by, signal N`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			a.started = true
			if cmd.Name() != "run" && cmd.Name() != "elect" { // they forward signals to their command
				cmd.SetContext(a.interruptible(cmd.Context()))
			}
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&a.url, "url", "", "the lock servers and strategy, as a config URL (default $LOCKSMITH_URL)")
	f.BoolVar(&a.json, "json", false, "machine-readable output: JSON on stdout (inspect, break, check-legacy, acquire, ls), JSON lines of events on stderr (run)")
	f.BoolVarP(&a.verbose, "verbose", "v", false, "report each step on stderr")
	f.BoolVarP(&a.quiet, "quiet", "q", false, "report nothing but errors")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exit(exitUsage, err) })
	root.AddCommand(
		a.runCommand(),
		a.electCommand(),
		a.inspectCommand(),
		a.breakCommand(),
		a.checkLegacyCommand(),
		a.acquireCommand(),
		a.refreshCommand(),
		a.releaseCommand(),
		a.lsCommand(),
		a.topCommand(),
		a.fenceCommand(),
	)
	return root
}

// args checks the number of positional arguments, as a usage error.
func args(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return exit(exitUsage, fmt.Errorf("%s: wrong number of arguments\nUsage: %s", cmd.Name(), cmd.UseLine()))
		}
		return nil
	}
}

// closeGrace is how long locksmith waits, as it exits, for the clean-ups
// on their way (Close waits for them): past it, their keys expire with
// their TTL, and locksmith says which. A call that does not wait for a lock
// (-n, inspect, break, refresh, release) is bounded by the read timeout: so
// locksmith returns within it, --wait and this grace, whatever Redis does.
const closeGrace = 250 * time.Millisecond

// interrupts are the signals that end a subcommand, with exit code 128+N.
var interrupts = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// interruptible returns a context that is cancelled by the first of the
// interrupts, which execute then turns into the exit code 128+N: a waiting
// acquire leaves the lock's queue, a check-legacy stops at once.
func (a *app) interruptible(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, interrupts...)
	go func() {
		select {
		case sig := <-sigs:
			a.signal.Store(&sig)
			cancel()
		case <-ctx.Done():
		}
		signal.Stop(sigs)
	}()
	return ctx
}

// signum returns the number of sig, as the shells count it for 128+N.
func signum(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// config reads the configuration: the URL of --url or LOCKSMITH_URL,
// overridden by the other LOCKSMITH_* variables, as config.FromEnv reads
// them. Its errors exit with 78.
func (a *app) config() (config.Config, error) {
	if a.url != "" {
		// FromEnv reads the URL from the environment; lend it --url for the
		// call, so that the one parser reads both forms.
		prev, had := os.LookupEnv(envPrefix + "URL")
		_ = os.Setenv(envPrefix+"URL", a.url)
		defer func() {
			if had {
				_ = os.Setenv(envPrefix+"URL", prev)
			} else {
				_ = os.Unsetenv(envPrefix + "URL")
			}
		}()
	}
	c, err := config.FromEnv(envPrefix)
	configured := slices.ContainsFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envPrefix) })
	switch {
	case err != nil && c.Strategy == "" && len(c.Addrs) == 0 && !configured:
		return c, exit(exitConfig, errors.New("no lock servers configured: pass --url or set LOCKSMITH_URL, such as single://127.0.0.1:6379"))
	case err != nil:
		return c, exit(exitConfig, err)
	}
	return c, nil
}

// opened is what a subcommand opened: the configuration's Locker, whose
// Obtain calls record what they may leave behind, and the configuration.
type opened struct {
	locker   *lock.Locker  // with the hooks of cleanups
	cfg      config.Config // with its defaults (config.Config.Defaults)
	cleanups *cleanups
}

// cleanups records, by key, what a subcommand's Obtain calls may leave
// behind: an attempt that got no answer may have written its key, which
// stays until its TTL unless a clean-up deletes it (strategy.CleanUp), and
// a clean-up may give up, or still be on its way when locksmith exits.
type cleanups struct {
	hooks *lock.Hooks

	mu   sync.Mutex
	keys map[string]*cleanup
}

// cleanup is what cleanups knows of one key.
type cleanup struct {
	names   []string      // a lock of several keys, this one the first; nil for one
	ttl     time.Duration // what it was obtained for
	unsure  bool          // an Obtain got no answer: it may have written the key
	running int           // clean-ups on their way
	failed  bool          // a clean-up gave up
	done    bool          // a clean-up finished
}

func newCleanups() *cleanups {
	c := &cleanups{keys: map[string]*cleanup{}}
	c.hooks = &lock.Hooks{Obtain: c.obtain, Op: c.op}
	return c
}

// key returns the record of key; c.mu must be held.
func (c *cleanups) key(key string) *cleanup {
	k := c.keys[key]
	if k == nil {
		k = &cleanup{}
		c.keys[key] = k
	}
	return k
}

// obtain is the Obtain hook: it records an Obtain that got no answer.
func (c *cleanups) obtain(ctx context.Context, e lock.Event, next func(context.Context) (*lock.Lock, error)) (*lock.Lock, error) {
	lk, err := next(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.key(e.Key)
	k.ttl = e.TTL
	k.unsure = k.unsure || errors.Is(err, lock.ErrNoAnswer)
	return lk, err
}

// op is the Op hook: it follows the clean-ups (e.Op "cleanup").
func (c *cleanups) op(ctx context.Context, e lock.Event, next func(context.Context) error) error {
	if e.Op != "cleanup" {
		return next(ctx)
	}
	c.mu.Lock()
	c.key(e.Key).running++
	c.mu.Unlock()
	err := next(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.key(e.Key)
	k.running--
	k.failed = k.failed || err != nil
	k.done = k.done || err == nil
	return err
}

// unfinished returns the notes of the locks whose keys may stay until
// their TTL ends, sorted by their first key.
func (c *cleanups) unfinished() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var notes []string
	for _, key := range slices.Sorted(maps.Keys(c.keys)) {
		k := c.keys[key]
		if k.running == 0 && !k.failed && (!k.unsure || k.done) {
			continue
		}
		names, what, ttl := []string{key}, "its key may stay until its TTL", ""
		if k.names != nil {
			names, what = k.names, "its keys may stay until their TTL"
		}
		if k.ttl != 0 {
			ttl = " (" + k.ttl.String() + ")"
		}
		notes = append(notes, fmt.Sprintf("%s: Redis did not answer, and %s%s ends", label(names), what, ttl))
	}
	return notes
}

// open opens the Locker of the configuration, with OpenTelemetry when the
// OTEL_* variables ask for it. done closes it (waiting closeGrace at most),
// notes the keys whose clean-ups did not finish, and flushes the telemetry.
func (a *app) open(ctx context.Context) (l opened, done func(), err error) {
	c, err := a.config()
	if err != nil {
		return opened{}, nil, err
	}
	shutdown, err := startOTel(ctx)
	if err != nil {
		return opened{}, nil, exit(exitConfig, fmt.Errorf("OpenTelemetry: %w", err))
	}
	if shutdown != nil {
		c.OTel = true
	}
	cl, err := config.Open(c)
	if err != nil {
		if shutdown != nil {
			shutdown()
		}
		return opened{}, nil, exit(exitConfig, err)
	}
	cs := newCleanups()
	l = opened{cl.With(lock.WithHooks(cs.hooks)), c.Defaults(), cs}
	return l, func() {
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			_ = l.locker.Close()
		}()
		select {
		case <-closed:
		case <-time.After(closeGrace):
		}
		a.notes = append(a.notes, l.cleanups.unfinished()...)
		if shutdown != nil {
			shutdown()
		}
	}, nil
}

// openCall opens the Locker for one call of inspect, break, refresh or
// release, with a context bounded by the configured read timeout (see
// closeGrace); done closes both.
func (a *app) openCall(ctx context.Context) (l opened, call context.Context, done func(), err error) {
	l, closeLocker, err := a.open(ctx)
	if err != nil {
		return opened{}, ctx, nil, err
	}
	call, cancel := context.WithTimeout(ctx, l.cfg.ReadTimeout)
	return l, call, func() { cancel(); closeLocker() }, nil
}

// flushNotes writes the notes on stderr, unless -q.
func (a *app) flushNotes() {
	for _, n := range a.notes {
		a.warnf("%s", n)
	}
	a.notes = nil
}

// logf reports a step on stderr with -v.
func (a *app) logf(format string, args ...any) {
	if a.verbose {
		a.warnf(format, args...)
	}
}

// warnf reports something the user should know on stderr, unless -q.
func (a *app) warnf(format string, args ...any) {
	if !a.quiet {
		fmt.Fprintf(a.stderr, "locksmith: "+format+"\n", args...)
	}
}
