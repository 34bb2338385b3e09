package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/elect"
)

const electLong = `elect campaigns for the leadership of NAME, the election's key, with the
library's elect package, and runs CMD while it leads: one leader at a time
among every locksmith elect (and every program of the library's elect
package) on NAME, with terms numbered by fencing tokens. Candidates wait in
a queue; a resignation wakes the next at once, and a leader that died is
replaced when its lease (--ttl) ends. It needs the single strategy, whose
fencing tokens number the terms: redlock and setnx-getset are refused (64).

  locksmith elect [flags] NAME -- CMD [ARG...]   run CMD while leading
  locksmith elect [flags] NAME                   lead until interrupted
  locksmith elect -l NAME                        watch the leadership

With CMD: once elected, elect runs CMD, and when CMD exits it resigns
(waking the next candidate at once) and exits with CMD's status; with
--loop it campaigns again instead, and exits only on a terminating signal
(with CMD's status, once CMD exited), on a loss (79) or when it cannot
campaign (69). CMD runs in a process group of its own, with stdin, stdout
and stderr passed through, and locksmith's environment plus:
  LOCKSMITH_TERM=N        the term's number, its fencing token: larger than
                          every term's before it on NAME; pass it to the
                          resources CMD writes, so that they refuse a
                          deposed leader
  LOCKSMITH_LEADER=ID     the leader's identity (--identity)
  LOCKSMITH_LOCK=NAME     the election's key
  LOCKSMITH_LEASE_MS=MS   the lease (--ttl), in milliseconds
It never gets the lease's token.

CMD is stopped before the leadership could pass to anyone else, timed
against the term's validity deadline D (the time its last confirmed refresh
was sent, plus the lease, less the drift allowance; each refresh moves it),
with a margin M of 100ms:
  - while refreshes fail (Redis unreachable or paused), SIGTERM goes to the
    group at D - kill-grace - M, and SIGKILL at D - M;
  - when a refresh finds the key gone or taken, SIGTERM goes at once, and
    SIGKILL kill-grace later, or at D - M if that comes first.
elect then exits with 79, whatever CMD's status. The term's stop grace is
kill-grace + M: the term ends when SIGTERM is due. On Linux this schedule is
enforced by a watchdog, a process of its own between locksmith and CMD,
which receives each new deadline and keeps it by itself: so a locksmith
stopped (SIGSTOP), starved or swapped out still has its CMD killed before
the next leader starts, and a locksmith that died (even of SIGKILL) has it
killed at once. Elsewhere, the schedule runs within locksmith, which a
SIGSTOP stops too. --ttl must be at least 3 x (kill-grace + M); the default
kill-grace is 5s, or a sixth of --ttl when that is less (2.5s for the
default 15s), as run's.

Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH go
to CMD's whole group; after a terminating one, SIGKILL follows kill-grace
later, and a second SIGINT kills at once. While elect campaigns, INT, TERM,
HUP or QUIT give up (leaving the queue) and exit with 128+N.

Without CMD: elect prints "elected term=N leader=ID ttl_ms=MS" once
elected, and holds the leadership until SIGINT, SIGTERM, SIGHUP or SIGQUIT,
when it resigns and exits with 0; it exits with 79 if the term is lost.

With -l: elect leads nothing, and prints one line per transition of the
leadership, read every --interval, until interrupted (128+N; Ctrl-C: 130):
  elected term=N leader=ID ttl_ms=MS
  proclaimed term=N leader=ID      the same term, a new identity
  vacant term=N                    nobody leads; N is the last term
  gap missed=K                     K terms came and went between two readings
and, on stderr, "error: ..." for a reading that failed (the readings go
on). With --json, each is a JSON object instead ({"event", "term",
"leader", "ttl_ms", "missed", "error"}). An identity with spaces, quotes or
"=" is quoted.

Exit codes:
  the command's own status     it ran to the end, leading throughout
  128+N                        it was killed by signal N, or elect was
                               interrupted by signal N while campaigning
  0                            without CMD: interrupted, and resigned
  75                           not elected: another leads (-n, -w)
  79                           the term was lost; the command was stopped
  126, 127                     the command is not executable, not found
                               (elect resigns first)
  64                           usage error (such as a --ttl too short for
                               --kill-grace), or a strategy that cannot
                               number terms
  78                           bad configuration
  69                           Redis unreachable, did not answer, or it
                               refused us, before elect was elected
  70                           internal error

-v reports each step on stderr, and --json reports them as JSON lines:
campaigning, queued, woken, elected (term, identity, handover_ms: how long
the leadership was vacant before, as this candidate saw it), started,
refreshed, refresh_failed, signal (which, why: deadline, validity,
kill-grace, lost, forwarded, orphaned), lost (term, reason: unconfirmed,
lapsed, expired, taken or broken; valid_until), exited, resigned,
resign_failed.`

