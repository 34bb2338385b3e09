package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/glob"
	"github.com/locksmith-go/lock/internal/scan"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
)

// The verdicts of check-legacy, in --json's "verdict" too.
const (
	verdictClean        = "clean"
	verdictFound        = "legacy activity found"
	verdictInconclusive = "inconclusive"
	verdictUnavailable  = "unavailable"
)

const (
	// cmdTimeout bounds each command check-legacy sends.
	cmdTimeout = 5 * time.Second
	// scanGrace is how long the scan, which runs during the window, may go
	// on after the window ends.
	scanGrace = 10 * time.Second
	// scanCount is SCAN's COUNT: how many slots of the keyspace each call
	// walks.
	scanCount = 1000
	// maxTimestamp is the longest value the scan reads: longer values are
	// not timestamps (GETRANGE reads no more, so a large value costs
	// nothing).
	maxTimestamp = 32
	// A value is a legacy timestamp only if it reads as a time from
	// plausiblePast before now to plausibleFuture after: a counter or an
	// id that happens to be a number reads as 1970 or as centuries ahead.
	plausiblePast   = 5 * 365 * 24 * time.Hour
	plausibleFuture = 366 * 24 * time.Hour
)

// counted are the commands whose calls check-legacy counts: SETNX and
// GETSET, which legacy locks send, and, for context, the commands of the
// other locks.
var counted = []string{"setnx", "getset", "set", "eval", "evalsha"}

// legacyCheck is the settings of one check-legacy.
type legacyCheck struct {
	window    time.Duration
	prefix    string
	scanLimit int
}

func (a *app) checkLegacyCommand() *cobra.Command {
	var c legacyCheck
	cmd := &cobra.Command{
		Use:   "check-legacy [--window DUR] [--prefix P] [--scan-limit N] [--json]",
		Short: "Check whether anything still takes locks with SETNX/GETSET, before a migration",
		Long: `check-legacy tells, before a fleet moves off the legacy SETNX/GETSET locks
(from the setnx-getset strategy to single or redlock), whether anything still
takes locks that way. It watches every server of the configuration for
--window, and reads, only reads:

  - INFO commandstats, at the start and the end of the window: the calls of
    SETNX and GETSET in between (and, for context, of SET, EVAL, EVALSHA).
    This library never sends SETNX (it sends SET NX PX), so SETNX calls come
    from other clients. The counts are server-wide: another application's
    SETNX or GETSET counts too. The setnx-getset strategy sends GETSET when
    it takes over an expired lock.
  - CLIENT LIST, at the start and the end of the window: the clients whose
    last command was SETNX or GETSET, with their address, name and age.
  - SCAN MATCH <prefix>* of the configured database, during the window, up
    to --scan-limit keys: string keys whose value reads as a legacy
    timestamp (seconds, milliseconds or float seconds, within five years
    before now and a year after), with GETRANGE and PTTL. A timestamp with
    no TTL is a legacy lock, held or leaked; single never obtains a lock
    over it. A timestamp with a TTL (setnx-getset with a safety TTL) is
    listed, and is no legacy activity.

It never writes and never resets the counters (no CONFIG RESETSTAT). A user
with this ACL can run it:

  ACL SETUSER checker on >secret ~* +info +client|list +scan +getrange +pttl

The run takes the window, plus at most 30s when servers are slow.

Verdicts, each printed with its reasons:
  0   clean: no SETNX or GETSET call, no such client, no legacy timestamp
      without a TTL among the keys scanned
  1   legacy activity found
  3   inconclusive: a server denied a command (an ACL's NOPERM, or a managed
      service's unknown command), and nothing was found elsewhere
  69  unavailable: a server could not be reached (at the start, the check
      stops there, without waiting for the window)
  130 interrupted (Ctrl-C)

Caveats: a client that sends SETNX only outside the window is not seen; run
it for longer than the slowest legacy job's period. A client is attributed
only if its last command, at the start or the end of the window, was SETNX
or GETSET. Legacy clients that lock with other commands send no SETNX
(ServiceStack's WATCH/MULTI/SET, errorception/redis-lock 2014+'s SET NX PX):
the scan sees their timestamps while they hold a lock. A key of another
application that holds a timestamp is reported too: narrow the scan with
--prefix. The scan reads one database, and stops at --scan-limit keys, or
10s after the window, and says so.`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.checkLegacy(cmd.Context(), c) },
	}
	f := cmd.Flags()
	f.DurationVar(&c.window, "window", time.Minute, "how long to watch the counters: longer than the slowest legacy job's period")
	f.StringVar(&c.prefix, "prefix", "", "scan only the keys that start with this, such as lock. (default: every key)")
	f.IntVar(&c.scanLimit, "scan-limit", 10000, "stop the scan of each server after this many keys")
	return cmd
}

