package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/config"
)

// holder is the metadata locksmith stores with a lock it takes
// (lock.WithMetadata, after the token in the key's value), so that inspect
// and break can say who holds it and since when. It is JSON, compact.
type holder struct {
	Host  string    `json:"host,omitempty"`
	PID   int       `json:"pid,omitempty"`
	User  string    `json:"user,omitempty"`
	Cmd   string    `json:"cmd,omitempty"`  // the command's base name, never its arguments (they may hold secrets)
	Start time.Time `json:"start,omitzero"` // when the holder asked for the lock (it obtained it then, or after waiting)
	By    string    `json:"by,omitempty"`   // locksmith and its version
	Via   string    `json:"via,omitempty"`  // the subcommand: run or acquire
}

// me describes this process as a holder, running cmd (empty for acquire).
func me(via, cmd string) holder {
	h := holder{PID: os.Getpid(), Start: time.Now().UTC().Truncate(time.Millisecond), By: "locksmith " + version(), Via: via}
	h.Host, _ = os.Hostname()
	if u, err := user.Current(); err == nil {
		h.User = u.Username
	}
	if cmd != "" {
		h.Cmd = filepath.Base(cmd)
	}
	return h
}

func (h holder) String() string {
	b, _ := json.Marshal(h)
	return string(b)
}

// parseHolder reads metadata that locksmith wrote; ok is false for any other
// (another client's metadata, or none).
func parseHolder(metadata string) (h holder, ok bool) {
	if metadata == "" || metadata[0] != '{' {
		return holder{}, false
	}
	if err := json.Unmarshal([]byte(metadata), &h); err != nil || h.By == "" {
		return holder{}, false
	}
	return h, true
}

// version is locksmith's module version, as go install recorded it.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// waitPoll is how often a waiting run or acquire tries again when no
// release wakes it first: the safety-net timer of waiting by notification,
// and the delay between tries of wait=poll.
const waitPoll = 200 * time.Millisecond

// waiting returns how a run or acquire waits: the retry policy (none with
// -n, noWait; the configuration's own when it sets one; lock.Linear(waitPoll)
// otherwise), and the limit of the wait, 0 for none: -w's, or with -n one
// attempt's answer (the read timeout).
func waiting(c config.Config, noWait bool, wait time.Duration) (retry []lock.Option, limit time.Duration) {
	switch {
	case noWait:
		return []lock.Option{lock.WithRetry(lock.NoRetry())}, c.ReadTimeout
	case c.Retry != "" && c.Retry != "none":
		return nil, wait
	}
	return []lock.Option{lock.WithRetry(lock.Linear(waitPoll))}, wait
}

// obtain obtains the lock of names (see lockNames) for ttl with opts, and
// with the holder's metadata and a fencing token where the strategy takes
// them: one that refuses either (setnx-getset stores a timestamp, only
// single fences) does so before writing anything, with an
// *lock.ArgumentError naming it, and obtain asks again without it.
func (l opened) obtain(ctx context.Context, names []string, ttl time.Duration, h holder, opts ...lock.Option) (*lock.Lock, error) {
	if len(names) > 1 { // the cleanups' hooks see its first key only
		l.cleanups.mu.Lock()
		l.cleanups.key(names[0]).names = names
		l.cleanups.mu.Unlock()
	}
	fencing, metadata := true, true
	for {
		o := opts
		if fencing {
			o = append(o, lock.WithFencing())
		}
		if metadata {
			o = append(o, lock.WithMetadata(h.String()))
		}
		lk, err := l.locker.ObtainMany(ctx, names, ttl, o...)
		var arg *lock.ArgumentError
		switch {
		case err == nil || !errors.As(err, &arg):
			return lk, err
		case arg.Name == "fencing" && fencing:
			fencing = false
		case arg.Name == "metadata" && metadata:
			metadata = false
		default:
			return lk, err
		}
	}
}