const electExample = `  # one scheduler across the fleet, replaced within 15s when it dies
  locksmith elect --loop scheduler -- ./scheduler --term-from-env

  # be the leader of "primary" until Ctrl-C, as etcdctl elect does
  locksmith elect --identity "$(hostname) primary" primary

  # watch who leads
  locksmith elect -l scheduler`

// electFlags are the flags of elect.
type electFlags struct {
	ttl       time.Duration
	killGrace time.Duration // set by fitGrace, unless given (graceSet)
	graceSet  bool
	interval  time.Duration
	identity  string
	loop      bool
	noWait    bool
	wait      time.Duration
	listen    bool
}

// electTTL is elect's default lease, as the elect package's.
const electTTL = 15 * time.Second

func (a *app) electCommand() *cobra.Command {
	var f electFlags
	cmd := &cobra.Command{
		Use:     "elect [flags] NAME [-- CMD [ARG...]] | elect -l NAME",
		Short:   "Run a command while leading an election, hold the leadership, or watch it",
		Long:    electLong,
		Example: electExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.elect(cmd, &f, args)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.ttl, "ttl", electTTL, "the lease, refreshed every third of it: a leader that died is replaced within it")
	fl.DurationVar(&f.killGrace, "kill-grace", 0, "time between SIGTERM and SIGKILL when the command is stopped (default: 5s, or a sixth of --ttl when less)")
	fl.DurationVar(&f.interval, "interval", 0, "how often a candidate that heard no release tries again, and -l reads the leader (default: a tenth of --ttl, at most 1s)")
	fl.StringVar(&f.identity, "identity", "", `the candidate's identity, which the leader's key carries, for people: observers and inspect show it (default: "HOST pid=PID")`)
	fl.BoolVar(&f.loop, "loop", false, "campaign again each time the command exits")
	fl.BoolVarP(&f.noWait, "no-wait", "n", false, "fail at once (75) if another leads")
	fl.DurationVarP(&f.wait, "wait", "w", 0, "give up (75) after waiting this long to be elected (default: wait as long as it takes)")
	fl.BoolVarP(&f.listen, "listen", "l", false, "watch the leadership: print each change, until interrupted")
	return cmd
}

// electer is one run of the elect subcommand.
type electer struct {
	*app
	f      *electFlags
	name   string
	argv   []string // the command; nil without one
	events *events
	e      *elect.Elector
	locker *lock.Locker  // the Elector's
	limit  time.Duration // how long a campaign may wait: -w's, -n's read timeout; 0 for ever

	campaign atomic.Pointer[context.CancelCauseFunc] // -n: cancels the campaign whose attempt found a leader
	handover atomic.Int64                            // of the last election, as the Elected hook saw it
}

// busyError ends a campaign of -n: an attempt found another leader.
type busyError struct{ err error }

func (e *busyError) Error() string { return e.err.Error() }
func (e *busyError) Unwrap() error { return e.err }