// checkLegacy runs check-legacy: it reads every server at the start, stops
// there if one is unreachable, and otherwise scans during the window and
// reads every server again at its end; then it prints the report.
func (a *app) checkLegacy(ctx context.Context, c legacyCheck) error {
	switch {
	case c.window <= 0:
		return exit(exitUsage, fmt.Errorf("check-legacy: --window %v: want a positive duration", c.window))
	case c.scanLimit < 1:
		return exit(exitUsage, fmt.Errorf("check-legacy: --scan-limit %d: want at least 1", c.scanLimit))
	}
	cfg, err := a.config()
	if err != nil {
		return err
	}
	conns, clients, err := config.OpenConns(cfg)
	if err != nil {
		return exit(exitConfig, err)
	}
	defer clients.Close()
	servers := make([]*serverReport, len(conns))
	for i, conn := range conns {
		servers[i] = &serverReport{Addr: driver.Addr(conn), Clients: []legacyClient{}, Keys: []legacyKey{}}
	}
	a.logf("reading INFO commandstats and CLIENT LIST on %d servers", len(conns))
	each(conns, func(i int, conn driver.Conn) { servers[i].read(ctx, conn) })
	if !slices.ContainsFunc(servers, (*serverReport).down) {
		end := time.Now().Add(c.window)
		a.logf("watching for %v, and scanning %q", c.window, c.prefix+"*")
		each(conns, func(i int, conn driver.Conn) {
			s := servers[i]
			s.scan(ctx, conn, c, end.Add(scanGrace))
			if s.down() {
				return
			}
			select {
			case <-time.After(time.Until(end)):
				s.read(ctx, conn)
			case <-ctx.Done():
			}
		})
	}
	if err := ctx.Err(); err != nil {
		return err // a signal: execute exits 128+N
	}
	r := report(servers, c)
	if a.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return exit(exitInternal, err)
		}
	} else {
		r.print(a.stdout)
	}
	return exit(r.code, nil)
}

// each runs f for every connection, at once, and waits for them all.
func each(conns []driver.Conn, f func(i int, conn driver.Conn)) {
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i, conn)
		}()
	}
	wg.Wait()
}

// legacyReport is check-legacy's report, as --json prints it.
type legacyReport struct {
	Verdict   string          `json:"verdict"` // clean, legacy activity found, inconclusive, unavailable
	Reasons   []string        `json:"reasons"` // why, one sentence each
	WindowMS  int64           `json:"window_ms"`
	Prefix    string          `json:"prefix"`
	ScanLimit int             `json:"scan_limit"`
	Servers   []*serverReport `json:"servers"`
	code      int             // the exit code of the verdict
}

// serverReport is what check-legacy found on one server.
type serverReport struct {
	Addr string `json:"addr"`
	// WindowMS is the time between the two reads of the counters.
	WindowMS int64 `json:"window_ms"`
	// Calls are the calls of each counted command in the window, rejected
	// ones included; absent if INFO was denied, or not read twice.
	Calls map[string]int64 `json:"calls,omitempty"`
	// Clients are the clients whose last command was SETNX or GETSET.
	Clients []legacyClient `json:"clients"`
	// Keys are the keys whose value is a legacy timestamp.
	Keys []legacyKey `json:"keys"`
	// Scanned is the number of keys the scan read; ScanStopped says why it
	// stopped before the end of the keyspace, if it did.
	Scanned     int    `json:"scanned"`
	ScanStopped string `json:"scan_stopped,omitempty"`
	// Denied are the commands the server refused, with its error.
	Denied map[string]string `json:"denied,omitempty"`
	// Unavailable is why the server could not be reached, if it could not.
	Unavailable string `json:"unavailable,omitempty"`

	stats map[string]int64 // the counters at the first read, until the second
	first time.Time        // when the first read's reply came
}

// legacyClient is a client whose last command was SETNX or GETSET, as
// CLIENT LIST shows it.
type legacyClient struct {
	ID   int64  `json:"id"`
	Addr string `json:"addr"`
	Name string `json:"name"`
	User string `json:"user,omitempty"`
	Lib  string `json:"lib,omitempty"` // lib-name, where the client reported it (Redis 7.2+)
	Age  int64  `json:"age_s"`
	Idle int64  `json:"idle_s"`
	Cmd  string `json:"cmd"`
}

