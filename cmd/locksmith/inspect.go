package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/locksmith-go/lock"
)

// stamp is how the tables write times: RFC 3339, to the millisecond.
const stamp = "2006-01-02T15:04:05.000Z07:00"

func (a *app) inspectCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect NAME [NAME...]",
		Short: "Show whether a lock is held, by whom, and for how long yet",
		Long: `inspect reads the lock NAME without holding or changing it, and shows:
whether it is held; its remaining time to live (the PTTL); the fingerprint of
the holder's token (never the token); the holder's metadata (host, pid, user,
command, start time and age, for a holder that locksmith started; raw for
another client's); the fencing counter; and how many waiters queue for it,
where the strategy keeps a queue. Under redlock it shows one row per node
and the verdict, with the minimum validity; under setnx-getset the decoded
timestamp of the legacy value, and whether a takeover is possible now.

Of a semaphore (locksmith run --permits N) it shows the limit, the waiters,
and one row per holder: its permit, fingerprint, TTL and metadata; of a
read-write lock, one row per reader or writer. The TTL is then the time
until the last holder's lease ends.

With --json it prints one JSON object:
  name          the lock's name
  held          true when an owner holds it (under redlock: a quorum)
  verdict       the state in a few words, such as "held on 2 of 3 nodes (quorum 2)"
  ttl_ms        the remaining time to live in ms: -1 for none, 0 when free
                (of a semaphore or read-write lock: until the last lease ends)
  fingerprint   the holder's token fingerprint, when held (of a read-write
                lock: the writer's; none for a semaphore)
  holder        the metadata of a locksmith holder: host, pid, user, cmd,
                start (RFC 3339), by (locksmith's version), via (run or
                acquire), age_ms
  metadata      another client's metadata, raw (holder and metadata: of
                a read-write lock, the writer's; none for a semaphore)
  fence         the last fencing token issued for the lock, when any
  waiters       how many waiters the lock's queue holds (0 without a queue)
  permits       a semaphore's limit
  read_write    true for a read-write lock
  holders       a semaphore's or read-write lock's holders, soonest to
                expire first: [{fingerprint, ttl_ms, permit (a
                semaphore's, 0 to permits-1), side (read or write), holder
                or metadata (as above)}]
  expiry        setnx-getset: the legacy timestamp, decoded (RFC 3339)
  takeover      setnx-getset: whether an Obtain takes the lock over now
  nodes         redlock: [{node, held, ttl_ms, fingerprint, error}]
  error         why the state is incomplete (redlock: nodes that did not answer)
Fields that do not apply are left out, except name, held, verdict, ttl_ms
and waiters.

With several NAMEs, such as those of a lock that run or acquire took as
one, it shows each one in turn, in the order given: a table each,
separated by a blank line, or with --json an array of the objects.

Exit codes: 0 held (every NAME), 1 free (any NAME), 69 Redis unavailable
(or, under redlock, too few nodes answered to tell: the nodes that did are
shown), 64 usage, 78 configuration.`,
		Args: args(1, math.MaxInt),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.inspect(cmd.Context(), args)
		},
	}
}

// inspect shows the state of the locks on names.
func (a *app) inspect(ctx context.Context, names []string) error {
	l, ctx, done, err := a.openCall(ctx)
	if err != nil {
		return err
	}
	defer done()
	var (
		reports    []lockReport
		incomplete bool // a multi-node strategy could not tell
		free       bool
	)
	for _, name := range names {
		st, err := l.locker.Inspect(ctx, name)
		if err != nil && st.Nodes == nil {
			return err
		}
		reports = append(reports, newReport(name, st, err))
		incomplete = incomplete || err != nil
		free = free || !st.Held
	}
	if err := a.print(reports); err != nil {
		return err
	}
	switch {
	case incomplete:
		return exit(exitUnavailable, nil) // the report says why
	case free:
		return exit(exitNotHeld, nil)
	}
	return nil
}

// lockReport is what inspect shows of a lock's State, and what break shows of
// the State it broke: a table for people, or JSON with --json. Its JSON
// fields are documented in inspect's help, and stay stable.
type lockReport struct {
	Name        string               `json:"name"`
	Held        bool                 `json:"held"`
	Verdict     string               `json:"verdict"`
	TTL         int64                `json:"ttl_ms"`
	Fingerprint string               `json:"fingerprint,omitempty"`
	Holder      *holderReport        `json:"holder,omitempty"`
	Metadata    string               `json:"metadata,omitempty"`
	Fence       int64                `json:"fence,omitempty"`
	Waiters     int                  `json:"waiters"`
	Permits     int                  `json:"permits,omitempty"`
	ReadWrite   bool                 `json:"read_write,omitempty"`
	Holders     []sharedHolderReport `json:"holders,omitempty"`
	Expiry      *time.Time           `json:"expiry,omitempty"`
	Takeover    *bool                `json:"takeover,omitempty"`
	Nodes       []nodeReport         `json:"nodes,omitempty"`
	Error       string               `json:"error,omitempty"`
	now         time.Time            // when the state was read, for the ages
	extra       [][2]string          // rows break adds to the table, after the state
}

