package driver

import (
	"context"
	"errors"
	"fmt"
)

// Pinner is an optional interface of a [Conn] that can send several
// commands over one connection to the server that holds a key, for
// commands whose meaning depends on the connection they are sent on: WAIT
// counts the replicas that acknowledged the writes of its own connection,
// so it must follow the write on the same one, and a WATCH transaction
// (WATCH, MULTI, EXEC) lives on one connection from WATCH to EXEC. Use
// the package's [Pin].
type Pinner interface {
	// Pinnable returns nil if Pin can run for any key, or why it cannot.
	Pinnable() error
	// Pin runs f with a Conn that sends every command over one connection
	// to the server that holds key, which no other caller uses meanwhile,
	// and returns f's error: the one server of a standalone client, the
	// master of a Sentinel-managed client, the master of key's hash slot
	// on a Cluster. The commands of f's Conn go there whatever keys they
	// name, or none (MULTI, EXEC, WAIT); a server that does not serve a
	// key they name refuses it (MOVED, on a Cluster). That Conn must not
	// be used after f returns, and f must end what it starts there (EXEC,
	// DISCARD or UNWATCH): the connection then serves other callers. Pin
	// honours ctx while it takes the connection, and the Conn honours the
	// ctx of each call, as every Conn does.
	Pin(ctx context.Context, key string, f func(Conn) error) error
}

// Pinnable returns nil if c can run [Pin], and otherwise an error that says
// why, matching errors.ErrUnsupported when c does not implement [Pinner]
// or [Commander] (a pinned Conn sends WAIT and the commands of a
// transaction with [Do]).
func Pinnable(c Conn) error {
	p, ok := c.(Pinner)
	if !ok {
		return fmt.Errorf("driver: %T cannot send commands over one connection of its choice: %w", c, errors.ErrUnsupported)
	}
	if _, ok := c.(Commander); !ok {
		return fmt.Errorf("driver: %T sends no commands of its choice: %w", c, errors.ErrUnsupported)
	}
	return p.Pinnable()
}

// Pin runs f with c pinned to one connection to the server that holds key
// (see [Pinner]). It returns [Pinnable]'s error, without running f, when c
// cannot.
func Pin(ctx context.Context, c Conn, key string, f func(Conn) error) error {
	if err := Pinnable(c); err != nil {
		return err
	}
	return c.(Pinner).Pin(ctx, key, f)
}