// legacyKey is a key whose value is a legacy lock's expiry timestamp.
type legacyKey struct {
	Key    string    `json:"key"`
	Value  string    `json:"value"`
	Unit   string    `json:"unit"`   // seconds or milliseconds
	Expiry time.Time `json:"expiry"` // the value, read in Unit
	PTTLMS int64     `json:"pttl_ms"`
	NoTTL  bool      `json:"no_ttl"` // a legacy client's lock, held or leaked
}

// call sends a command to conn, bounded by cmdTimeout, and returns its
// reply as a T.
func call[T any](ctx context.Context, conn driver.Conn, args ...any) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	var v T
	r, err := driver.Do(ctx, conn, args...)
	if err != nil {
		return v, err
	}
	v, ok := r.(T)
	if !ok {
		return v, fmt.Errorf("got a reply of type %T, want %T", r, v)
	}
	return v, nil
}

// ok records the error of the command cmd, if any, and reports whether
// there was none. A command the server denied is noted, and the check goes
// on without it; any other error makes the server unavailable.
func (s *serverReport) ok(cmd string, err error) bool {
	switch {
	case err == nil:
		return true
	case denied(err):
		if s.Denied == nil {
			s.Denied = make(map[string]string)
		}
		s.Denied[cmd] = err.Error()
	case s.Unavailable == "":
		s.Unavailable = fmt.Sprintf("%s: %v", cmd, err)
	}
	return false
}

// down reports whether the server could not be reached.
func (s *serverReport) down() bool { return s.Unavailable != "" }

// denied reports whether err is a server's refusal of a command that the
// user may not run: an ACL's NOPERM, or the unknown command of a managed
// service that disables it.
func denied(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "unknown command") || strings.Contains(msg, "unknown subcommand")
}

// read reads the counters and the clients of the server: at the first call
// it keeps the counters, at the second it sets the calls in between.
func (s *serverReport) read(ctx context.Context, conn driver.Conn) {
	info, err := call[string](ctx, conn, "INFO", "commandstats")
	if s.ok("INFO commandstats", err) {
		stats := commandstats(info)
		if s.first.IsZero() {
			s.stats, s.first = stats, time.Now()
		} else if s.stats != nil {
			s.Calls = make(map[string]int64, len(counted))
			for _, cmd := range counted {
				s.Calls[cmd] = stats[cmd] - s.stats[cmd]
				if s.Calls[cmd] < 0 { // reset during the window (a restart, CONFIG RESETSTAT): counts since
					s.Calls[cmd] = stats[cmd]
				}
			}
			s.WindowMS = time.Since(s.first).Milliseconds()
		}
	}
	if s.down() {
		return
	}
	list, err := call[string](ctx, conn, "CLIENT", "LIST")
	if s.ok("CLIENT LIST", err) {
		for _, c := range legacyClients(list) {
			i := slices.IndexFunc(s.Clients, func(e legacyClient) bool { return e.ID == c.ID })
			if i < 0 {
				s.Clients = append(s.Clients, c)
			} else {
				s.Clients[i] = c // as the end of the window shows it
			}
		}
	}
}

// commandstats reads the calls of the counted commands from the reply of
// INFO commandstats, whose lines read
//
//	cmdstat_setnx:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0
//
// Rejected calls (refused before they ran, such as by an ACL) count: the
// client sent them. A command never called has no line: zero calls.
func commandstats(info string) map[string]int64 {
	stats := make(map[string]int64, len(counted))
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_")), ":")
		if !ok || !slices.Contains(counted, name) {
			continue
		}
		for field := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(field, "=")
			if k == "calls" || k == "rejected_calls" {
				n, _ := strconv.ParseInt(v, 10, 64)
				stats[name] += n
			}
		}
	}
	return stats
}

// legacyClients returns the clients of a CLIENT LIST reply, one a line of
// key=value fields, whose last command was SETNX or GETSET.
func legacyClients(list string) []legacyClient {
	var out []legacyClient
	for line := range strings.Lines(list) {
		f := make(map[string]string)
		for field := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(field, "=")
			f[k] = v
		}
		if f["cmd"] != "setnx" && f["cmd"] != "getset" {
			continue
		}
		c := legacyClient{Addr: f["addr"], Name: f["name"], User: f["user"], Lib: f["lib-name"], Cmd: f["cmd"]}
		c.ID, _ = strconv.ParseInt(f["id"], 10, 64)
		c.Age, _ = strconv.ParseInt(f["age"], 10, 64)
		c.Idle, _ = strconv.ParseInt(f["idle"], 10, 64)
		out = append(out, c)
	}
	return out
}

