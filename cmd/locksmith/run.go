package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/locksmith-go/lock"
)

const runLong = `run obtains the lock NAME, runs CMD while holding it, refreshes the lease
in the background, and releases the lock when CMD exits. CMD is executed
directly, with ARGs; with -c, STRING runs through $SHELL -c (/bin/sh when
$SHELL is unset).

Several NAMEs are one lock of them all: run obtains every one or none,
taking them in sorted order whatever the order given, so that two runs that
name the same locks in other orders cannot block each other (the library's
docs/multi-key.md says what each strategy guarantees; setnx-getset cannot
take several, and refuses them). A waiting run tries them all again at
each retry (every 200ms, or as the retry setting says: it polls, with no
place in the locks' queues), and never holds some while it waits for the
others. The lock is lost
when any one of them is; the messages and events name it by its NAMEs,
sorted.

--permits N makes NAME a counting semaphore of N permits (1 to 1000) rather
than a lock: at most N runs hold it at once, each with a lease of its own,
refreshed and released as a lock's is, so that a run that dies gives its
permit back when its lease ends (as consul lock's semaphores do). Every run
of NAME must give the same N: while the semaphore has holders, a run that
gives another N is refused (64), and so is a run without --permits, or a
--permits on a plain lock's NAME. It takes one NAME, and the single
strategy alone offers it (redlock, setnx-getset and without_scripts=true
refuse it: 64). Waiting, -n, -w and -E work as for a lock: a run waits
while every permit is held.

Waiting: by default run waits for the lock as long as it takes, woken by the
holder's release (a timer tries again every 200ms as a safety net, or as the
configuration's retry setting says). -w DUR gives up after DUR, -n at once;
either way, a lock that another owner held exits with 75, or the -E code.
When Redis does not answer, run exits with 69 instead, within --wait plus
read_timeout (3s by default) plus 1s, and names the lock whose key an
unanswered attempt may leave until its TTL ends. SIGINT, SIGTERM, SIGHUP
or SIGQUIT while waiting gives up (leaving the lock's queue) and exits with
128+N.

The command runs in a process group of its own, with stdin, stdout and
stderr passed through. On Linux it is killed if locksmith dies (SIGKILL as
its parent-death signal); its own children are not. Its environment is
locksmith's, plus:
  LOCKSMITH_LOCK=NAME      the lock's name (of several NAMEs, the first,
                           sorted)
  LOCKSMITH_FENCE=N        the fencing token, where the strategy issues one
                           (single): pass it to the resource the lock
                           protects, so that it can reject a stale holder
                           (of several NAMEs, the first one's)
  LOCKSMITH_LOCKS="A B"    with several NAMEs: all of them, sorted, joined
                           by spaces
  LOCKSMITH_FENCES="A=N B=M"  with several NAMEs: each one's fencing token,
                           for the guard of each resource
  LOCKSMITH_PERMIT=I       with --permits: the permit held, from 0 to N-1,
                           the lowest that was free (LOCKSMITH_FENCE is
                           then that permit's fencing token)
  LOCKSMITH_LEASE_MS=MS    the lease (--ttl), in milliseconds
  LOCKSMITH_HELD=1
It never gets the lock's token.

Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH go
to the command's whole process group. After a terminating one (INT, TERM,
HUP, QUIT), the group gets SIGKILL --kill-grace later if it still runs; a
second SIGINT kills it at once.

When the lock is lost, the command is stopped before the lease could pass to
anyone else, timed against the local validity deadline D (the time the last
successful refresh was sent, plus the TTL, less the strategy's clock-drift
allowance), with a margin M of 100ms:
  - while refreshes fail (Redis unreachable or paused), SIGTERM goes to the
    group at D - kill-grace - M, and SIGKILL at D - M;
  - when a refresh finds the lock expired or taken, SIGTERM goes at once, and
    SIGKILL kill-grace later, or at D - M if that comes first.
run then exits with 79, whatever the command's status. So that a healthy
lease never comes near its SIGTERM, --ttl must be at least
2 x refresh + kill-grace + M (with the default refresh, a third of the TTL:
at least 3 x (kill-grace + M)); a shorter one is refused at start. The
default kill-grace is 5s, or a sixth of the TTL when that is less (1.667s
for --ttl 10s), and never more than TTL - 2 x refresh - M.

When the command exits, whatever is left of its process group is killed
(it would otherwise run on without the lock), then the lock is released;
a failed release is reported, and the lease's TTL ends the lock.

Exit codes:
  the command's own status     it ran to the end with the lock held
  128+N                        it was killed by signal N, or run was
                               interrupted by signal N while waiting
  75 (or -E)                   the lock was held by another owner, or
                               every permit was (-n, -w)
  79                           the lock was lost; the command was stopped
  124                          --max-runtime ran out; the command was stopped
  126, 127                     the command is not executable, not found
                               (the lock is released first)
  64                           usage error, such as a --ttl too short, or a
                               NAME held as another shape: a semaphore of
                               another --permits, a plain lock's NAME with
                               --permits, or a semaphore's without
  78                           bad configuration
  69                           Redis unreachable, did not answer, or it
                               refused us
  70                           internal error
A command can exit with one of these codes itself: scripts that must know
read --result-file, a JSON object with the outcome (completed, not_obtained,
interrupted, lost, max_runtime, not_found, not_executable, usage, config,
unavailable or error), the exit code, the command's status or the signal
that killed it, the fence, waited_ms, held_ms, whether the release
succeeded and, on loss, when and why (lost_at, loss_reason, valid_until).
With several NAMEs, "lock" is the first, and "locks" and "fences" give
them all. With --permits, "permits" is N and "permit" the permit held.

-v reports each step on stderr, and --json reports them as JSON lines
(time, event, fields): waiting, queued, woken, not_obtained, obtained,
started, refreshed, refresh_failed, signal (which, why), lost (reason, the
validity deadline), exited, released, release_failed; with several NAMEs,
those that name the lock give "locks" too; with --permits, waiting gives
"permits" and obtained "permit". None holds the token.`

