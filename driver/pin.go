package driver

import (
	"context"
	"errors"
	"fmt"
)

// Pinner is an optional interface of a [Conn] that can send several
// commands over one connection of its pool, for a command whose meaning
// depends on the connection it is sent on: WAIT counts the replicas that
// acknowledged the writes of its own connection, so it must follow the
// write on the same one. Use the package's [Pin].
type Pinner interface {
	// Pinnable returns nil if Pin can run, or why it cannot: a client
	// whose commands go to several servers (a Cluster) has no one
	// connection to pin.
	Pinnable() error
	// Pin runs f with a Conn that sends every command over one
	// connection, which no other caller uses meanwhile, and returns f's
	// error. That Conn must not be used after f returns. Pin honours ctx
	// while it takes the connection, and the Conn honours the ctx of each
	// call, as every Conn does.
	Pin(ctx context.Context, f func(Conn) error) error
}

// Pinnable returns nil if c can run [Pin], and otherwise an error that says
// why, matching errors.ErrUnsupported when c does not implement [Pinner]
// or [Commander] (a pinned Conn sends WAIT with [Do]).
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

// Pin runs f with c pinned to one connection (see [Pinner]). It returns
// [Pinnable]'s error, without running f, when c cannot.
func Pin(ctx context.Context, c Conn, f func(Conn) error) error {
	if err := Pinnable(c); err != nil {
		return err
	}
	return c.(Pinner).Pin(ctx, f)
}
