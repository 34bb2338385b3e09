package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// handleEnv is the variable that refresh and release read the handle from,
// unless --handle-file names a file.
const handleEnv = "LOCKSMITH_HANDLE"

// plumbingHelp is what the help of acquire, refresh and release says of all
// three.
const plumbingHelp = `
acquire, refresh and release are plumbing for scripts and systemd units that
take a lock in one step and give it back in another (ExecStartPre= and
ExecStopPost=). NOTHING REFRESHES THE LEASE BETWEEN THESE CALLS: the lock
expires at the end of its TTL unless the script calls refresh in time, and
then the job runs on without it, unaware. locksmith run is the safe form: it
refreshes the lease, and stops the command when the lock is lost.

The handle that acquire prints holds the lock's token: it is a secret, as
good as the lock, so it never goes on a command line: every user can read
other processes' arguments in /proc, while a process's environment and a
0600 file are its owner's. refresh and release read it from the file
--handle-file names ("-" for stdin), or else from $LOCKSMITH_HANDLE; acquire
writes it to --handle-file (mode 0600), or else to stdout. In a systemd
unit:

  ExecStartPre=locksmith acquire -w 5m --ttl 1h --handle-file /run/backup.lock backup
  ExecStopPost=locksmith release --handle-file /run/backup.lock backup

In a shell script:

  h=$(locksmith acquire -w 1m backup) || exit
  ...
  LOCKSMITH_HANDLE=$h locksmith refresh backup
  ...
  LOCKSMITH_HANDLE=$h locksmith release backup

(h is not exported, so the job's commands do not inherit it.)
`

// plumbingExits are the exit codes of refresh and release.
const plumbingExits = `
Exit codes: 0 done; 79 the lock is no longer held under this handle (it
expired, or was broken, and may have passed to another holder); 69 Redis
unavailable (the lock may or may not still be held: count it as lost); 64
usage (no handle, or a malformed one); 78 configuration.`