// elect is the elect subcommand.
func (a *app) elect(cmd *cobra.Command, f *electFlags, args []string) error {
	// Caught first, as run does: a signal while campaigning gives up, and
	// none is lost once the command runs.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	el := &electer{app: a, f: f, events: newEvents(a)}
	if err := el.parse(cmd, args); err != nil {
		return exit(exitUsage, err)
	}
	l, closeLocker, err := a.open(cmd.Context())
	if err != nil {
		return err
	}
	defer closeLocker()
	if !f.listen {
		if err := fitGrace("elect", f.ttl, f.ttl/3, false, &f.killGrace, f.graceSet); err != nil {
			return exit(exitUsage, err)
		}
	}
	if f.noWait {
		el.limit = l.cfg.ReadTimeout
	} else {
		el.limit = f.wait
	}
	opts := []elect.Option{elect.WithLease(f.ttl),
		elect.WithHooks(&elect.Hooks{Elected: func(_ context.Context, _ *elect.Term, h time.Duration) { el.handover.Store(int64(h)) }})}
	if !f.listen { // -l leads nothing
		opts = append(opts, elect.WithStopGrace(f.killGrace+killMargin))
	}
	if f.interval > 0 {
		opts = append(opts, elect.WithInterval(f.interval))
	}
	if f.identity != "" {
		opts = append(opts, elect.WithIdentity(f.identity))
	}
	locker := l.locker.With(lock.WithHooks(el.events.hooks()), lock.WithHooks(&lock.Hooks{Attempt: el.attempt}))
	el.locker = locker
	if el.e, err = elect.New(locker, el.name, opts...); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			return exit(exitUsage, fmt.Errorf("elect: the %s strategy cannot elect: %w", l.cfg.Strategy, err))
		}
		return exit(exitUsage, fmt.Errorf("elect: %w", err))
	}
	switch {
	case f.listen:
		return el.listen(cmd.Context(), sigs)
	case el.argv == nil:
		return el.hold(cmd.Context(), sigs)
	}
	for {
		t, err := el.elected(cmd.Context(), sigs)
		if err != nil {
			return err
		}
		status, interrupted, err := el.lead(t, sigs)
		switch {
		case err != nil:
			return err
		case f.loop && !interrupted:
			continue
		case status != 0:
			return exit(status, nil)
		}
		return nil
	}
}

// parse reads NAME and the command from args, and checks the flags.
func (el *electer) parse(cmd *cobra.Command, args []string) error {
	f, dash := el.f, cmd.ArgsLenAtDash()
	names, argv := args, []string(nil)
	if dash >= 0 {
		names, argv = args[:dash], args[dash:]
	}
	changed := cmd.Flags().Changed
	switch {
	case len(names) != 1:
		return fmt.Errorf("elect: give one NAME, got %d\nUsage: locksmith %s", len(names), cmd.Use)
	case names[0] == "":
		return errors.New("elect: NAME must not be empty")
	case dash >= 0 && len(argv) == 0:
		return fmt.Errorf("elect: missing the command after --: locksmith elect [flags] %s -- CMD [ARG...], or no -- to hold the leadership", names[0])
	case f.listen && (argv != nil || f.loop || f.noWait || changed("wait") || changed("kill-grace") || changed("identity")):
		return errors.New("elect: -l watches the leadership: it takes a NAME, and none of CMD, --loop, -n, -w, --kill-grace, --identity")
	case f.loop && argv == nil:
		return errors.New("elect: --loop runs a command again and again: give one after --")
	case f.noWait && changed("wait"):
		return errors.New("elect: give either -n or -w, not both")
	case f.killGrace < 0:
		return fmt.Errorf("elect: --kill-grace %v: must not be negative", f.killGrace)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"ttl", f.ttl}, {"wait", f.wait}, {"interval", f.interval}} {
		if changed(d.flag) && d.v <= 0 {
			return fmt.Errorf("elect: --%s %v: must be positive", d.flag, d.v)
		}
	}
	f.graceSet = changed("kill-grace")
	el.name, el.argv = names[0], argv
	return nil
}

// attempt is the Attempt hook of the campaigns: with -n, the first attempt
// that finds another leader ends the campaign.
func (el *electer) attempt(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
	err := next(ctx)
	if el.f.noWait && errors.Is(err, lock.ErrNotObtained) {
		if cancel := el.campaign.Load(); cancel != nil {
			(*cancel)(&busyError{err})
		}
	}
	return err
}

// label names the election in messages.
func (el *electer) label() string { return fmt.Sprintf("leadership of %q", el.name) }