// scan walks the keys that start with the prefix, until the end of the
// keyspace, the scan limit or deadline, and keeps those whose value is a
// legacy timestamp.
func (s *serverReport) scan(ctx context.Context, conn driver.Conn, c legacyCheck, deadline time.Time) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	cmd, err := s.walk(ctx, conn, c)
	switch {
	case err == nil:
	case ctx.Err() == context.DeadlineExceeded:
		s.ScanStopped = fmt.Sprintf("out of time, %v after the window", scanGrace)
	default:
		s.ok(cmd, err)
	}
}

// walk is scan's loop. It returns the command that failed, with its error.
func (s *serverReport) walk(ctx context.Context, conn driver.Conn, c legacyCheck) (cmd string, err error) {
	match := glob.Escape(c.prefix) + "*"
	for cursor := "0"; ; {
		next, keys, err := page(ctx, conn, cursor, match)
		if err != nil {
			return "SCAN", err
		}
		for _, key := range keys {
			if s.Scanned == c.scanLimit {
				s.ScanStopped = fmt.Sprintf("at --scan-limit %d keys", c.scanLimit)
				return "", nil
			}
			s.Scanned++
			if cmd, err := s.readKey(ctx, conn, key); err != nil {
				return cmd, err
			}
		}
		if cursor = next; cursor == "0" {
			return "", nil
		}
	}
}

// page sends one SCAN of walk's, within cmdTimeout.
func page(ctx context.Context, conn driver.Conn, cursor, match string) (next string, keys []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	return scan.Page(ctx, conn, cursor, match, scanCount)
}

// readKey keeps key if its value is a legacy timestamp. It returns the
// command that failed, with its error.
func (s *serverReport) readKey(ctx context.Context, conn driver.Conn, key string) (cmd string, err error) {
	// GETRANGE reads no more than a timestamp's length of a large value,
	// and refuses other types than strings.
	value, err := call[string](ctx, conn, "GETRANGE", key, 0, maxTimestamp)
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return "", nil
	case err != nil:
		return "GETRANGE", err
	}
	unit, expiry, ok := legacyTimestamp(value, time.Now())
	if len(value) > maxTimestamp || !ok {
		return "", nil
	}
	pttl, err := call[int64](ctx, conn, "PTTL", key)
	if err != nil {
		return "PTTL", err
	}
	if pttl != -2 { // -2: deleted since
		s.Keys = append(s.Keys, legacyKey{Key: key, Value: value, Unit: unit, Expiry: expiry.UTC(), PTTLMS: pttl, NoTTL: pttl == -1})
	}
	return "", nil
}

// legacyTimestamp reads value as a legacy lock's expiry timestamp, in
// milliseconds or in (integer or float) seconds, with the formats of package
// setnxgetset, and reports ok if it reads as a time around now.
func legacyTimestamp(value string, now time.Time) (unit string, expiry time.Time, ok bool) {
	for _, f := range []setnxgetset.Format{setnxgetset.Milliseconds, setnxgetset.Seconds} {
		t, ok := f.Decode(value)
		if ok && t.After(now.Add(-plausiblePast)) && t.Before(now.Add(plausibleFuture)) {
			return fmt.Sprint(f), t, true
		}
	}
	return "", time.Time{}, false
}