func (a *app) acquireCommand() *cobra.Command {
	var (
		ttl        time.Duration
		noWait     bool
		wait       time.Duration
		handleFile string
	)
	cmd := &cobra.Command{
		Use:   "acquire NAME [NAME...] [--ttl DUR] [-n | -w DUR] [--handle-file FILE]",
		Short: "Obtain a lock and print its handle, for scripts (nothing refreshes it)",
		Long: `acquire obtains the lock NAME for --ttl (default: the configured TTL, 30s
unless the URL's ttl says otherwise), with the holder's metadata (host, the pid
of acquire's caller, user, start time: inspect shows them) and a fencing token where the strategy
issues one, and prints the lock's handle, which refresh and release take
back. With -n it fails at once when the lock is busy; with -w DUR it waits
at most DUR; with neither, it waits until the lock is free. With --json it
prints {"handle", "fingerprint", "fence", "ttl_ms"} instead (handle left out
when --handle-file has it).

Several NAMEs are one lock of them all, as with run: acquire obtains every
one or none, in sorted order. The handle records the NAMEs, and refresh and
release take the same ones, in any order. With --json, "locks" lists them,
sorted, "fence" is the first one's fencing token, and "fences" gives each
one's.

The setnx-getset strategy cannot hand a lock from one process to the next
(its value is a timestamp, not a token): acquire refuses it.
` + plumbingHelp + `
Exit codes: 0 obtained; 75 not obtained: another owner held it (busy with
-n, or -w ran out); 69 Redis unavailable, or it did not answer (within -w,
or read_timeout with -n); 64 usage (also: a strategy that cannot hand a
lock over, or a NAME that is a semaphore's or a read-write lock's: take a
permit with locksmith run --permits); 78 configuration; 128+N interrupted
by signal N while waiting.`,
		Args: args(1, math.MaxInt),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := positive(cmd, "ttl", ttl); err != nil {
				return err
			}
			if err := positive(cmd, "wait", wait); err != nil {
				return err
			}
			if noWait && wait > 0 {
				return exit(exitUsage, errors.New("acquire: -n and -w exclude each other"))
			}
			names, err := lockNames("acquire", args)
			if err != nil {
				return err
			}
			return a.acquire(cmd.Context(), names, ttl, noWait, wait, handleFile)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", 0, "`DUR` of the lease: how long the lock lives unless refreshed (default: the configured TTL)")
	f.BoolVarP(&noWait, "no-wait", "n", false, "fail at once when the lock is busy")
	f.DurationVarP(&wait, "wait", "w", 0, "wait at most `DUR` for the lock (default: until it is free)")
	f.StringVar(&handleFile, "handle-file", "", "write the handle to `FILE`, mode 0600, instead of stdout")
	return cmd
}

// acquire obtains the lock of names (see lockNames), for ttl (0: the
// configured TTL), and hands its handle out.
func (a *app) acquire(ctx context.Context, names []string, ttl time.Duration, noWait bool, wait time.Duration, handleFile string) error {
	name := subject(names)
	l, closeLocker, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer closeLocker()
	ttl = cmp.Or(ttl, l.cfg.TTL)
	token, err := lock.NewToken()
	if err != nil {
		return exit(exitInternal, err)
	}
	interrupted := ctx // ended by a signal: see app.interruptible
	retry, limit := waiting(l.cfg, noWait, wait)
	opts := append([]lock.Option{lock.WithToken(token)}, retry...)
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	a.logf("acquire %s: obtaining it for %v", name, ttl)
	h := me("acquire", "")
	h.PID = os.Getppid() // acquire exits at once: the holder is its caller
	lk, err := l.obtain(ctx, names, ttl, h, opts...)
	var arg *lock.ArgumentError
	switch {
	case errors.As(err, &arg) && arg.Name == "token":
		return exit(exitUsage, fmt.Errorf("acquire: the %s strategy cannot hand a lock from one process to the next "+
			"(%s): use locksmith run", l.cfg.Strategy, arg.Reason))
	case errors.Is(err, lock.ErrMismatch):
		return exit(exitUsage, fmt.Errorf("acquire %s: %w: acquire takes plain locks; take a semaphore's permit with locksmith run --permits, "+
			"or give another NAME", name, err))
	case errors.Is(err, lock.ErrNotObtained):
		return exit(exitNotObtained, notObtained(label(names), names, false, noWait, wait, err))
	case err != nil:
		return fmt.Errorf("acquire %s: %w", name, err)
	}
	handle := lockHandle{token, lk.Metadata(), several(names)}.String()
	out := struct {
		Handle      string   `json:"handle,omitempty"`
		Locks       []string `json:"locks,omitempty"`
		Fingerprint string   `json:"fingerprint"`
		Fence       int64    `json:"fence,omitempty"`
		Fences      fences   `json:"fences,omitempty"`
		TTL         int64    `json:"ttl_ms"`
	}{Locks: several(names), Fingerprint: strategy.Fingerprint(token), Fences: fencesOf(lk), TTL: ttl.Milliseconds()}
	out.Fence, _ = lk.Fence()
	if handleFile != "" {
		err = writeHandle(handleFile, handle)
	} else {
		out.Handle = handle
	}
	if err == nil && a.json {
		err = writeJSON(a.stdout, out)
	} else if err == nil && handleFile == "" {
		_, err = fmt.Fprintln(a.stdout, handle)
	}
	if err == nil && interrupted.Err() != nil {
		err = errors.New("interrupted") // locksmith exits 128+N: a failure to the script
	}
	if err != nil {
		// Nobody can refresh or release a lock whose handle was not handed
		// out, or whose caller takes it for not obtained: give it back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ReadTimeout)
		defer cancel()
		_ = lk.Release(rctx)
		return exit(exitInternal, fmt.Errorf("acquire %s: handing out the handle: %w (the lock was released)", name, err))
	}
	a.logf("acquire %s: obtained, fingerprint %s", name, out.Fingerprint)
	return nil
}

// positive checks that the duration flag name, if given, is positive.
func positive(cmd *cobra.Command, name string, d time.Duration) error {
	if cmd.Flags().Changed(name) && d <= 0 {
		return exit(exitUsage, fmt.Errorf("%s: --%s must be positive, got %v", cmd.Name(), name, d))
	}
	return nil
}

// writeHandle writes the handle h to the file name, readable by its owner
// only.
func writeHandle(name, h string) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600) // a file that existed keeps its mode otherwise
	if err == nil {
		_, err = fmt.Fprintln(f, h)
	}
	return errors.Join(err, f.Close())
}

// lockHandle is what refresh and release need of a lock that acquire
// obtained: its token and metadata (ownership is equality of the stored
// value, both), and the names of a lock of several. It reads
// <token>.<metadata in base64url>[.<the names' JSON array in base64url>].
type lockHandle struct {
	token, metadata string
	names           []string // a lock of several names, sorted; nil for one
}

