package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
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
		Use:   "acquire NAME [--ttl DUR] [-n | -w DUR] [--handle-file FILE]",
		Short: "Obtain a lock and print its handle, for scripts (nothing refreshes it)",
		Long: `acquire obtains the lock NAME for --ttl (default: the configured TTL, 30s
unless the URL's ttl says otherwise), with the holder's metadata (host, the pid
of acquire's caller, user, start time: inspect shows them) and a fencing token where the strategy
issues one, and prints the lock's handle, which refresh and release take
back. With -n it fails at once when the lock is busy; with -w DUR it waits
at most DUR; with neither, it waits until the lock is free. With --json it
prints {"handle", "fingerprint", "fence", "ttl_ms"} instead (handle left out
when --handle-file has it).

The setnx-getset strategy cannot hand a lock from one process to the next
(its value is a timestamp, not a token): acquire refuses it.
` + plumbingHelp + `
Exit codes: 0 obtained; 75 not obtained: another owner held it (busy with
-n, or -w ran out); 69 Redis unavailable, or it did not answer (within -w,
or read_timeout with -n); 64 usage (also: a strategy that cannot hand a
lock over); 78 configuration; 128+N interrupted by signal N while waiting.`,
		Args: args(1, 1),
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
			return a.acquire(cmd.Context(), args[0], ttl, noWait, wait, handleFile)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", 0, "`DUR` of the lease: how long the lock lives unless refreshed (default: the configured TTL)")
	f.BoolVarP(&noWait, "no-wait", "n", false, "fail at once when the lock is busy")
	f.DurationVarP(&wait, "wait", "w", 0, "wait at most `DUR` for the lock (default: until it is free)")
	f.StringVar(&handleFile, "handle-file", "", "write the handle to `FILE`, mode 0600, instead of stdout")
	return cmd
}

// acquire obtains the lock on name and hands its handle out. A zero ttl is
// the configured TTL; noWait or a positive wait bound the wait.
func (a *app) acquire(ctx context.Context, name string, ttl time.Duration, noWait bool, wait time.Duration, handleFile string) error {
	l, closeLocker, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer closeLocker()
	if ttl == 0 {
		ttl = l.TTL()
	}
	token, err := lock.NewToken()
	if err != nil {
		return exit(exitInternal, err)
	}
	interrupted := ctx // ended by a signal: see app.interruptible
	opts := []lock.Option{lock.WithToken(token)}
	if retry := waitRetry(l.Config(), noWait); retry != nil {
		opts = append(opts, retry)
	}
	switch {
	case noWait:
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.ReadTimeout())
		defer cancel()
	case wait > 0:
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	a.logf("acquire %s: obtaining it for %v", name, ttl)
	h := me("acquire", "")
	h.PID = os.Getppid() // acquire exits at once: the holder is its caller
	lk, err := obtain(ctx, l, name, ttl, h, opts...)
	var arg *lock.ArgumentError
	switch {
	case errors.As(err, &arg) && arg.Name == "token":
		return exit(exitUsage, fmt.Errorf("acquire: the %s strategy cannot hand a lock from one process to the next "+
			"(%s): use locksmith run", l.Config().Strategy, arg.Reason))
	case err != nil:
		return unavailable(fmt.Errorf("acquire %s: %w", name, err))
	}
	handle := encodeHandle(token, lk.Metadata())
	out := struct {
		Handle      string `json:"handle,omitempty"`
		Fingerprint string `json:"fingerprint"`
		Fence       int64  `json:"fence,omitempty"`
		TTL         int64  `json:"ttl_ms"`
	}{Fingerprint: strategy.Fingerprint(token), TTL: ttl.Milliseconds()}
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
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ReadTimeout())
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

// A handle is what refresh and release need to act on a lock that acquire
// obtained: its token and its metadata, since the stored value is both,
// and ownership is equality of values. It reads <token>.<metadata in
// base64url>.

// encodeHandle returns the handle of a lock with token and metadata.
func encodeHandle(token, metadata string) string {
	return token + "." + base64.RawURLEncoding.EncodeToString([]byte(metadata))
}

// errHandle is the error of a malformed handle. It never quotes the handle,
// which is a secret.
var errHandle = errors.New("the handle is malformed: want what locksmith acquire printed")

// decodeHandle returns the token and metadata of handle h.
func decodeHandle(h string) (token, metadata string, err error) {
	token, m, ok := strings.Cut(strings.TrimSpace(h), ".")
	if !ok || !strategy.IsToken(token) {
		return "", "", errHandle
	}
	b, err := base64.RawURLEncoding.DecodeString(m)
	if err != nil {
		return "", "", errHandle
	}
	return token, string(b), nil
}

