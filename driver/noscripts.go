package driver

import (
	"context"
	"errors"
	"fmt"
)

// WithoutScripts returns c marked as a connection to a server that forbids
// scripts: an ACL without @scripting, a proxy, a managed service. The
// strategies of this module read the mark ([ScriptsOff]) and send no
// script there (EVAL, EVALSHA, FCALL, SCRIPT): conditional commands and
// transactions instead, which need a Conn that pins a connection
// ([Pinner]), or the strategy's constructor refuses it. Redlock reads it
// per node: mark the nodes that forbid scripts. The repository's
// docs/strategies.md ("single without scripts") says what each operation
// sends.
//
// The Conn returned sends every call to c, and has c's optional
// interfaces: it is a Subscriber if c is one, and the package's functions
// ([Do], [Addr], [Pin], [Pipeline], [Check]) find in it what c has. Its
// EvalSha and Eval, and [Script]'s Run and RunEach over it, send nothing
// and return an error that says scripts are off, matching
// errors.ErrUnsupported. Marking a marked Conn returns it.
func WithoutScripts(c Conn) Conn {
	if ScriptsOff(c) {
		return c
	}
	if sub, ok := c.(Subscriber); ok {
		return scriptlessSubscriber{scriptless{c}, sub}
	}
	return scriptless{c}
}

// ScriptsOff reports whether c was marked by [WithoutScripts].
func ScriptsOff(c Conn) bool {
	_, ok := c.(interface{ scriptsOff() })
	return ok
}

// errOff is the error of a script on a Conn marked WithoutScripts.
var errOff = fmt.Errorf("driver: scripts are off on this connection (WithoutScripts; config: without_scripts): %w", errors.ErrUnsupported)

// scriptless is a Conn marked by WithoutScripts.
type scriptless struct{ Conn }

// scriptlessSubscriber is a scriptless Conn that can subscribe.
type scriptlessSubscriber struct {
	scriptless
	Subscriber
}

func (scriptless) scriptsOff()                                                    {}
func (scriptless) EvalSha(context.Context, string, []string, ...any) (any, error) { return nil, errOff }
func (scriptless) Eval(context.Context, string, []string, ...any) (any, error)    { return nil, errOff }
func (s scriptless) Addr() string                                                 { return Addr(s.Conn) }
func (s scriptless) Pinnable() error                                              { return Pinnable(s.Conn) }
func (s scriptless) Validate() error                                              { return Check(s.Conn) }

func (s scriptless) Do(ctx context.Context, args ...any) (any, error) {
	return Do(ctx, s.Conn, args...)
}

func (s scriptless) Pipeline(ctx context.Context, cmds [][]any) ([]any, error) {
	return Pipeline(ctx, s.Conn, cmds)
}

// Pin runs f with the pinned Conn marked too.
func (s scriptless) Pin(ctx context.Context, key string, f func(Conn) error) error {
	return Pin(ctx, s.Conn, key, func(one Conn) error { return f(WithoutScripts(one)) })
}
