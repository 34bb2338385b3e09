// Package embedded runs an in-process Redis (miniredis) whose keys expire in
// real time. It is the default for the demo, the examples, and for tests on a
// machine without redis-server; it is never a substitute for the real-server
// suite.
package embedded

import (
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// tick is how often the clock of the embedded server catches up with real
// time; keys expire at most this late.
const tick = 2 * time.Millisecond

// Server is an embedded Redis listening on a loopback port.
type Server struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup
}

// Start starts an embedded server on a free loopback port.
func Start() (*Server, error) {
	m, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	s := &Server{m: m, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.clock()
	return s, nil
}

// miniredis only expires keys when told that time has passed.
func (s *Server) clock() {
	defer s.wg.Done()
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.m.Addr() }

// Close stops the server.
func (s *Server) Close() {
	close(s.stop)
	s.wg.Wait()
	s.m.Close()
}