// String returns the handle as acquire prints it.
func (h lockHandle) String() string {
	s := h.token + "." + base64.RawURLEncoding.EncodeToString([]byte(h.metadata))
	if h.names != nil {
		names, _ := json.Marshal(h.names)
		s += "." + base64.RawURLEncoding.EncodeToString(names)
	}
	return s
}

// errHandle is the error of a malformed handle. It never quotes the handle,
// which is a secret.
var errHandle = errors.New("the handle is malformed: want what locksmith acquire printed")

// decodeHandle reads the handle s.
func decodeHandle(s string) (lockHandle, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) < 2 || len(parts) > 3 || !strategy.IsToken(parts[0]) {
		return lockHandle{}, errHandle
	}
	m, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return lockHandle{}, errHandle
	}
	h := lockHandle{token: parts[0], metadata: string(m)}
	if len(parts) == 3 {
		b, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil || json.Unmarshal(b, &h.names) != nil || len(h.names) < 2 {
			return lockHandle{}, errHandle
		}
	}
	return h, nil
}

// match checks that names (see lockNames) are those of the lock of h: one,
// for a handle of one name (which does not record it), or the handle's.
func (h lockHandle) match(names []string) error {
	switch {
	case h.names == nil && len(names) > 1:
		return fmt.Errorf("the handle is of a lock of one NAME, got %d NAMEs %q", len(names), names)
	case h.names != nil && !slices.Equal(h.names, names):
		return fmt.Errorf("the handle is of %s, got %q: give the NAMEs that acquire was given", label(h.names), names)
	}
	return nil
}

// readHandle reads the handle from the file name ("-": stdin), or from
// $LOCKSMITH_HANDLE when name is empty.
func (a *app) readHandle(name string) (lockHandle, error) {
	var s string
	switch name {
	case "":
		s = os.Getenv(handleEnv)
		if s == "" {
			return lockHandle{}, exit(exitUsage, errors.New("no handle: set LOCKSMITH_HANDLE, or pass --handle-file FILE (- for stdin), to what locksmith acquire printed"))
		}
	case "-":
		b, err := io.ReadAll(io.LimitReader(a.stdin, 64<<10))
		if err != nil {
			return lockHandle{}, exit(exitUsage, fmt.Errorf("reading the handle from stdin: %w", err))
		}
		s = string(b)
	default:
		b, err := os.ReadFile(name)
		if err != nil {
			return lockHandle{}, exit(exitUsage, fmt.Errorf("reading the handle: %w", err))
		}
		s = string(b)
	}
	h, err := decodeHandle(s)
	if err != nil {
		return lockHandle{}, exit(exitUsage, err)
	}
	return h, nil
}

func (a *app) refreshCommand() *cobra.Command {
	var (
		ttl        time.Duration
		handleFile string
	)
	cmd := &cobra.Command{
		Use:   "refresh NAME [NAME...] [--ttl DUR] [--handle-file FILE]",
		Short: "Extend the lease of a lock that acquire obtained, for scripts",
		Long: `refresh resets the TTL of the lock NAME to --ttl (default: the configured TTL),
if it is still held under the handle that acquire printed. It obtains the
lock again with the handle's token and metadata, which extends it when its
holder is the handle's, and never takes it from another holder; a lock that
expired is not taken again (79). A lock of several NAMEs (give those that
acquire was given, in any order) is refreshed all or none: when one of them
is no longer held under the handle, none is extended (79).
` + plumbingHelp + plumbingExits,
		Args: args(1, math.MaxInt),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := positive(cmd, "ttl", ttl); err != nil {
				return err
			}
			return a.handOver(cmd.Context(), "refresh", args, ttl, handleFile)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", 0, "`DUR` of the new lease (default: the configured TTL)")
	f.StringVar(&handleFile, "handle-file", "", "read the handle from `FILE` (- for stdin) instead of $LOCKSMITH_HANDLE")
	return cmd
}

func (a *app) releaseCommand() *cobra.Command {
	var handleFile string
	cmd := &cobra.Command{
		Use:   "release NAME [NAME...] [--handle-file FILE]",
		Short: "Release a lock that acquire obtained, for scripts",
		Long: `release deletes the lock NAME, if it is still held under the handle that
acquire printed, and wakes the next waiter: a compare-and-delete, as
break --fingerprint does, which never deletes another holder's lock. Of a
lock of several NAMEs (give those that acquire was given, in any order), it
deletes each one still held under the handle, and names the others (79).
` + plumbingHelp + plumbingExits,
		Args: args(1, math.MaxInt),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.handOver(cmd.Context(), "release", args, 0, handleFile)
		},
	}
	cmd.Flags().StringVar(&handleFile, "handle-file", "", "read the handle from `FILE` (- for stdin) instead of $LOCKSMITH_HANDLE")
	return cmd
}