const runExample = `  # a nightly job, at most one at a time across the fleet
  locksmith run nightly-report -- /usr/local/bin/report --since yesterday

  # skip this run if another one holds the lock; exit 0 then
  locksmith run -n -E 0 backup -- ./backup.sh

  # wait up to a minute, through the shell, with a 10s lease
  locksmith run -w 1m --ttl 10s --kill-grace 2s deploy -c 'make deploy && make smoke'

  # for a script that must know what happened
  locksmith run --result-file /tmp/result.json reindex -- ./reindex

  # move stock between two warehouses: both locks, or neither
  locksmith run stock:berlin stock:paris -- ./transfer --from paris --to berlin

  # at most three exports at once against the partner's API, each in its slot
  locksmith run --permits 3 -w 10m partner-api -c './export --slot "$LOCKSMITH_PERMIT"'`

// runFlags are the flags of run.
type runFlags struct {
	noWait       bool
	wait         time.Duration
	conflictCode int
	ttl          time.Duration
	refresh      time.Duration
	killGrace    time.Duration // set by setTTL, unless given (graceSet)
	graceSet     bool
	maxRuntime   time.Duration
	shell        string
	resultFile   string
	permits      int // --permits: a semaphore of this many; 0 for a plain lock
}

func (a *app) runCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:     "run [flags] NAME [NAME...] -- CMD [ARG...] | run [flags] NAME [NAME...] -c STRING",
		Short:   "Run a command while holding a lock",
		Long:    runLong,
		Example: runExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runUnderLock(cmd, &f, args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&f.noWait, "no-wait", "n", false, "fail at once if the lock is held")
	fl.DurationVarP(&f.wait, "wait", "w", 0, "give up waiting for the lock after this long (default: wait as long as it takes)")
	fl.IntVarP(&f.conflictCode, "conflict-exit-code", "E", exitNotObtained, "exit code when the lock is not obtained, 0 to 255")
	fl.DurationVar(&f.ttl, "ttl", 0, "the lease, refreshed in the background (default: the configuration's TTL, 30s unless set)")
	fl.DurationVar(&f.refresh, "refresh", 0, "refresh the lease this often (default: a third of --ttl)")
	fl.DurationVar(&f.killGrace, "kill-grace", 0, "time between SIGTERM and SIGKILL when the command is stopped (default: 5s, or a sixth of --ttl when less, and at most what --ttl leaves)")
	fl.DurationVar(&f.maxRuntime, "max-runtime", 0, "stop the command after this long, and exit with 124 (default: no limit)")
	fl.StringVarP(&f.shell, "command", "c", "", "run STRING through $SHELL -c, instead of CMD [ARG...]")
	fl.StringVar(&f.resultFile, "result-file", "", "write the outcome to this file, as JSON")
	fl.IntVar(&f.permits, "permits", 0, "hold one permit of a semaphore of `N` on NAME: at most N runs at once (default: a plain lock, one run)")
	return cmd
}

