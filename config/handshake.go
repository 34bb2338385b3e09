package config

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/locksmith-go/lock/internal/neterr"
)

// Dial connects to addr over network as a driver's client of e must, with
// d's timeout bounding the whole of it: over TLS when e.TLS is set, and
// then with the handshake finished before it returns, within ctx. A
// driver's Open gives it to its client as its dialer when e.TLS is set
// (the built-in drivers do): then, when the server never answers, the
// Locker's errors can say that a connection was made but no TLS handshake
// ever finished, as happens against a server without TLS at that port.
func (e Endpoint) Dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil || e.TLS == nil {
		return conn, err
	}
	e.handshakes.connected()
	tc := tls.Client(conn, e.TLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	e.handshakes.finished()
	return tc, nil
}

// handshakes records the TLS handshakes of one Endpoint's client, for
// [Endpoint.Dial] and the Locker's errors. Its methods do nothing on a nil
// *handshakes (TLS off, or an Endpoint that Open did not make).
type handshakes struct {
	addr  string       // where it connects, for the errors
	state atomic.Int32 // 0: no connection yet; 1: a connection, no handshake finished; 2: a handshake finished
}

func (h *handshakes) connected() {
	if h != nil {
		h.state.CompareAndSwap(0, 1)
	}
}

func (h *handshakes) finished() {
	if h != nil {
		h.state.Store(2)
	}
}

// explain returns err, the error of a call that got no answer, with what
// the handshakes say: that the TLS handshake never finished, when a
// connection was made but no handshake ever finished. Any other err is
// returned as it is.
func (h *handshakes) explain(err error) error {
	if h == nil || err == nil || h.state.Load() != 1 || !neterr.Unanswered(err) && !errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("the TLS handshake with %s never finished (is TLS on at that port?): %w", h.addr, err)
}
