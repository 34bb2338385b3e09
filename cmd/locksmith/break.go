package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/redlock"
)

// afterBreak is what a live holder of a broken lock does next, wrapped for
// the help.
const afterBreak = `a locksmith run holder kills its command at its next refresh, within its
refresh interval; any other holder keeps running until its next refresh
fails: rely on fencing`

// breakFlags are break's guards, of which it takes exactly one.
type breakFlags struct {
	fingerprint string
	olderThan   time.Duration
	force       bool
}

func (a *app) breakCommand() *cobra.Command {
	var f breakFlags
	cmd := &cobra.Command{
		Use:   "break NAME (--fingerprint F | --older-than DUR | --force)",
		Short: "Delete a stale lock, guarded against deleting a newer holder's",
		Long: `break deletes the lock NAME, as its holder's own release would (waking the
next waiter), when the one guard given allows it:

  --fingerprint F   only if the holder's token fingerprint is F, as inspect
                    shows it: compare-and-delete in one step, so a lock that
                    passed to a newer holder since is never deleted
  --older-than DUR  only if the holder is a locksmith holder that started
                    more than DUR ago, by the start time in its metadata
                    and this host's clock (a holder without locksmith's
                    metadata is refused); the lock is then broken by the
                    fingerprint just read, as above. A holder starts when
                    it asks for the lock: one that waited for it has held
                    it for less than its age (--fingerprint is exact)
  --force           whoever holds it

Of a semaphore (locksmith run --permits) or a read-write lock, it ends the
lease of the holder whose fingerprint is F (inspect lists them), or of every
holder with --force; --older-than is refused (64).

It prints what it broke: the fingerprint, the holder's metadata, the TTL that
was left and, under redlock, each node. Breaking a lock does not stop its
holder:
` + afterBreak + `.

With --json it prints inspect's JSON object of the state it broke (see
locksmith inspect --help), with two more fields: broken (true when it
deleted the lock) and note (what a live holder does next).

Exit codes: 0 broken; 1 not broken: the lock was free, or the guard did not
match; 69 Redis unavailable (under redlock, when a node did not answer: the
nodes are shown); 64 usage (no guard, or more than one; a --fingerprint
that is not 16 hexadecimal digits; a strategy that cannot break locks;
--older-than on a semaphore or read-write lock); 78 configuration.`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.guard(cmd.Flags().Changed); err != nil {
				return err
			}
			return a.breakLock(cmd.Context(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.fingerprint, "fingerprint", "", "break only the holder whose token fingerprint is `F` (as inspect shows it)")
	fl.DurationVar(&f.olderThan, "older-than", 0, "break only a locksmith holder that started more than `DUR` ago (when it asked for the lock)")
	fl.BoolVar(&f.force, "force", false, "break whoever holds the lock")
	return cmd
}

// guard checks that f holds exactly one guard, and a valid one: set is
// whether the flag of that name was given.
func (f breakFlags) guard(set func(name string) bool) error {
	n := 0
	for _, name := range []string{"fingerprint", "older-than", "force"} {
		if set(name) {
			n++
		}
	}
	switch {
	case n != 1:
		return exit(exitUsage, errors.New("break: give exactly one guard: --fingerprint F, --older-than DUR or --force"))
	case set("fingerprint") && f.fingerprint == "":
		return exit(exitUsage, errors.New("break: --fingerprint is empty; --force breaks whoever holds the lock"))
	case set("older-than") && f.olderThan <= 0:
		return exit(exitUsage, fmt.Errorf("break: --older-than must be positive, got %v", f.olderThan))
	case set("force") && !f.force:
		return exit(exitUsage, errors.New("break: --force=false is no guard"))
	}
	return nil
}

// breakLock breaks the lock on name as f's guard allows, and reports it.
func (a *app) breakLock(ctx context.Context, name string, f breakFlags) error {
	l, ctx, done, err := a.openCall(ctx)
	if err != nil {
		return err
	}
	defer done()
	fingerprint := f.fingerprint // "" with --force: whoever holds it
	var st lock.State
	if f.olderThan > 0 {
		st, err = oldHolder(ctx, l.locker, name, f.olderThan)
		fingerprint = st.Fingerprint
	}
	if err == nil {
		st, err = l.locker.Break(ctx, name, fingerprint)
	}
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return exit(exitUsage, fmt.Errorf("break: %w", err))
	case errors.Is(err, lock.ErrTaken) && st.Fingerprint != "":
		err = exit(exitNotHeld, fmt.Errorf("break %s: held by the holder with fingerprint %s, not %s: nothing broken", name, st.Fingerprint, fingerprint))
	case errors.Is(err, lock.ErrTaken):
		err = exit(exitNotHeld, fmt.Errorf("break %s: held by another holder than %s: nothing broken", name, fingerprint))
	case errors.Is(err, lock.ErrNotHeld):
		err = exit(exitNotHeld, fmt.Errorf("break %s: not held: nothing to break", name))
	case err != nil && st.Nodes == nil && codeOf(err) != exitNotHeld:
		return err
	}
	r := breakReport{Broken: err == nil, lockReport: newReport(name, st, nil)}
	some := r.Broken
	for i := range r.Nodes {
		b := brokenOn(st.Nodes[i], i, fingerprint, err)
		r.Nodes[i].Broken = &b
		some = some || b
	}
	if codeOf(err) == exitUnavailable {
		r.Error = err.Error()
	}
	switch after := strings.Join(strings.Fields(afterBreak), " "); {
	case r.Broken && r.shared() && fingerprint != "":
		r.Note = "the holder's lease is ended; " + after
	case r.Broken && r.shared():
		r.Note = "every holder's lease is ended; " + after
	case r.Broken:
		r.Note = "the lock is deleted; " + after
	case some:
		r.Note = "the lock is deleted on the nodes marked broken; " + after
	}
	if perr := a.printBreak(r); perr != nil {
		return perr
	}
	return err
}

// brokenOn reports whether Break, which returned err, deleted the lock on
// n, node i of a multi-node strategy, as fingerprint guarded it: Redlock's
// error gives each node's outcome when a node failed.
func brokenOn(n strategy.NodeState, i int, fingerprint string, err error) bool {
	var q *redlock.QuorumError
	switch {
	case errors.As(err, &q) && q.Op == "break" && i < len(q.Nodes):
		return q.Nodes[i].Outcome == redlock.OK
	case err != nil:
		return false
	}
	return n.Err == nil && n.Held && (fingerprint == "" || n.Fingerprint == fingerprint)
}

// oldHolder returns the state of the lock on name if its holder is a
// locksmith holder that obtained it more than d ago, and an error (exit
// code 1) that says why not otherwise.
func oldHolder(ctx context.Context, l *lock.Locker, name string, d time.Duration) (lock.State, error) {
	st, err := l.Inspect(ctx, name)
	if err != nil {
		return st, err
	}
	h, ok := parseHolder(st.Metadata)
	switch {
	case !st.Held:
		return st, exit(exitNotHeld, fmt.Errorf("break %s: not held: nothing to break", name))
	case st.Permits > 0 || st.ReadWrite:
		return st, exit(exitUsage, fmt.Errorf("break %s: a semaphore's or read-write lock's holders each have a lease of their own: "+
			"break one with --fingerprint F (inspect lists them), or every one with --force", name))
	case !ok:
		return st, exit(exitNotHeld, fmt.Errorf("break %s: its holder left no locksmith metadata, so its age is unknown: "+
			"nothing broken; break it with --fingerprint %s or --force", name, st.Fingerprint))
	}
	if age := time.Since(h.Start); age <= d {
		return st, exit(exitNotHeld, fmt.Errorf("break %s: its holder started %s ago, not more than --older-than %v: nothing broken",
			name, ttlString(age), d))
	}
	return st, nil
}

// breakReport is what break shows: the state it read before it broke the
// lock (or could not), whether it broke it, and what a live holder does next.
type breakReport struct {
	Broken bool   `json:"broken"`
	Note   string `json:"note,omitempty"`
	lockReport
}

// printBreak writes r to stdout: as JSON with --json, else as a table
// followed by the note.
func (a *app) printBreak(r breakReport) error {
	if a.json {
		return writeJSON(a.stdout, r)
	}
	r.extra = [][2]string{{"broken", yesNo(r.Broken)}}
	if err := r.table(a.stdout); err != nil {
		return err
	}
	if r.Note != "" {
		_, err := fmt.Fprintf(a.stdout, "\nNote: %s.\n", r.Note)
		return err
	}
	return nil
}
