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

// Server is one server's operations: the scripts over Conn, or, when Plain
// is set, the same operations without scripts. A strategy that runs either
// way, per Locker or per node, keeps one Server per server, so that what
// Plain detects is a server's own. A Server from [Detecting] runs the
// scripts where the server runs them, and the operations without scripts
// where it refuses them.
type Server struct {
	Conn  driver.Conn
	Plain *Plain // nil: scripts
	auto  *auto  // with Plain nil: the Server detects whether the server refuses scripts; nil: it never does
}

// auto is what a Server from Detecting found its server to do with
// scripts, and what it runs where the server refuses them.
type auto struct {
	scripts *support                // ran one (1), or refused them (until when)
	refusal *atomic.Pointer[string] // what the last refusal said (see refusal)
	plain   *Plain                  // the operations without scripts; nil when the driver cannot run them
	why     error                   // why plain is nil
}

// NewServer returns the Server of c, without scripts when plain is true. It
// returns [NewPlain]'s error when c cannot run without scripts.
func NewServer(c driver.Conn, plain bool) (Server, error) {
	if !plain {
		return Server{Conn: c}, nil
	}
	p, err := NewPlain(c)
	return Server{Conn: c, Plain: p}, err
}

// Detecting returns the Server of c that runs the scripts where the server
// runs them, and the operations without scripts (NewServer(c, true)'s)
// where it refuses them: where a script's error is such a refusal (see
// [Server.Refuses]), the operation runs again without scripts, and so do
// the operations after it, for [Reprobe]; then scripts are tried again.
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
// node, for Reprobe each time it is met. Both kinds of operation store the
// same value and answer alike, so a lock taken by one is refreshed and
// released by the other.
func Detecting(c driver.Conn) Server {
	a := &auto{scripts: new(support), refusal: new(atomic.Pointer[string])}
	a.plain, a.why = NewPlain(c)
	return Server{Conn: c, auto: a}
}

// Over returns the Server's operations over one, a connection that
// [Acked] pinned: without scripts, [Plain.Over] one. A Server from
// Detecting shares its record.
func (s Server) Over(one driver.Conn) Server {
	switch {
	case s.Plain != nil:
		return Server{Conn: one, Plain: s.Plain.Over(one)}
	case s.auto != nil:
		a := *s.auto
		if a.plain != nil {
			a.plain = a.plain.Over(one)
		}
		return Server{Conn: one, auto: &a}
	}
	return Server{Conn: one}
}

// Scripts reports whether the Server runs scripts now: it is not without
// scripts, nor from Detecting with a server found to refuse them less than
// Reprobe ago. The operations that only scripts have (the wait queue) are
// for such a Server alone.
func (s Server) Scripts() bool {
	return s.Plain == nil && (s.auto == nil || !s.auto.scripts.missing())
}