// elected campaigns until elected, waiting as -n and -w say; a terminating
// signal gives up.
func (el *electer) elected(ctx context.Context, sigs <-chan os.Signal) (*elect.Term, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if el.limit > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, el.limit)
		defer stop()
	}
	if el.f.noWait {
		// Read first, so as not to join the queue: the hook (attempt) ends
		// a campaign that lost the race to another candidate.
		st, err := el.locker.Inspect(ctx, el.name)
		switch {
		case err == nil && st.Held:
			term := ""
			if st.Fence > 0 {
				term = fmt.Sprintf(", term %d", st.Fence)
			}
			return nil, exit(exitNotObtained, fmt.Errorf("%s is held by %s%s (-n: not waiting)", el.label(), holderText(st), term))
		case err != nil:
			return nil, fmt.Errorf("reading the %s: %w", el.label(), err)
		}
	}
	el.campaign.Store(&cancel)
	defer el.campaign.Store(nil)
	el.events.queued.Store(false)
	type result struct {
		t   *elect.Term
		err error
	}
	done := make(chan result, 1)
	el.events.emit("campaigning", "lock", el.name, "identity", el.e.Identity(), "ttl_ms", el.f.ttl.Milliseconds())
	go func() {
		t, err := el.e.Campaign(ctx)
		done <- result{t, err}
	}()
	for {
		select {
		case sig := <-sigs:
			if terminating(sig) {
				el.events.emit("signal", "signal", signalName(sig), "while", "campaigning")
				cancel(&signalError{sig})
			}
		case o := <-done:
			var (
				se   *signalError
				busy *busyError
			)
			cause := context.Cause(ctx)
			switch {
			case errors.As(cause, &se):
				if o.err == nil { // elected as the signal came
					el.resign(o.t, false)
				}
				el.events.left()
				return nil, exit(exitSignal+signum(se.sig), se)
			case o.err == nil:
				return o.t, nil
			case errors.As(cause, &busy):
				el.events.left()
				return nil, exit(exitNotObtained, notObtained(el.label(), []string{el.name}, false, true, 0, busy.err))
			case errors.Is(o.err, lock.ErrNotObtained):
				el.events.left()
				return nil, exit(exitNotObtained, notObtained(el.label(), []string{el.name}, false, el.f.noWait, el.f.wait, o.err))
			}
			return nil, fmt.Errorf("campaigning for the %s: %w", el.label(), o.err)
		}
	}
}

// resign resigns t, reporting it; lost says that the term ended already,
// and that resigning is only tidying up.
func (el *electer) resign(t *elect.Term, lost bool) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := t.Resign(ctx)
	switch {
	case lost:
	case err != nil:
		el.warnf("resigning the %s: %v (its lease ends it)", el.label(), err)
		el.events.emit("resign_failed", "lock", el.name, "term", t.Number(), "error", err.Error())
	default:
		el.events.emit("resigned", "lock", el.name, "term", t.Number(), "held_ms", time.Since(t.Elected()).Milliseconds())
	}
}

// announce reports an election.
func (el *electer) announce(t *elect.Term) {
	el.events.emit("elected", "lock", el.name, "term", t.Number(), "identity", t.Identity(),
		"handover_ms", time.Duration(el.handover.Load()).Milliseconds(), "valid_until", wall(t.ValidUntil()))
}

// lossReason names why the term ended, when it was lost: "" when it was
// resigned, or is held.
func lossReason(err error) string {
	switch {
	case err == nil, errors.Is(err, elect.ErrResigned):
		return ""
	case errors.Is(err, elect.ErrStepDown):
		return "unconfirmed" // no refresh confirmed the lease before the stop grace
	case errors.Is(err, lock.ErrLapsed):
		return "lapsed" // the lease ran out unrefreshed: this process was paused, say
	case errors.Is(err, lock.ErrBroken):
		return "broken"
	case errors.Is(err, lock.ErrExpired):
		return "expired"
	case errors.Is(err, lock.ErrTaken):
		return "taken"
	}
	return "lost"
}