// runner is one run of the run subcommand: its settings, and what it
// reports in --result-file.
type runner struct {
	*app
	f       *runFlags
	name    string   // the lock's name: of several, the first
	names   []string // the lock's names, sorted, without duplicates
	argv    []string // the command, with $SHELL -c for -c
	ttl     time.Duration
	refresh time.Duration // --refresh, or a third of ttl
	res     runResult
	events  *events
}

// runUnderLock is the run subcommand.
func (a *app) runUnderLock(cmd *cobra.Command, f *runFlags, args []string) (err error) {
	// Caught first, before connecting, so that a signal while waiting
	// gives up the wait (consul#4439), and none is lost once the command
	// runs.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	r := &runner{app: a, f: f, events: newEvents(a)}
	if len(args) > 0 {
		r.res.Lock = args[0]
	}
	defer func() { err = r.report(err) }()
	if err := r.parse(cmd, args); err != nil {
		return exit(exitUsage, err)
	}
	l, closeLocker, err := a.open(cmd.Context())
	if err != nil {
		return err
	}
	defer closeLocker()
	if err := r.setTTL(l.cfg.TTL); err != nil {
		return exit(exitUsage, err)
	}
	retry, limit := waiting(l.cfg, f.noWait, f.wait)
	lk, err := r.obtain(cmd.Context(), l, sigs, retry, limit)
	if err != nil {
		return err
	}
	return r.hold(lk, sigs)
}

// parse reads NAME and the command from args, and checks the flags that do
// not depend on the configuration.
func (r *runner) parse(cmd *cobra.Command, args []string) error {
	f, dash := r.f, cmd.ArgsLenAtDash()
	names, argv := args, []string(nil)
	if dash >= 0 {
		names, argv = args[:dash], args[dash:]
	}
	switch {
	case len(names) == 0:
		return errors.New("run: missing the lock's NAME\nUsage: locksmith run [flags] NAME -- CMD [ARG...]")
	case f.shell != "" && dash >= 0:
		return errors.New("run: give either -c STRING or -- CMD [ARG...], not both")
	case f.shell == "" && len(argv) == 0:
		return fmt.Errorf("run: missing the command after %q (put it after --): locksmith run [flags] NAME... -- CMD [ARG...], or NAME... -c STRING", names)
	case f.noWait && cmd.Flags().Changed("wait"):
		return errors.New("run: give either -n or -w, not both")
	case f.conflictCode < 0 || f.conflictCode > 255:
		return fmt.Errorf("run: --conflict-exit-code %d: must be 0 to 255", f.conflictCode)
	case f.killGrace < 0:
		return fmt.Errorf("run: --kill-grace %v: must not be negative", f.killGrace)
	case cmd.Flags().Changed("permits") && (f.permits < 1 || f.permits > lock.MaxPermits):
		return fmt.Errorf("run: --permits %d: must be 1 to %d", f.permits, lock.MaxPermits)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"wait", f.wait}, {"ttl", f.ttl}, {"refresh", f.refresh}, {"max-runtime", f.maxRuntime}} {
		if cmd.Flags().Changed(d.flag) && d.v <= 0 {
			return fmt.Errorf("run: --%s %v: must be positive", d.flag, d.v)
		}
	}
	f.graceSet = cmd.Flags().Changed("kill-grace")
	var err error
	if r.names, err = lockNames("run", names); err != nil {
		return err
	}
	if f.permits > 0 && len(r.names) > 1 {
		return fmt.Errorf("run: --permits takes one NAME, got %q: a semaphore is on one name, and several NAMEs are one lock of them all", r.names)
	}
	r.name, r.argv = r.names[0], argv
	r.res.Lock, r.res.Locks = r.name, several(r.names)
	r.events.locks = several(r.names)
	if f.shell != "" {
		r.argv = []string{cmp.Or(os.Getenv("SHELL"), "/bin/sh"), "-c", f.shell}
	}
	return nil
}