// holderReport is the metadata of a holder that locksmith started, with
// its age.
type holderReport struct {
	holder
	Age int64 `json:"age_ms"`
}

// sharedHolderReport is one holder of a shared lock: a semaphore's permit,
// or a read-write lock's reader or writer.
type sharedHolderReport struct {
	Fingerprint string        `json:"fingerprint"`
	TTL         int64         `json:"ttl_ms"`
	Permit      *int          `json:"permit,omitempty"` // a semaphore's: 0 to permits-1
	Side        string        `json:"side,omitempty"`   // a read-write lock's: read or write
	Holder      *holderReport `json:"holder,omitempty"`
	Metadata    string        `json:"metadata,omitempty"`
}

// nodeReport is one Redlock node's answer.
type nodeReport struct {
	Node        string `json:"node"`
	Held        bool   `json:"held"`
	TTL         int64  `json:"ttl_ms"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Error       string `json:"error,omitempty"`
	Broken      *bool  `json:"broken,omitempty"` // break's: whether it deleted the lock on the node
}

// newReport returns the report of st, the state of the lock on name, which
// err left incomplete when not nil.
func newReport(name string, st lock.State, err error) lockReport {
	r := lockReport{
		Name: name, Held: st.Held, Verdict: st.Verdict, TTL: millis(st.TTL),
		Fingerprint: st.Fingerprint, Fence: st.Fence, Waiters: st.Waiters,
		Permits: st.Permits, ReadWrite: st.ReadWrite,
		now: time.Now(),
	}
	r.Holder, r.Metadata = r.holderOf(st.Metadata)
	for _, h := range st.Holders {
		sr := sharedHolderReport{Fingerprint: h.Fingerprint, TTL: millis(h.TTL)}
		switch {
		case st.Permits > 0:
			sr.Permit = &h.Permit
		case h.Write:
			sr.Side = "write"
		default:
			sr.Side = "read"
		}
		sr.Holder, sr.Metadata = r.holderOf(h.Metadata)
		r.Holders = append(r.Holders, sr)
	}
	if !st.Expiry.IsZero() {
		r.Expiry, r.Takeover = &st.Expiry, &st.Takeover
	}
	for _, n := range st.Nodes {
		nr := nodeReport{Node: n.Node, Held: n.Held, TTL: millis(n.TTL), Fingerprint: n.Fingerprint}
		if n.Err != nil {
			nr.Error = n.Err.Error()
		}
		r.Nodes = append(r.Nodes, nr)
	}
	if st.Held && len(st.Nodes) > 0 {
		r.Verdict += ", minimum validity " + ttlString(st.TTL)
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

// holderOf reads metadata: the holder it describes when locksmith wrote it,
// with its age, and else the metadata itself, raw.
func (r lockReport) holderOf(metadata string) (*holderReport, string) {
	if h, ok := parseHolder(metadata); ok {
		return &holderReport{h, r.now.Sub(h.Start).Milliseconds()}, ""
	}
	return nil, metadata
}

// shared reports whether r is the report of a semaphore or a read-write
// lock.
func (r lockReport) shared() bool { return r.Permits > 0 || r.ReadWrite }

// millis returns d in milliseconds, and -1 for a negative d: no expiry.
func millis(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// print writes rs to stdout: as JSON with --json (an object for one
// report, an array for several), else as tables separated by blank lines.
func (a *app) print(rs []lockReport) error {
	switch {
	case a.json && len(rs) == 1:
		return writeJSON(a.stdout, rs[0])
	case a.json:
		return writeJSON(a.stdout, rs)
	}
	for i, r := range rs {
		if i > 0 {
			if _, err := fmt.Fprintln(a.stdout); err != nil {
				return err
			}
		}
		if err := r.table(a.stdout); err != nil {
			return err
		}
	}
	return nil
}

// writeJSON writes v to w as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return exit(exitInternal, err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// table writes r for people: a column of names and one of values, then,
// under Redlock, a row per node.
func (r lockReport) table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(show bool, name, value string) {
		if show {
			fmt.Fprintf(tw, "%s\t%s\n", name, value)
		}
	}
	own := !r.shared() // a shared lock's holders have a table of their own
	row(true, "lock", printable(r.Name))
	row(true, "state", r.Verdict)
	for _, e := range r.extra {
		row(true, e[0], e[1])
	}
	row(r.Held, "ttl", ttlString(time.Duration(r.TTL)*time.Millisecond))
	row(r.Held && own, "fingerprint", r.Fingerprint)
	if h := r.Holder; h != nil && own {
		row(true, "host", printable(h.Host))
		row(true, "pid", h.pid())
		row(true, "user", printable(h.User))
		row(h.Cmd != "", "command", printable(h.Cmd))
		row(true, "started", h.started())
		row(true, "by", printable(h.By)+", "+printable(h.Via))
	}
	row(r.Metadata != "" && own, "metadata", strconv.Quote(r.Metadata))
	row(r.Permits > 0, "permits", strconv.Itoa(r.Permits))
	row(r.Fence != 0, "fence", strconv.FormatInt(r.Fence, 10))
	row(r.Waiters > 0 || !own, "waiters", strconv.Itoa(r.Waiters))
	if r.Expiry != nil {
		row(true, "expiry", fmt.Sprintf("%s (%s)", r.Expiry.Format(stamp), relative(r.Expiry.Sub(r.now))))
		row(true, "takeover", map[bool]string{true: "possible now", false: "not yet"}[*r.Takeover])
	}
	row(r.Error != "", "error", r.Error)
	if len(r.Holders) > 0 {
		r.holdersTable(tw)
	}
	if len(r.Nodes) > 0 {
		broken := r.Nodes[0].Broken != nil // break's report
		fmt.Fprintf(tw, "\nNODE\tHELD\tTTL\tFINGERPRINT\t")
		if broken {
			fmt.Fprintf(tw, "BROKEN\t")
		}
		fmt.Fprintf(tw, "ERROR\n")
		for _, n := range r.Nodes {
			ttl, fp := "-", "-"
			if n.Held {
				ttl, fp = ttlString(time.Duration(n.TTL)*time.Millisecond), n.Fingerprint
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", n.Node, yesNo(n.Held), ttl, fp)
			if broken {
				fmt.Fprintf(tw, "%s\t", yesNo(*n.Broken))
			}
			fmt.Fprintf(tw, "%s\n", n.Error)
		}
	}
	return tw.Flush()
}

// holdersTable writes a row per holder of a shared lock to tw, under a
// header: its permit (a semaphore's) or side (a read-write lock's), its
// fingerprint and TTL, and who it is, from locksmith's metadata ("-" where
// there is none), and any other client's metadata, quoted.
func (r lockReport) holdersTable(tw io.Writer) {
	raw := slices.ContainsFunc(r.Holders, func(h sharedHolderReport) bool { return h.Metadata != "" })
	first := "SIDE"
	if r.Permits > 0 {
		first = "PERMIT"
	}
	fmt.Fprintf(tw, "\n%s\tFINGERPRINT\tTTL\tHOST\tPID\tUSER\tCOMMAND\tSTARTED", first)
	if raw {
		fmt.Fprintf(tw, "\tMETADATA")
	}
	fmt.Fprintln(tw)
	for _, h := range r.Holders {
		which := h.Side
		if h.Permit != nil {
			which = strconv.Itoa(*h.Permit)
		}
		who := []string{"-", "-", "-", "-", "-"}
		if l := h.Holder; l != nil {
			who = []string{printable(l.Host), l.pid(), printable(l.User), printable(cmp.Or(l.Cmd, "-")), l.started()}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s", which, h.Fingerprint, ttlString(time.Duration(h.TTL)*time.Millisecond), strings.Join(who, "\t"))
		switch {
		case raw && h.Metadata != "":
			fmt.Fprintf(tw, "\t%s", strconv.Quote(h.Metadata))
		case raw:
			fmt.Fprintf(tw, "\t-")
		}
		fmt.Fprintln(tw)
	}
}

// pid writes the holder's pid for people.
func (h holderReport) pid() string {
	if h.Via == "acquire" {
		return strconv.Itoa(h.PID) + " (acquire's caller)"
	}
	return strconv.Itoa(h.PID)
}

// started writes when the holder started, and how long ago, for people.
func (h holderReport) started() string {
	return fmt.Sprintf("%s (%s ago)", h.Start.Format(stamp), ttlString(time.Duration(h.Age)*time.Millisecond))
}

// yesNo writes b for people.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// ttlString writes a TTL for people: to the millisecond, "no expiry" when
// negative.
func ttlString(d time.Duration) string {
	if d < 0 {
		return "no expiry"
	}
	return d.Round(time.Millisecond).String()
}

// relative writes d, from now, as "in 3s" or "3s ago".
func relative(d time.Duration) string {
	if d < 0 {
		return ttlString(-d) + " ago"
	}
	return "in " + ttlString(d)
}

// printable returns s as it is when every character prints, and quoted
// otherwise, so that metadata from Redis cannot send control sequences to
// the terminal.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
