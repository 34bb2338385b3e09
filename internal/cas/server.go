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

// Over returns the Server's operations over one, a connection that
// [Acked] pinned: without scripts, [Plain.Over] one.
func (s Server) Over(one driver.Conn) Server {
	if s.Plain != nil {
		return Server{Conn: one, Plain: s.Plain.Over(one)}
	}
	return Server{Conn: one}
}

// Run sends the call, as [Call.Run] does, or without scripts, as
// [Call.RunPlain] does.
func (s Server) Run(ctx context.Context, c Call) error {
	if s.Plain != nil {
		return c.RunPlain(ctx, s.Plain)
	}
	return c.Run(ctx, s.Conn)
}

// AcquireFenced is the package's [AcquireFenced] on the server.
func (s Server) AcquireFenced(ctx context.Context, key, fenceKey, value string, ttl time.Duration) (int64, error) {
	if s.Plain != nil {
		return s.Plain.AcquireFenced(ctx, key, fenceKey, value, ttl)
	}
	return AcquireFenced(ctx, s.Conn, key, fenceKey, value, ttl)
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

// Inspect is the package's [Inspect] on the server. Without scripts there
// is no queue: queueKey is not read.
func (s Server) Inspect(ctx context.Context, key, fenceKey, queueKey string) (Reading, error) {
	if s.Plain != nil {
		return s.Plain.Inspect(ctx, key, fenceKey)
	}
	return Inspect(ctx, s.Conn, key, fenceKey, queueKey)
}

// AcquireKeys is the package's [AcquireKeys] on the server.
func (s Server) AcquireKeys(ctx context.Context, keys, fenceKeys []string, value string, ttl time.Duration) ([]int64, time.Duration, error) {
	if s.Plain != nil {
		return s.Plain.AcquireKeys(ctx, keys, fenceKeys, value, ttl)
	}
	return AcquireKeys(ctx, s.Conn, keys, fenceKeys, value, ttl)
}

// PExpireKeys is the package's [PExpireKeys] on the server.
func (s Server) PExpireKeys(ctx context.Context, keys []string, value string, ttl time.Duration) error {
	if s.Plain != nil {
		return s.Plain.PExpireKeys(ctx, keys, value, ttl)
	}
	return PExpireKeys(ctx, s.Conn, keys, value, ttl)
}

// PTTLKeys is the package's [PTTLKeys] on the server.
func (s Server) PTTLKeys(ctx context.Context, keys []string, value string) (time.Duration, error) {
	if s.Plain != nil {
		return s.Plain.PTTLKeys(ctx, keys, value)
	}
	return PTTLKeys(ctx, s.Conn, keys, value)
}

// DeleteKeys is the package's [DeleteKeys] on the server.
func (s Server) DeleteKeys(ctx context.Context, keys []string, value string) error {
	if s.Plain != nil {
		return s.Plain.DeleteKeys(ctx, keys, value)
	}
	return DeleteKeys(ctx, s.Conn, keys, value)
}