// killMargin is by how much SIGKILL comes before the lock's validity
// deadline, which already allows for clock drift (1% of the TTL for
// single): it covers the lateness of a timer on a loaded host, and the
// kill's own delivery.
const killMargin = 100 * time.Millisecond

// setTTL sets the lease (--ttl, or def from the configuration), the refresh
// interval, and refuses a lease too short for --kill-grace (see fitGrace).
func (r *runner) setTTL(def time.Duration) error {
	f := r.f
	r.ttl = cmp.Or(f.ttl, def)
	refresh := cmp.Or(f.refresh, r.ttl/3)
	if refresh >= r.ttl {
		return fmt.Errorf("run: --refresh %v must be shorter than --ttl %v", refresh, r.ttl)
	}
	if err := fitGrace("run", r.ttl, refresh, f.refresh != 0, &f.killGrace, f.graceSet); err != nil {
		return err
	}
	r.refresh = refresh
	return nil
}

// fitGrace sets *grace, the kill grace of subcommand sub (run, elect), to
// its default for a lease of ttl refreshed every refresh, unless it was
// given (graceSet), and refuses a lease too short for it: a healthy lease
// must leave, after its scheduled refresh, another refresh interval to
// refresh it again before SIGTERM would be due. refreshSet says that
// --refresh was given, which only run has (elect refreshes every third of
// the lease).
func fitGrace(sub string, ttl, refresh time.Duration, refreshSet bool, grace *time.Duration, graceSet bool) error {
	if !graceSet {
		*grace = defaultKillGrace(ttl, refresh)
	}
	need := 2*refresh + *grace + killMargin
	if ttl >= need {
		return nil
	}
	least := need
	if !refreshSet {
		least = 3 * (*grace + killMargin) // refresh is then a third of it
	}
	what, shorter := fmt.Sprintf(" for --kill-grace %v", *grace), "--kill-grace or --refresh"
	if !graceSet { // the default grace is what the lease leaves: no grace fits
		what, shorter = "", "--refresh"
	}
	if sub != "run" { // no --refresh: a third of the lease
		shorter = strings.TrimSuffix(shorter, " or --refresh")
		if !graceSet {
			shorter = ""
		}
	}
	if shorter != "" {
		shorter = ", or a shorter " + shorter
	}
	return fmt.Errorf("%s: --ttl %v is too short%s: on loss, SIGTERM comes at the lease's "+
		"validity deadline less the grace and %v, and a healthy lease must leave two refresh intervals "+
		"(2 x %v) before it; give a --ttl of at least %v%s",
		sub, ttl, what, killMargin, refresh.Round(time.Millisecond), least, shorter)
}

// defaultKillGrace is --kill-grace's default for a lease of ttl refreshed
// every refresh: 5s, a sixth of the default lease of 30s, or a sixth of
// ttl when that is less, so that a shorter lease keeps the default's
// proportions (SIGTERM at a sixth of the lease before its deadline, while
// refreshes fail), and never more than the lease leaves after two refresh
// intervals and the margin (see setTTL), nor less than 0.
func defaultKillGrace(ttl, refresh time.Duration) time.Duration {
	return max(0, min(5*time.Second, ttl/6, ttl-2*refresh-killMargin))
}

// signalError is why run gave up: it was sent a signal.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "interrupted by " + signalName(e.sig) }