// Refuses reports whether err, the error of a script run on the Server's
// server, is the server's refusal of scripts themselves, for a Server from
// Detecting, and records it: the Server then runs without scripts for
// Reprobe. An answer of the script (nil, strategy.ErrNotObtained or
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
		s.auto.scripts.state.Store(time.Now().Add(Reprobe).UnixNano())
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
// script's error says (plain then runs), or as was found less than Reprobe
// ago.
func (s Server) either(script func() error, plain func(*Plain) error) error {
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
func (s Server) scriptless() (*Plain, error) {
	switch {
	case s.Plain != nil:
		return s.Plain, nil
	case s.auto.plain == nil:
		return nil, s.auto.refused()
	}
	return s.auto.plain, nil
}

// refused is the error of an operation on a server that refuses scripts,
// which a's Conn cannot run without them: it writes nothing.
func (a *auto) refused() error {
	return fmt.Errorf("lock: the server refuses scripts (%s), and this driver cannot lock without them "+
		"(single.WithoutScripts needs a driver that pins a connection): %w", a.said(), a.why)
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
// to refuse them less than Reprobe ago. It returns nil otherwise, and err
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
	return fmt.Errorf("lock: the server refuses scripts (%s), and %s need them: single.WithoutScripts, "+
		"the mode without scripts, has no form of them: %w", w, what, errors.ErrUnsupported)
}

// Run sends the call, as [Call.Run] does, or without scripts, as
// [Call.RunPlain] does. A Server from Detecting that has not yet seen a
// script run starts an acquisition with the script.
func (s Server) Run(ctx context.Context, c Call) error {
	return s.either(func() error {
		if s.auto != nil && c.op == opAcquire && c.start != ByScript && s.auto.scripts.state.Load() != 1 {
			c.start, c.call = ByScript, acquireScriptCall(c.key, c.value, c.ttl)
		}
		return c.Run(ctx, s.Conn)
	}, func(p *Plain) error { return c.RunPlain(ctx, p) })
}

// AcquireFenced is the package's [AcquireFenced] on the server.
func (s Server) AcquireFenced(ctx context.Context, key, fenceKey, value string, ttl time.Duration) (n int64, err error) {
	err = s.either(func() (err error) {
		n, err = AcquireFenced(ctx, s.Conn, key, fenceKey, value, ttl)
		return err
	}, func(p *Plain) (err error) {
		n, err = p.AcquireFenced(ctx, key, fenceKey, value, ttl)
		return err
	})
	return n, err
}

// PTTL is the package's [PTTL] on the server.
func (s Server) PTTL(ctx context.Context, key, value string) (ttl time.Duration, err error) {
	err = s.either(func() (err error) {
		ttl, err = PTTL(ctx, s.Conn, key, value)
		return err
	}, func(p *Plain) (err error) {
		ttl, err = p.PTTL(ctx, key, value)
		return err
	})
	return ttl, err
}

// Set is the package's [Set] on the server.
func (s Server) Set(ctx context.Context, key, value, next string, ttl time.Duration) error {
	return s.either(func() error { return Set(ctx, s.Conn, key, value, next, ttl) },
		func(p *Plain) error { return p.Set(ctx, key, value, next, ttl) })
}

// Inspect is the package's [Inspect] on the server. Without scripts there
// is no queue: queueKey is not read.
func (s Server) Inspect(ctx context.Context, key, fenceKey, queueKey string) (r Reading, err error) {
	err = s.either(func() (err error) {
		r, err = Inspect(ctx, s.Conn, key, fenceKey, queueKey)
		return err
	}, func(p *Plain) (err error) {
		r, err = p.Inspect(ctx, key, fenceKey)
		return err
	})
	return r, err
}

// AcquireKeys is the package's [AcquireKeys] on the server.
func (s Server) AcquireKeys(ctx context.Context, keys, fenceKeys []string, value string, ttl time.Duration) (fences []int64, held time.Duration, err error) {
	err = s.either(func() (err error) {
		fences, held, err = AcquireKeys(ctx, s.Conn, keys, fenceKeys, value, ttl)
		return err
	}, func(p *Plain) (err error) {
		fences, held, err = p.AcquireKeys(ctx, keys, fenceKeys, value, ttl)
		return err
	})
	return fences, held, err
}

// PExpireKeys is the package's [PExpireKeys] on the server.
func (s Server) PExpireKeys(ctx context.Context, keys []string, value string, ttl time.Duration) error {
	return s.either(func() error { return PExpireKeys(ctx, s.Conn, keys, value, ttl) },
		func(p *Plain) error { return p.PExpireKeys(ctx, keys, value, ttl) })
}

// PTTLKeys is the package's [PTTLKeys] on the server.
func (s Server) PTTLKeys(ctx context.Context, keys []string, value string) (ttl time.Duration, err error) {
	err = s.either(func() (err error) {
		ttl, err = PTTLKeys(ctx, s.Conn, keys, value)
		return err
	}, func(p *Plain) (err error) {
		ttl, err = p.PTTLKeys(ctx, keys, value)
		return err
	})
	return ttl, err
}

// DeleteKeys is the package's [DeleteKeys] on the server.
func (s Server) DeleteKeys(ctx context.Context, keys []string, value string) error {
	return s.either(func() error { return DeleteKeys(ctx, s.Conn, keys, value) },
		func(p *Plain) error { return p.DeleteKeys(ctx, keys, value) })
}
