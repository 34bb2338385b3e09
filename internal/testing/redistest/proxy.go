package redistest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards loopback connections to a server, and can cut them: a
// cut drops every byte both ways, as a network partition does, while the
// server goes on running (and expiring keys) as before. A client that
// reaches the server through it sees no answer, and no error, until the
// cut heals.
type Proxy struct {
	Addr string // 127.0.0.1:port, to connect to instead of the server's
	cut  atomic.Bool

	mu    sync.Mutex
	conns []net.Conn // both ends of each connection carried
}

// Proxy starts a proxy to s, closed when the test ends.
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", s.Addr)
			if err != nil {
				client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); p.pipe(server, client) }()
			go func() { defer wg.Done(); p.pipe(client, server) }()
		}
	}()
	return p
}

// Cut starts dropping every byte.
func (p *Proxy) Cut() { p.cut.Store(true) }

// Heal stops dropping bytes, and closes the connections the cut carried,
// which lost bytes, as a partition does that lasts until TCP gives up:
// clients connect again.
func (p *Proxy) Heal() {
	p.closeAll()
	p.cut.Store(false)
}

// closeAll closes every connection carried so far.
func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// pipe copies from src to dst, dropping what it reads while p is cut,
// until either end closes.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