// obtain obtains the lock, waiting as the flags say, for limit at most
// (0: no limit); a terminating signal gives up the wait.
func (r *runner) obtain(ctx context.Context, l opened, sigs <-chan os.Signal, retry []lock.Option, limit time.Duration) (*lock.Lock, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if limit > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, limit)
		defer stop()
	}
	opts := append([]lock.Option{lock.WithHooks(r.events.hooks()), lock.WithRefreshFraction(float64(r.refresh) / float64(r.ttl))}, retry...)
	var n any // the semaphore's limit: nil for a plain lock, left out of the event
	if r.f.permits > 0 {
		opts = append(opts, lock.WithPermits(r.f.permits))
		r.res.Permits, n = r.f.permits, r.f.permits
	}
	type result struct {
		lk  *lock.Lock
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		lk, err := l.obtain(ctx, r.names, r.ttl, me("run", r.argv[0]), opts...)
		done <- result{lk, err}
	}()
	r.events.emit("waiting", "lock", r.name, "locks", r.events.locks, "permits", n, "ttl_ms", r.ttl.Milliseconds())
	for {
		select {
		case sig := <-sigs:
			if terminating(sig) {
				r.events.emit("signal", "signal", signalName(sig), "while", "waiting")
				cancel(&signalError{sig})
			}
		case o := <-done:
			r.res.WaitedMS = time.Since(start).Milliseconds()
			var se *signalError
			if errors.As(context.Cause(ctx), &se) {
				if o.err == nil { // obtained as the signal came
					ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
					_ = o.lk.Release(ctx)
					cancel()
				}
				r.events.left()
				return nil, exit(exitSignal+signum(se.sig), se)
			}
			switch {
			case errors.Is(o.err, lock.ErrNotObtained):
				r.events.left()
				r.res.Outcome = "not_obtained"
				r.events.emit("not_obtained", "lock", r.name, "locks", r.events.locks, "waited_ms", r.res.WaitedMS)
				return nil, exit(r.f.conflictCode, r.notObtained(o.err))
			case errors.Is(o.err, lock.ErrMismatch):
				return nil, exit(exitUsage, fmt.Errorf("%s not obtained: %w; give its holders' --permits (none for a plain lock), "+
					"or another NAME", r.label(), o.err))
			case o.err != nil:
				return nil, fmt.Errorf("obtaining %s: %w", r.label(), o.err)
			}
			return o.lk, nil
		}
	}
}

// label names the lock in run's messages: as label does, or, with
// --permits, as the semaphore it is.
func (r *runner) label() string {
	switch {
	case r.f.permits == 1:
		return fmt.Sprintf("semaphore %q (1 permit)", r.name)
	case r.f.permits > 1:
		return fmt.Sprintf("semaphore %q (%d permits)", r.name, r.f.permits)
	}
	return label(r.names)
}

// notObtained says why the lock was not obtained, in run's words and
// acquire's alike (see notObtained).
func (r *runner) notObtained(err error) error {
	return notObtained(r.label(), r.names, r.f.permits > 0, r.f.noWait, r.f.wait, err)
}

// hold runs the command under the held lock lk, and releases it.
func (r *runner) hold(lk *lock.Lock, sigs <-chan os.Signal) error {
	obtained := time.Now()
	var fence, permit any // nil when unfenced, or not a semaphore: left out of the event
	if f, ok := lk.Fence(); ok {
		r.res.Fence, fence = &f, f
	}
	if p, ok := lk.Permit(); ok {
		r.res.Permit, permit = &p, p
	}
	r.res.Fences = fencesOf(lk)
	r.events.emit("obtained", "lock", r.name, "locks", r.events.locks, "permit", permit, "fence", fence, "fences", r.res.Fences,
		"waited_ms", r.res.WaitedMS, "valid_until", wall(lk.ValidUntil()))
	if err := lk.StartRefresh(context.Background()); err != nil {
		return exit(exitLost, fmt.Errorf("%s lost before the command started: %w", r.label(), err))
	}
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.stdin, r.stdout, r.stderr
	cmd.Env = r.environ()
	c, err := startChild(cmd)
	if err != nil {
		code, outcome := exitCannotExec, "not_executable"
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code, outcome = exitNotFound, "not_found"
		}
		r.release(lk, obtained)
		r.res.Outcome = outcome
		return exit(code, fmt.Errorf("cannot run %s: %w", r.argv[0], err))
	}
	r.events.emit("started", "pid", c.pid)
	st, err := r.supervise(lk, c, sigs)
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		r.warnf("waiting for the command: %v", err)
	}
	r.release(lk, obtained)
	return r.exitStatus(st)
}

