package cas

import (
	"context"
	"time"

	"github.com/locksmith-go/lock/driver"
)

// Server is one server's operations: the scripts over Conn, or, when Plain
// is set, the same operations without scripts. A strategy that runs either
// way, per Locker or per node, keeps one Server per server, so that what
// Plain detects is a server's own.
type Server struct {
	Conn  driver.Conn
	Plain *Plain // nil: scripts
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

// Run sends the call, as [Call.Run] does, or without scripts, as
// [Call.RunPlain] does.
func (s Server) Run(ctx context.Context, c Call) error {
	if s.Plain != nil {
		return c.RunPlain(ctx, s.Plain)
	}
	return c.Run(ctx, s.Conn)
}

// PTTL is the package's [PTTL] on the server.
func (s Server) PTTL(ctx context.Context, key, value string) (time.Duration, error) {
	if s.Plain != nil {
		return s.Plain.PTTL(ctx, key, value)
	}
	return PTTL(ctx, s.Conn, key, value)
}

// Set is the package's [Set] on the server.
func (s Server) Set(ctx context.Context, key, value, next string, ttl time.Duration) error {
	if s.Plain != nil {
		return s.Plain.Set(ctx, key, value, next, ttl)
	}
	return Set(ctx, s.Conn, key, value, next, ttl)
}

// Inspect is the package's [Inspect] on the server, of key alone: no
// fencing counter, no queue.
func (s Server) Inspect(ctx context.Context, key string) (Reading, error) {
	if s.Plain != nil {
		return s.Plain.Inspect(ctx, key, "")
	}
	return Inspect(ctx, s.Conn, key, "", "")
}