// readHandle reads the handle from the file name ("-": stdin), or from
// $LOCKSMITH_HANDLE when name is empty.
func (a *app) readHandle(name string) (token, metadata string, err error) {
	var h string
	switch name {
	case "":
		h = os.Getenv(handleEnv)
		if h == "" {
			return "", "", exit(exitUsage, errors.New("no handle: set LOCKSMITH_HANDLE, or pass --handle-file FILE (- for stdin), to what locksmith acquire printed"))
		}
	case "-":
		b, err := io.ReadAll(io.LimitReader(a.stdin, 64<<10))
		if err != nil {
			return "", "", exit(exitUsage, fmt.Errorf("reading the handle from stdin: %w", err))
		}
		h = string(b)
	default:
		b, err := os.ReadFile(name)
		if err != nil {
			return "", "", exit(exitUsage, fmt.Errorf("reading the handle: %w", err))
		}
		h = string(b)
	}
	token, metadata, err = decodeHandle(h)
	if err != nil {
		return "", "", exit(exitUsage, err)
	}
	return token, metadata, nil
}

func (a *app) refreshCommand() *cobra.Command {
	var (
		ttl        time.Duration
		handleFile string
	)
	cmd := &cobra.Command{
		Use:   "refresh NAME [--ttl DUR] [--handle-file FILE]",
		Short: "Extend the lease of a lock that acquire obtained, for scripts",
		Long: `refresh resets the TTL of the lock NAME to --ttl (default: the configured TTL),
if it is still held under the handle that acquire printed. It obtains the
lock again with the handle's token and metadata, which extends it when its
holder is the handle's, and never takes it from another holder; a lock that
expired is not taken again (79).
` + plumbingHelp + plumbingExits,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := positive(cmd, "ttl", ttl); err != nil {
				return err
			}
			return a.handOver(cmd.Context(), "refresh", args[0], ttl, handleFile)
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
		Use:   "release NAME [--handle-file FILE]",
		Short: "Release a lock that acquire obtained, for scripts",
		Long: `release deletes the lock NAME, if it is still held under the handle that
acquire printed, and wakes the next waiter: a compare-and-delete, as
break --fingerprint does, which never deletes another holder's lock.
` + plumbingHelp + plumbingExits,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.handOver(cmd.Context(), "release", args[0], 0, handleFile)
		},
	}
	cmd.Flags().StringVar(&handleFile, "handle-file", "", "read the handle from `FILE` (- for stdin) instead of $LOCKSMITH_HANDLE")
	return cmd
}

// handOver refreshes (op "refresh", for ttl, zero for the configured TTL)
// or releases (op "release") the lock on name, held under the handle that
// handleFile or $LOCKSMITH_HANDLE holds.
func (a *app) handOver(ctx context.Context, op, name string, ttl time.Duration, handleFile string) error {
	token, metadata, err := a.readHandle(handleFile)
	if err != nil {
		return err
	}
	l, ctx, done, err := a.openCall(ctx)
	if err != nil {
		return err
	}
	defer done()
	if ttl == 0 {
		ttl = l.TTL()
	}
	if op == "release" {
		// Break, by the token's fingerprint, deletes the lock as its
		// holder's release would, in one compare-and-delete.
		_, err = l.Break(ctx, name, strategy.Fingerprint(token))
	} else {
		err = refresh(ctx, l, name, ttl, token, metadata)
	}
	switch {
	case errors.Is(err, lock.ErrExpired):
		return exit(exitLost, fmt.Errorf("%s %s: not held any more: it expired, or was broken", op, name))
	case errors.Is(err, lock.ErrTaken):
		return exit(exitLost, fmt.Errorf("%s %s: not held any more: another holder has it", op, name))
	case err != nil:
		return unavailable(err)
	}
	a.logf("%s %s: done", op, name)
	return nil
}

// refresh resets the TTL of the lock on name to ttl, if token holds it: it
// checks that first, so that a lock that expired is not taken again, and
// then obtains the lock with the token and metadata, which resets the TTL
// of a lock that holds them, and takes nothing from another holder. Its
// errors match lock.ErrExpired or lock.ErrTaken when the token does not
// hold the lock.
func refresh(ctx context.Context, l lock.Locker, name string, ttl time.Duration, token, metadata string) error {
	st, err := l.Inspect(ctx, name)
	switch {
	case err != nil:
		return err
	case !st.Held:
		return lock.ErrExpired
	case st.Fingerprint != strategy.Fingerprint(token):
		return lock.ErrTaken
	}
	_, err = l.Obtain(ctx, name, ttl, lock.WithToken(token), lock.WithMetadata(metadata), lock.WithRetry(lock.NoRetry()))
	if errors.Is(err, lock.ErrNotObtained) {
		return lock.ErrTaken
	}
	return err
}
