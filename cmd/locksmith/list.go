package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/locksmith-go/lock"
)

// listFlags are the flags that ls and top share.
type listFlags struct {
	limit   int
	timeout time.Duration
}

// add adds the flags to cmd.
func (f *listFlags) add(cmd *cobra.Command, timeout string) {
	cmd.Flags().IntVar(&f.limit, "limit", 1000, "list at most this many held locks")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, timeout)
}

// check returns the usage error of bad flags, for the subcommand cmd.
func (f listFlags) check(cmd string) error {
	switch {
	case f.limit < 1:
		return exit(exitUsage, fmt.Errorf("%s: --limit %d: want at least 1", cmd, f.limit))
	case f.timeout <= 0:
		return exit(exitUsage, fmt.Errorf("%s: --timeout %v: want a positive duration", cmd, f.timeout))
	}
	return nil
}

// listHelp is what ls and top say of the listing they show.
const listHelp = `It finds the locks with SCAN MATCH PREFIX* (the prefix is matched as it is,
glob characters included) on every server of the configuration: each
master of a Cluster, and under redlock enough nodes that a lock a quorum
holds is seen. SCAN walks the whole keyspace, a thousand keys a call,
whatever the prefix; each lock under the prefix then costs one inspection.
The locks' own keys beside them (queues, fencing counters) and keys of
other types are skipped, and free locks have no key. It stops at --limit
held locks, and says so.

The columns: LOCK the name; WAITERS how many waiters queue for it (the
single strategy keeps a queue; 0 elsewhere); LONGEST WAIT the longest
waiter's time in the queue ("-": unknown, which the queue does not record
yet); HELD FOR how long the holder has held it ("-": unknown, a holder
that stamped no time); TTL what is left of it; FINGERPRINT the holder's
token fingerprint (never the token); HOLDER who holds it: user@host, pid
and command of a locksmith holder, another client's metadata quoted, the
state of a semaphore or a read-write lock.`

func (a *app) lsCommand() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "ls PREFIX [--limit N] [--timeout DUR] [--json]",
		Short: "List the locks held under a prefix",
		Long: `ls lists the locks held whose names start with PREFIX ("" for every
lock), sorted by name: one row each, or with --json an array of inspect's
JSON objects (see locksmith inspect --help), each with two more fields:
held_for_ms (left out when unknown) and waited_ms (the longest waiter's
time in the queue, left out when unknown or none waits).

` + listHelp + `

Exit codes: 0 listed (even none), 69 Redis unavailable (the locks found
until then are listed), 64 usage, 78 configuration (or a strategy or
driver that cannot list).`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check("ls"); err != nil {
				return err
			}
			return a.ls(cmd.Context(), args[0], f)
		},
	}
	f.add(cmd, "how long the whole listing may take")
	return cmd
}

// ls lists the locks held under prefix.
func (a *app) ls(ctx context.Context, prefix string, f listFlags) error {
	l, done, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	held, err := l.locker.List(ctx, prefix, f.limit)
	reports := listReports(held)
	if a.json {
		if reports == nil {
			reports = []listedReport{}
		}
		if err := writeJSON(a.stdout, reports); err != nil {
			return err
		}
	} else if err := listTable(a.stdout, reports); err != nil {
		return err
	}
	if len(held) == f.limit {
		a.warnf("ls: listed the first %d held locks (--limit): others may be left out", f.limit)
	}
	return listError(err)
}

// listError returns the exit error of List's err: 78 for a strategy or a
// driver that cannot list, and else codeOf's.
func listError(err error) error {
	if errors.Is(err, errors.ErrUnsupported) {
		return exit(exitConfig, err)
	}
	return err
}

// listedReport is what ls and top show of a held lock: inspect's report,
// and what only a listing shows.
type listedReport struct {
	lockReport
	HeldFor int64 `json:"held_for_ms,omitempty"` // how long the holder has held it; 0: unknown
	Waited  int64 `json:"waited_ms,omitempty"`   // the longest waiter's time in the queue; 0: unknown, or none waits
}

// listReports returns the reports of the held locks.
func listReports(held []lock.Listed) []listedReport {
	var rs []listedReport
	for _, h := range held {
		rs = append(rs, listedReport{newReport(h.Key, h.State, nil), h.State.HeldFor.Milliseconds(), h.State.Waited.Milliseconds()})
	}
	return rs
}

// listTable writes rs for people, a row each, under a header.
func listTable(w io.Writer, rs []listedReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tWAITERS\tLONGEST WAIT\tHELD FOR\tTTL\tFINGERPRINT\tHOLDER")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", printable(r.Name), r.Waiters, orDash(r.Waited), orDash(r.HeldFor),
			ttlString(time.Duration(r.TTL)*time.Millisecond), cmp.Or(r.Fingerprint, "-"), r.who())
	}
	return tw.Flush()
}

// orDash writes a duration in ms for people, "-" for 0: unknown.
func orDash(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return ttlString(time.Duration(ms) * time.Millisecond)
}

// who writes the holder for people: a locksmith holder's user@host, pid
// and command; another client's metadata, quoted; the state of a shared
// lock.
func (r listedReport) who() string {
	switch h := r.Holder; {
	case r.shared():
		return r.Verdict
	case h != nil:
		s := printable(h.User) + "@" + printable(h.Host) + " pid " + h.pid()
		if h.Cmd != "" {
			s += " " + printable(h.Cmd)
		}
		return s
	case r.Metadata != "":
		return strconv.Quote(r.Metadata)
	}
	return "-"
}

// contended sorts rs as top shows them: the most waiters first, then the
// longest wait, the longest held, and by name.
func contended(rs []listedReport) {
	slices.SortStableFunc(rs, func(a, b listedReport) int {
		return cmp.Or(cmp.Compare(b.Waiters, a.Waiters), cmp.Compare(b.Waited, a.Waited),
			cmp.Compare(b.HeldFor, a.HeldFor), strings.Compare(a.Name, b.Name))
	})
}