// lostError is elect's error for a term lost for reason.
func (el *electer) lostError(reason string, stopped bool) error {
	if stopped {
		return exit(exitLost, fmt.Errorf("%s lost (%s): the command was stopped", el.label(), reason))
	}
	return exit(exitLost, fmt.Errorf("%s lost (%s)", el.label(), reason))
}

// pollEvery is how often lead reads the term's validity deadline, for the
// watchdog: well within a refresh interval, so that a new deadline
// reaches it long before the old one's SIGTERM.
func pollEvery(ttl time.Duration) time.Duration {
	return max(time.Millisecond, min(100*time.Millisecond, ttl/30))
}

// lead runs the command in the term t, under its watchdog, and resigns once
// it exited. It returns the command's status (128+N when signal N killed
// it), whether a terminating signal came, and an error that ends elect,
// --loop or not: a loss (79), or a command that could not run.
func (el *electer) lead(t *elect.Term, sigs <-chan os.Signal) (status int, interrupted bool, err error) {
	el.announce(t)
	d := t.ValidUntil() // the validity deadline, which each refresh moves; zero once the term ended
	if d.IsZero() {
		el.resign(t, true)
		return 0, false, exit(exitLost, fmt.Errorf("%s lost (%s) before the command started", el.label(), lossReason(t.Err())))
	}
	env := commandEnviron("LOCKSMITH_LOCK="+el.name, "LOCKSMITH_TERM="+strconv.FormatInt(t.Number(), 10),
		"LOCKSMITH_LEADER="+t.Identity(), "LOCKSMITH_LEASE_MS="+strconv.FormatInt(el.f.ttl.Milliseconds(), 10))
	g, err := startGuard(el.argv, env, el.stdin, el.stdout, el.stderr, d, el.f.killGrace)
	if err != nil {
		el.resign(t, false)
		return 0, false, exit(exitInternal, err)
	}
	// Each new deadline goes to the watchdog from a goroutine of its own:
	// reading it may wait for a refresh on its way, when the term ends.
	var last atomic.Pointer[time.Time] // the last deadline sent: kept once the term zeroes it
	last.Store(&d)
	polled := make(chan struct{})
	defer close(polled)
	go func() {
		tick := time.NewTicker(pollEvery(el.f.ttl))
		defer tick.Stop()
		for {
			select {
			case <-polled:
				return
			case <-tick.C:
			}
			if v := t.ValidUntil(); v.After(*last.Load()) {
				last.Store(&v)
				g.send(order{kind: orderDeadline, at: mono(v)})
			}
		}
	}()
	var (
		pid    int
		lost   string // why the term was lost; "" while it is not
		exited *watchReport
	)
	lose := func(reason string) {
		if lost == "" && reason != "" {
			lost = reason
			el.events.emit("lost", "lock", el.name, "term", t.Number(), "reason", reason, "valid_until", wall(*last.Load()))
		}
	}
	done := t.Done()
	for exited == nil {
		select {
		case r, ok := <-g.reports:
			switch {
			case !ok:
				exited = &watchReport{kind: reportFailed, code: exitInternal, text: "the watchdog ended before the command did"}
			case r.kind == reportStarted:
				pid = r.pid
				el.events.emit("started", "pid", pid)
			case r.kind == reportSignal:
				el.events.emit("signal", "signal", signalName(r.sig), "why", r.why, "pid", pid)
			default:
				exited = &r
			}
		case <-done:
			done = nil
			if reason := lossReason(t.Err()); reason != "" {
				lose(reason)
				g.send(order{kind: orderStop, why: "lost"})
			}
		case sig := <-sigs:
			g.send(order{kind: orderSignal, sig: sig.(syscall.Signal)})
			interrupted = interrupted || terminating(sig)
		}
	}
	g.close()
	lose(lossReason(t.Err())) // ended before the command did
	if exited.kind == reportFailed {
		el.resign(t, lost != "")
		return 0, interrupted, exit(exitedCode(exited.code), errors.New(exited.text))
	}
	el.events.emit("exited", "pid", pid, "status", exitText(exited.code, exited.sig))
	el.resign(t, lost != "")
	if lost != "" {
		return 0, interrupted, el.lostError(lost, true)
	}
	if exited.sig != 0 {
		return exitSignal + int(exited.sig), interrupted, nil
	}
	return exitedCode(exited.code), interrupted, nil
}

