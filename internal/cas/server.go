package cas

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// Server is one server's operations: the scripts over Conn, or, when plain
// is set, the same operations without scripts. A strategy that runs either
// way, per Locker or per node, keeps one Server per server, so that what
// plain detects is a server's own. A Server from [Detecting] runs the
// scripts where the server runs them, and the operations without scripts
// where it refuses them.
type Server struct {
	Conn    driver.Conn
	plain   *plain // nil: scripts
	auto    *auto  // with plain nil: the Server detects whether the server refuses scripts; nil: it never does
	unmarks bool   // never read the marks of Breaks (see Unmarked)
}

// Unmarked returns the Server that never reads the marks of Breaks (see
// MarkBroken), for a strategy whose values are not unique to a holder
// (legacy timestamps): a mark would name every holder of the same value.
func (s Server) Unmarked() Server {
	s.unmarks = true
	return s
}

// auto is what a Server from Detecting found its server to do with
// scripts, and what it runs where the server refuses them.
type auto struct {
	scripts *support                // ran one (1), or refused them (until when)
	refusal *atomic.Pointer[string] // what the last refusal said (see refusal)
	plain   *plain                  // the operations without scripts; nil when the driver cannot run them
	why     error                   // why plain is nil
}

// NewServer returns the Server of c, without scripts when scriptless is
// true (the strategies pass driver.ScriptsOff of the Conn they were
// given). Without scripts, it needs commands of c's choice
// (driver.Commander) over one connection, for a transaction's length, and
// returns an *strategy.ArgumentError named name, with driver.Pinnable's
// error, when c cannot. On a Cluster, a transaction pins the connection of
// its key's master, and keeps to that key's slot.
func NewServer(name string, c driver.Conn, scriptless bool) (Server, error) {
	if !scriptless {
		return Server{Conn: c}, nil
	}
	p, err := newPlain(c)
	if err != nil {
		return Server{}, &strategy.ArgumentError{Name: name, Reason: "driver.WithoutScripts runs transactions over one connection, which it cannot: " + err.Error()}
	}
	return Server{Conn: c, plain: p}, nil
}

// Detecting returns the Server of c that runs the scripts where the server
// runs them, and the operations without scripts (NewServer's without scripts)
// where it refuses them: where a script's error is such a refusal (see
// [Server.Refuses]), the operation runs again without scripts, and so do
// the operations after it, for reprobe; then scripts are tried again.
// Until a script has run, an acquisition starts with the acquire script
// rather than a bare SET, which a server that refuses scripts would apply:
// the first contact with the server tells, before anything is written,
// whether the lock it takes can be released. Where c cannot run without
// scripts (it cannot pin a connection), an operation on a server that
// refuses scripts fails with an error that says so, and writes nothing.
//
// The record is per Conn: on a Cluster, one for every node, which share
// one user's ACL as a rule; a node that refuses scripts while the others
// run them turns the Server to the operations without scripts, on every
// node, for reprobe each time it is met. Both kinds of operation store the
// same value and answer alike, so a lock taken by one is refreshed and
// released by the other.
func Detecting(c driver.Conn) Server {
	a := &auto{scripts: new(support), refusal: new(atomic.Pointer[string])}
	a.plain, a.why = newPlain(c)
	return Server{Conn: c, auto: a}
}

// Over returns the Server's operations over one, a connection that
// [Acked] pinned: they send every command there, their transactions
// included, so that a WAIT that follows on one counts the replicas of their
// writes. What the Server found its server to have is shared.
func (s Server) Over(one driver.Conn) Server {
	switch {
	case s.plain != nil:
		return Server{Conn: one, plain: s.plain.over(one)}
	case s.auto != nil:
		a := *s.auto
		if a.plain != nil {
			a.plain = a.plain.over(one)
		}
		return Server{Conn: one, auto: &a}
	}
	return Server{Conn: one}
}

// Scripts reports whether the Server runs scripts now: it is not without
// scripts, nor from Detecting with a server found to refuse them less than
// reprobe ago. The operations that only scripts have (the wait queue) are
// for such a Server alone.
func (s Server) Scripts() bool {
	return s.plain == nil && (s.auto == nil || !s.auto.scripts.missing())
}

// Refuses reports whether err, the error of a script run on the Server's
// server, is the server's refusal of scripts themselves, for a Server from
// Detecting, and records it: the Server then runs without scripts for
// reprobe. An answer of the script (nil, strategy.ErrNotObtained or
// strategy.ErrNotHeld) records that the server runs them. The refusals
// are those of an ACL that denies EVALSHA or EVAL (NOPERM, in the words of
// Redis 7.0, 7.2 and later, and Valkey 8) and of a server that does not
// know them (a command renamed away, a proxy, a managed service: "unknown
// command 'evalsha'"); any other error is not one. A Server that does not
// detect refuses nothing.
func (s Server) Refuses(err error) bool {
	if s.auto == nil {
		return false
	}
	if err == nil || errors.Is(err, strategy.ErrNotObtained) || errors.Is(err, strategy.ErrNotHeld) {
		if s.auto.scripts.state.Load() != 1 {
			s.auto.scripts.state.Store(1)
		}
		return false // the script ran: no refusal, and no error text to read on a contended attempt
	}
	if w := refusal(err); w != "" {
		said := w // on the heap only here
		s.auto.refusal.Store(&said)
		s.auto.scripts.state.Store(time.Now().Add(reprobe).UnixNano())
		return true
	}
	return false
}