// commandVars are the variables that run and elect set for their command,
// which an outer run or elect may have set for locksmith.
var commandVars = map[string]bool{"LOCKSMITH_LOCK": true, "LOCKSMITH_FENCE": true, "LOCKSMITH_LEASE_MS": true, "LOCKSMITH_HELD": true,
	"LOCKSMITH_LOCKS": true, "LOCKSMITH_FENCES": true, "LOCKSMITH_PERMIT": true, "LOCKSMITH_TERM": true, "LOCKSMITH_LEADER": true}

// commandEnviron is locksmith's environment without commandVars, plus set.
func commandEnviron(set ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !commandVars[name] {
			env = append(env, kv)
		}
	}
	return append(env, set...)
}

// environ is the command's environment: locksmith's, with the lock's
// variables set (and those an outer run or elect set, removed).
func (r *runner) environ() []string {
	env := commandEnviron("LOCKSMITH_LOCK="+r.name, "LOCKSMITH_LEASE_MS="+strconv.FormatInt(r.ttl.Milliseconds(), 10), "LOCKSMITH_HELD=1")
	if r.res.Fence != nil {
		env = append(env, "LOCKSMITH_FENCE="+strconv.FormatInt(*r.res.Fence, 10))
	}
	if r.res.Permit != nil {
		env = append(env, "LOCKSMITH_PERMIT="+strconv.Itoa(*r.res.Permit))
	}
	if r.res.Locks != nil {
		env = append(env, "LOCKSMITH_LOCKS="+strings.Join(r.res.Locks, " "))
	}
	if r.res.Fences != nil {
		env = append(env, "LOCKSMITH_FENCES="+r.res.Fences.String())
	}
	return env
}

// releaseTimeout bounds the release: past it, the lease's TTL ends the lock.
const releaseTimeout = 3 * time.Second

// release releases the lock, warning when that fails.
func (r *runner) release(lk *lock.Lock, obtained time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := lk.Release(ctx)
	r.res.HeldMS = time.Since(obtained).Milliseconds()
	if err != nil {
		if r.res.Outcome != "lost" {
			r.warnf("releasing %s: %v (its lease ends it)", r.label(), err)
		}
		r.events.emit("release_failed", "lock", r.name, "locks", r.events.locks, "error", err.Error())
		return
	}
	r.res.Released = true
	r.events.emit("released", "lock", r.name, "locks", r.events.locks, "held_ms", r.res.HeldMS)
}

// exitStatus returns run's exit error, from the outcome and the command's
// state st.
func (r *runner) exitStatus(st *os.ProcessState) error {
	code := exitInternal
	if st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.res.Signal = signalName(ws.Signal())
			code = exitSignal + int(ws.Signal())
		} else {
			status := st.ExitCode()
			r.res.ChildStatus = &status
			code = status
		}
	}
	switch r.res.Outcome {
	case "lost":
		return exit(exitLost, fmt.Errorf("%s lost (%s): the command was stopped", r.label(), r.res.LossReason))
	case "max_runtime":
		return exit(exitMaxRuntime, fmt.Errorf("--max-runtime %v ran out: the command was stopped", r.f.maxRuntime))
	}
	r.res.Outcome = "completed"
	if code == 0 {
		return nil
	}
	return exit(code, nil)
}

// signalName names a signal as kill -l does, with its SIG prefix.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := signalNames[s]; name != "" {
			return name
		}
		return "signal " + strconv.Itoa(int(s))
	}
	return sig.String()
}

// wall drops t's monotonic clock reading, for output.
func wall(t time.Time) time.Time { return t.Round(0).UTC() }