// exitedCode keeps code within what an exit status holds.
func exitedCode(code int) int {
	if code < 0 || code > 255 {
		return exitInternal
	}
	return code
}

// hold holds the leadership, without a command, until a terminating signal
// (resign, exit 0) or the term's loss (79).
func (el *electer) hold(ctx context.Context, sigs <-chan os.Signal) error {
	t, err := el.elected(ctx, sigs)
	if err != nil {
		return err
	}
	el.announce(t)
	if err := el.print(elect.Event{Kind: elect.Elected, Leader: elect.Leader{Term: t.Number(), Identity: t.Identity(), TTL: time.Until(t.ValidUntil())}}); err != nil {
		el.resign(t, false)
		return exit(exitInternal, err)
	}
	for {
		select {
		case sig := <-sigs:
			if terminating(sig) {
				el.events.emit("signal", "signal", signalName(sig), "while", "leading")
				el.resign(t, false)
				return nil
			}
		case <-t.Done():
			reason := lossReason(t.Err())
			el.events.emit("lost", "lock", el.name, "term", t.Number(), "reason", reason)
			el.resign(t, true)
			return el.lostError(reason, false)
		}
	}
}

// listen prints each transition of the leadership until a terminating
// signal, which app.execute turns into 128+N.
func (el *electer) listen(ctx context.Context, sigs <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case sig := <-sigs:
				if terminating(sig) {
					el.signal.Store(&sig)
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	for ev := range el.e.Observe(ctx) {
		if err := el.print(ev); err != nil {
			return exit(exitInternal, err)
		}
	}
	return nil
}

// print prints ev as a line of -l, on stdout (an error, on stderr).
func (el *electer) print(ev elect.Event) error {
	if el.json {
		out := struct {
			Event  string `json:"event"`
			Term   int64  `json:"term,omitempty"`
			Leader string `json:"leader,omitempty"`
			TTL    int64  `json:"ttl_ms,omitempty"`
			Missed int64  `json:"missed,omitempty"`
			Error  string `json:"error,omitempty"`
		}{Event: ev.Kind.String()}
		switch ev.Kind {
		case elect.Elected, elect.Proclaimed:
			out.Term, out.Leader, out.TTL = ev.Leader.Term, ev.Leader.Identity, ev.Leader.TTL.Milliseconds()
		case elect.Vacant:
			out.Term = ev.Leader.Term
		case elect.Gap:
			out.Missed = ev.Missed
		case elect.Error:
			out.Error = ev.Err.Error()
		}
		b, _ := json.Marshal(out)
		if ev.Kind == elect.Error {
			_, err := fmt.Fprintf(el.stderr, "%s\n", b)
			return err
		}
		_, err := fmt.Fprintf(el.stdout, "%s\n", b)
		return err
	}
	var line string
	switch ev.Kind {
	case elect.Elected:
		line = fmt.Sprintf("elected term=%d leader=%s ttl_ms=%d", ev.Leader.Term, logfmt(ev.Leader.Identity), ev.Leader.TTL.Milliseconds())
	case elect.Proclaimed:
		line = fmt.Sprintf("proclaimed term=%d leader=%s", ev.Leader.Term, logfmt(ev.Leader.Identity))
	case elect.Vacant:
		line = fmt.Sprintf("vacant term=%d", ev.Leader.Term)
	case elect.Gap:
		line = fmt.Sprintf("gap missed=%d", ev.Missed)
	case elect.Error:
		_, err := fmt.Fprintf(el.stderr, "error: %v\n", ev.Err)
		return err
	default:
		return nil
	}
	_, err := fmt.Fprintln(el.stdout, line)
	return err
}

// logfmt returns s as a value of a key=value line: quoted when it is empty
// or holds a space, a quote, an equals sign or an unprintable character.
func logfmt(s string) string {
	if s == "" || strings.ContainsAny(s, " \"=\\") || strconv.Quote(s) != `"`+s+`"` {
		return strconv.Quote(s)
	}
	return s
}
