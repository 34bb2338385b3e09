// Package embedded runs an in-process Redis (miniredis) whose keys expire in
// real time. It is the default for the demo, the examples, and for tests on a
// machine without redis-server; it is never a substitute for the real-server
// suite.
package embedded

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/strategy/single"
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

// Single returns a Locker of the single strategy over go-redis, on addr
// when it is set, and otherwise on a new embedded server, which it announces
// on stdout. close closes the client and stops the server. The demos use
// it for their -addr flag.
func Single(addr string) (_ lock.Locker, close func(), err error) {
	stop := func() {}
	if addr == "" {
		s, err := Start()
		if err != nil {
			return nil, nil, err
		}
		addr, stop = s.Addr(), s.Close
		fmt.Printf("embedded Redis on %s\n", addr)
	}
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	close = func() { _ = client.Close(); stop() }
	l, err := single.New(goredis.New(client))
	if err != nil {
		close()
		return nil, nil, err
	}
	return l, close, nil
}