// report judges what the check found on servers.
func report(servers []*serverReport, c legacyCheck) legacyReport {
	r := legacyReport{WindowMS: c.window.Milliseconds(), Prefix: c.prefix, ScanLimit: c.scanLimit, Servers: servers}
	var found, down, denied, notes []string
	scanned := 0
	for _, s := range servers {
		scanned += s.Scanned
		if s.down() {
			down = append(down, fmt.Sprintf("%s could not be reached: %s", s.Addr, s.Unavailable))
		}
		for _, cmd := range slices.Sorted(maps.Keys(s.Denied)) {
			denied = append(denied, fmt.Sprintf("%s denied %s (%s)", s.Addr, cmd, s.Denied[cmd]))
		}
		if n, m := s.Calls["setnx"], s.Calls["getset"]; n+m > 0 {
			found = append(found, fmt.Sprintf("%s served %d SETNX and %d GETSET calls in %v (the counts are server-wide: another application's calls count too; setnx-getset sends GETSET to take over an expired lock)",
				s.Addr, n, m, ms(s.WindowMS)))
		}
		for _, cl := range s.Clients {
			found = append(found, fmt.Sprintf("%s: client %s last sent %s", s.Addr, cl, strings.ToUpper(cl.Cmd)))
		}
		for _, k := range s.Keys {
			if k.NoTTL {
				found = append(found, fmt.Sprintf("%s: key %q holds a legacy timestamp (%s) and no TTL: a legacy lock, %s", s.Addr, k.Key, k.Unit, k.state()))
			}
		}
		if s.ScanStopped != "" {
			notes = append(notes, fmt.Sprintf("the scan of %s stopped %s: keys beyond were not read", s.Addr, s.ScanStopped))
		}
	}
	switch {
	case len(found) > 0:
		r.Verdict, r.Reasons, r.code = verdictFound, found, exitLegacyFound
	case len(down) > 0:
		r.Verdict, r.Reasons, r.code = verdictUnavailable, down, exitUnavailable
	case len(denied) > 0:
		r.Verdict, r.Reasons, r.code = verdictInconclusive, denied, exitInconclusive
	default:
		on := "1 server"
		if len(servers) != 1 {
			on = fmt.Sprintf("%d servers", len(servers))
		}
		r.Verdict = verdictClean
		r.Reasons = []string{fmt.Sprintf("no SETNX or GETSET call in %v, no client whose last command was one, and no legacy timestamp without a TTL among the %d keys scanned, on %s",
			c.window, scanned, on)}
	}
	r.Reasons = append(r.Reasons, notes...)
	return r
}

// print prints the report for people: what each server showed, then the
// verdict and its reasons.
func (r legacyReport) print(w io.Writer) {
	for _, s := range r.Servers {
		if s.Calls != nil {
			fmt.Fprintf(w, "%s: in %v: %d SETNX, %d GETSET (and %d SET, %d EVAL, %d EVALSHA)\n",
				s.Addr, ms(s.WindowMS), s.Calls["setnx"], s.Calls["getset"], s.Calls["set"], s.Calls["eval"], s.Calls["evalsha"])
		}
		for _, c := range s.Clients {
			fmt.Fprintf(w, "%s: client %s age=%ds idle=%ds cmd=%s\n", s.Addr, c, c.Age, c.Idle, c.Cmd)
		}
		for _, k := range s.Keys {
			ttl := "no TTL"
			if !k.NoTTL {
				ttl = fmt.Sprintf("PTTL %v", ms(k.PTTLMS))
			}
			fmt.Fprintf(w, "%s: key %q = %s: legacy timestamp in %s, %s, %s\n", s.Addr, k.Key, k.Value, k.Unit, k.state(), ttl)
		}
		for _, cmd := range slices.Sorted(maps.Keys(s.Denied)) {
			fmt.Fprintf(w, "%s: denied %s: %s\n", s.Addr, cmd, s.Denied[cmd])
		}
		if s.down() {
			fmt.Fprintf(w, "%s: unreachable: %s\n", s.Addr, s.Unavailable)
		} else {
			fmt.Fprintf(w, "%s: scanned %d keys matching %q\n", s.Addr, s.Scanned, r.Prefix+"*")
		}
	}
	fmt.Fprintf(w, "%s:\n", r.Verdict)
	for _, reason := range r.Reasons {
		fmt.Fprintf(w, "  %s\n", reason)
	}
}

func (c legacyClient) String() string {
	s := fmt.Sprintf("id=%d addr=%s", c.ID, c.Addr)
	for _, f := range [][2]string{{"name", c.Name}, {"user", c.User}, {"lib", c.Lib}} {
		if f[1] != "" {
			s += " " + f[0] + "=" + f[1]
		}
	}
	return s
}

// state says whether the lock's timestamp passed.
func (k legacyKey) state() string {
	if d := time.Until(k.Expiry).Round(time.Second); d > 0 {
		return fmt.Sprintf("held until %s (in %v)", k.Expiry.Format(time.RFC3339), d)
	}
	return fmt.Sprintf("expired at %s (leaked)", k.Expiry.Format(time.RFC3339))
}

// ms returns n milliseconds as a duration, rounded for people.
func ms(n int64) time.Duration {
	return (time.Duration(n) * time.Millisecond).Round(100 * time.Millisecond)
}