// refusal returns what err says when it is a server's refusal of scripts
// (see Server.Refuses), in words that hold no argument of the command
// (Redis quotes them after an unknown command's name, and one may be a
// token), and "" otherwise.
func refusal(err error) string {
	if err == nil {
		return ""
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ") // rueidis drops the prefix
	lower := strings.ToLower(msg)
	for _, cmd := range []string{"evalsha", "eval"} {
		switch {
		case strings.HasPrefix(msg, "NOPERM") && strings.Contains(lower, "to run the '"+cmd+"' command"):
			return msg // it names the user and the command, no argument
		case strings.HasPrefix(lower, "unknown command '"+cmd+"'"), strings.HasPrefix(lower, "unknown command "+cmd+" "), lower == "unknown command "+cmd:
			return "unknown command '" + cmd + "'"
		}
	}
	return ""
}

// either runs script, or plain where the Server runs without scripts: it
// is without scripts, or from Detecting and its server refuses them, as
// script's error says (plain then runs), or as was found less than reprobe
// ago.
func (s Server) either(script func() error, plain func(*plain) error) error {
	if s.Scripts() {
		if err := script(); !s.Refuses(err) {
			return err
		}
	}
	p, err := s.scriptless()
	if err != nil {
		return err
	}
	return plain(p)
}

// scriptless returns the operations without scripts of a Server that runs
// without them, or why it cannot.
func (s Server) scriptless() (*plain, error) {
	switch {
	case s.plain != nil:
		return s.plain, nil
	case s.auto.plain == nil:
		return nil, s.auto.refused()
	}
	return s.auto.plain, nil
}

// refused is the error of an operation on a server that refuses scripts,
// which a's Conn cannot run without them: it writes nothing.
func (a *auto) refused() error {
	return fmt.Errorf("lock: the server refuses scripts (%s), and this driver cannot lock without them "+
		"(driver.WithoutScripts needs a driver that pins a connection): %w", a.said(), a.why)
}

// said returns what the last refusal of scripts said.
func (a *auto) said() string {
	if p := a.refusal.Load(); p != nil {
		return *p
	}
	return "refused"
}

// NeedsScripts returns the error of an operation that only scripts have,
// what (semaphores, say), and that cannot run on the Server's server: err,
// the operation's error, is the server's refusal of scripts (see
// Server.Refuses), which s records; or, with err nil, s found the server
// to refuse them less than reprobe ago. It returns nil otherwise, and err
// when err is another error. The error says that the mode without scripts
// has no form of the operation, matches errors.ErrUnsupported, and holds
// the refusal's words, no argument of the command.
func (s Server) NeedsScripts(err error, what string) error {
	if s.auto == nil {
		return err
	}
	w := refusal(err)
	switch {
	case w != "":
		s.Refuses(err)
	case err != nil || !s.auto.scripts.missing():
		return err
	default:
		w = s.auto.said()
	}
	return fmt.Errorf("lock: the server refuses scripts (%s), and %s need them: the mode without scripts "+
		"(driver.WithoutScripts) has no form of them: %w", w, what, errors.ErrUnsupported)
}

// Run runs the call, with scripts or without them, where the Server runs
// without scripts (see either). A Server from Detecting that has not yet
// seen a script run starts an acquisition with the script. A call on a
// held lock that finds a key gone reports it broken where a Break's mark
// says so (see MarkBroken).
func (s Server) Run(ctx context.Context, c Call) (r Result, err error) {
	err = s.either(func() (err error) {
		if s.auto != nil && c.script == nil && s.auto.scripts.state.Load() != 1 {
			c.script, c.keys, c.args = c.l.acquireCall()
		}
		r, err = c.run(ctx, s.Conn)
		return err
	}, func(p *plain) (err error) {
		r, err = c.runPlain(ctx, p)
		return err
	})
	if c.op != opAcquire && !s.unmarks {
		err = s.broken(ctx, c.l, err)
	}
	return r, err
}

// Inspect reads key, its TTL, the fencing counter at fenceKey when it is
// not "", and the length of the wait queue q and how long its head has
// waited when q is not the zero Queue, atomically and without changing
// anything (see inspectScript). On a Cluster, fenceKey and q's keys must
// be in key's hash slot. A user whose
// ACL does not allow them (one that never fences or waits need not be
// allowed them) gets the reading of key alone, with Fence and Queued 0. A
// key of another type gives the server's WRONGTYPE error. Without scripts
// there is no queue: q is not read.
func (s Server) Inspect(ctx context.Context, key, fenceKey string, q Queue) (r Reading, err error) {
	err = s.either(func() (err error) {
		r, err = inspect(ctx, s.Conn, key, fenceKey, q)
		return err
	}, func(p *plain) (err error) {
		r, err = p.inspect(ctx, key, fenceKey)
		return err
	})
	return r, err
}

// Support is what the Server, without scripts, found its server to have,
// per conditional command: true when the server ran it, false when it
// refused it as missing (within reprobe), absent when it was never tried;
// nil for a Server with scripts. For tests and diagnostics.
func (s Server) Support() map[string]bool {
	if s.plain == nil {
		return nil
	}
	return s.plain.support()
}
