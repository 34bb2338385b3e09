package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
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

With --json it prints one JSON object:
  name          the lock's name
  held          true when an owner holds it (under redlock: a quorum)
  verdict       the state in a few words, such as "held on 2 of 3 nodes (quorum 2)"
  ttl_ms        the remaining time to live in ms: -1 for none, 0 when free
  fingerprint   the holder's token fingerprint, when held
  holder        the metadata of a locksmith holder: host, pid, user, cmd,
                start (RFC 3339), by (locksmith's version), via (run or
                acquire), age_ms
  metadata      another client's metadata, raw
  fence         the last fencing token issued for the lock, when any
  waiters       how many waiters the lock's queue holds (0 without a queue)
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
		st, err := l.Inspect(ctx, name)
		if err != nil && st.Nodes == nil {
			return unavailable(err)
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
	Name        string        `json:"name"`
	Held        bool          `json:"held"`
	Verdict     string        `json:"verdict"`
	TTL         int64         `json:"ttl_ms"`
	Fingerprint string        `json:"fingerprint,omitempty"`
	Holder      *holderReport `json:"holder,omitempty"`
	Metadata    string        `json:"metadata,omitempty"`
	Fence       int64         `json:"fence,omitempty"`
	Waiters     int           `json:"waiters"`
	Expiry      *time.Time    `json:"expiry,omitempty"`
	Takeover    *bool         `json:"takeover,omitempty"`
	Nodes       []nodeReport  `json:"nodes,omitempty"`
	Error       string        `json:"error,omitempty"`
	now         time.Time     // when the state was read, for the ages
	extra       [][2]string   // rows break adds to the table, after the state
}

// holderReport is the metadata of a holder that locksmith started, with
// its age.
type holderReport struct {
	holder
	Age int64 `json:"age_ms"`
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
		now: time.Now(),
	}
	if h, ok := parseHolder(st.Metadata); ok {
		r.Holder = &holderReport{h, r.now.Sub(h.Start).Milliseconds()}
	} else {
		r.Metadata = st.Metadata
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
	row := func(name, value string) { fmt.Fprintf(tw, "%s\t%s\n", name, value) }
	row("lock", printable(r.Name))
	row("state", r.Verdict)
	for _, e := range r.extra {
		row(e[0], e[1])
	}
	if r.Held {
		row("ttl", ttlString(time.Duration(r.TTL)*time.Millisecond))
		row("fingerprint", r.Fingerprint)
	}
	if h := r.Holder; h != nil {
		row("host", printable(h.Host))
		if h.Via == "acquire" {
			row("pid", strconv.Itoa(h.PID)+" (acquire's caller)")
		} else {
			row("pid", strconv.Itoa(h.PID))
		}
		row("user", printable(h.User))
		if h.Cmd != "" {
			row("command", printable(h.Cmd))
		}
		row("started", fmt.Sprintf("%s (%s ago)", h.Start.Format(stamp), ttlString(time.Duration(h.Age)*time.Millisecond)))
		row("by", printable(h.By)+", "+printable(h.Via))
	}
	if r.Metadata != "" {
		row("metadata", strconv.Quote(r.Metadata))
	}
	if r.Fence != 0 {
		row("fence", strconv.FormatInt(r.Fence, 10))
	}
	if r.Waiters > 0 {
		row("waiters", strconv.Itoa(r.Waiters))
	}
	if r.Expiry != nil {
		row("expiry", fmt.Sprintf("%s (%s)", r.Expiry.Format(stamp), relative(r.Expiry.Sub(r.now))))
		row("takeover", map[bool]string{true: "possible now", false: "not yet"}[*r.Takeover])
	}
	if r.Error != "" {
		row("error", r.Error)
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