// handOver refreshes (op "refresh", for ttl, zero for the configured TTL)
// or releases (op "release") the lock of the NAMEs args, held under the
// handle that handleFile or $LOCKSMITH_HANDLE holds.
func (a *app) handOver(ctx context.Context, op string, args []string, ttl time.Duration, handleFile string) error {
	h, err := a.readHandle(handleFile)
	if err != nil {
		return err
	}
	names, err := lockNames(op, args)
	if err != nil {
		return err
	}
	if err := h.match(names); err != nil {
		return exit(exitUsage, fmt.Errorf("%s: %w", op, err))
	}
	l, ctx, done, err := a.openCall(ctx)
	if err != nil {
		return err
	}
	defer done()
	ttl = cmp.Or(ttl, l.cfg.TTL)
	var lost []*lock.KeyError
	if op == "release" {
		lost, err = release(ctx, l.locker, names, strategy.Fingerprint(h.token))
	} else {
		lost, err = refresh(ctx, l.locker, names, ttl, h)
	}
	switch {
	case err != nil:
		return err
	case lost != nil:
		return exit(exitLost, notHeldAnyMore(op, names, lost))
	}
	a.logf("%s %s: done", op, subject(names))
	return nil
}

// subject names the lock of names in the messages of acquire, refresh and
// release: NAME, or lock ["a" "b"] for several.
func subject(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return label(names)
}

// notHeldAnyMore is the error of op on the lock of names, which found the
// keys of lost gone (lock.ErrExpired) or taken (lock.ErrTaken).
func notHeldAnyMore(op string, names []string, lost []*lock.KeyError) error {
	whys := make([]string, len(lost))
	for i, ke := range lost {
		whys[i] = "another holder has it"
		if errors.Is(ke.Err, lock.ErrExpired) {
			whys[i] = "it expired, or was broken"
		}
		if len(names) > 1 {
			whys[i] = fmt.Sprintf("%q: %s", ke.Key, whys[i])
		}
	}
	return fmt.Errorf("%s %s: not held any more: %s", op, subject(names), strings.Join(whys, "; "))
}

// release deletes each lock of names that the token whose fingerprint is
// fingerprint holds, as its holder's Release would, and returns the errors
// of those it found gone or taken.
func release(ctx context.Context, l *lock.Locker, names []string, fingerprint string) ([]*lock.KeyError, error) {
	var lost []*lock.KeyError
	for _, name := range names {
		_, err := l.Break(ctx, name, fingerprint) // one compare-and-delete
		switch {
		case errors.Is(err, lock.ErrNotHeld):
			lost = append(lost, &lock.KeyError{Key: name, Err: err})
		case err != nil:
			return nil, err
		}
	}
	return lost, nil
}

// refresh resets the TTL of the lock of names to ttl if the handle h holds
// every one, checked first so that a lock that expired is not taken again,
// by obtaining it with the handle's token and metadata; otherwise it
// refreshes none, and returns the errors of the keys that h does not hold.
func refresh(ctx context.Context, l *lock.Locker, names []string, ttl time.Duration, h lockHandle) ([]*lock.KeyError, error) {
	var lost []*lock.KeyError
	for _, name := range names {
		st, err := l.Inspect(ctx, name)
		switch {
		case err != nil:
			return nil, err
		case !st.Held:
			lost = append(lost, &lock.KeyError{Key: name, Err: lock.ErrExpired})
		case st.Fingerprint != strategy.Fingerprint(h.token):
			lost = append(lost, &lock.KeyError{Key: name, Err: lock.ErrTaken})
		}
	}
	if lost != nil {
		return lost, nil
	}
	_, err := l.ObtainMany(ctx, names, ttl, lock.WithToken(h.token), lock.WithMetadata(h.metadata), lock.WithRetry(lock.NoRetry()))
	if errors.Is(err, lock.ErrNotObtained) {
		taken := &lock.KeyError{Key: names[0], Err: lock.ErrTaken}
		if ke := (*lock.KeyError)(nil); errors.As(err, &ke) {
			taken.Key = ke.Key
		}
		return []*lock.KeyError{taken}, nil
	}
	return nil, err
}