// lockNames checks the NAMEs that cmd was given for one lock, and returns
// them in the order Locker.ObtainMany takes them: sorted, without
// duplicates.
func lockNames(cmd string, args []string) ([]string, error) {
	if slices.Contains(args, "") {
		return nil, exit(exitUsage, fmt.Errorf("%s: a lock's NAME must not be empty", cmd))
	}
	return slices.Compact(slices.Sorted(slices.Values(args))), nil
}

// label names the lock of names in messages: lock "a", or lock ["a" "b"]
// for a lock of several names.
func label(names []string) string {
	if len(names) == 1 {
		return fmt.Sprintf("lock %q", names[0])
	}
	return fmt.Sprintf("lock %q", names)
}

// several returns names when there are several, for the fields that only a
// lock of several names has ("locks"), and nil otherwise.
func several(names []string) []string {
	if len(names) < 2 {
		return nil
	}
	return names
}

// fences are the fencing tokens of a lock of several names, by name.
type fences map[string]int64

// String returns the fences as LOCKSMITH_FENCES has them: name=N, sorted by
// name, joined by spaces.
func (f fences) String() string {
	var s []string
	for _, name := range slices.Sorted(maps.Keys(f)) {
		s = append(s, fmt.Sprintf("%s=%d", name, f[name]))
	}
	return strings.Join(s, " ")
}

// fencesOf returns the fencing token of each of lk's keys, for a lock of
// several keys obtained with one; nil otherwise.
func fencesOf(lk *lock.Lock) fences {
	keys := lk.Keys()
	if len(keys) < 2 {
		return nil
	}
	f := fences{}
	for _, k := range keys {
		if n, ok := lk.FenceOf(k); ok {
			f[k] = n
		}
	}
	if len(f) == 0 {
		return nil
	}
	return f
}

// notObtained says why the lock that which labels, of names, was not
// obtained: another owner held it (of several names, the one err names),
// named as holderText names it, or every permit of the semaphore was held
// (full), and then, maybe, Redis did not answer. Run and acquire word it
// alike.
func notObtained(which string, names []string, full, noWait bool, wait time.Duration, err error) error {
	busy := "full"
	if !full {
		busy = "held by another owner"
		if held := (*lock.NotObtainedError)(nil); errors.As(err, &held) && held.Holder.Held {
			busy = "held by " + holderText(held.Holder)
		}
	}
	if ke := (*lock.KeyError)(nil); len(names) > 1 && errors.As(err, &ke) {
		which += fmt.Sprintf(": %q", ke.Key)
	}
	switch {
	case errors.Is(err, lock.ErrNoAnswer):
		return fmt.Errorf("%s was %s, then Redis did not answer: %w", which, busy, err)
	case noWait:
		return fmt.Errorf("%s is %s (-n: not waiting)", which, busy)
	case wait > 0 && errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s still %s after --wait %v", which, busy, wait)
	}
	return fmt.Errorf("%s not obtained: %w", which, err)
}

// holderText names the holder that st, a lock found held, read: by the
// metadata locksmith stores (its pid, host and command), or another
// client's metadata, or its fingerprint; then how long it has held the
// lock, and how many wait.
func holderText(st lock.State) string {
	who, held := printable(st.Metadata), st.HeldFor
	if h, ok := parseHolder(st.Metadata); ok {
		who = fmt.Sprintf("pid %d on %s", h.PID, h.Host)
		if h.Cmd != "" {
			who += fmt.Sprintf(" (%s %s)", h.Via, h.Cmd)
		} else if h.Via != "" {
			who += fmt.Sprintf(" (%s)", h.Via)
		}
		if held == 0 && !h.Start.IsZero() { // a lock that acquire handed on has no stamp
			held = time.Since(h.Start)
		}
	}
	if who == "" {
		who = "holder " + st.Fingerprint
	}
	if held > 0 {
		who += " for " + ttlString(held)
	}
	if st.Waiters > 0 {
		who += fmt.Sprintf(" (%d waiting)", st.Waiters)
	}
	return who
}
