package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"syscall"
	"time"
)

// A Control is the parent's end of a run: the Unix socket that its client
// processes report their history on, outside every fault, and the
// resources they write to while they hold a lock: a FencedRegister, a
// Counter per key and a ValueRegister. It can pause a client at a point
// of its hold ([Control.ArmPause]).
type Control struct {
	ln net.Listener
	wg sync.WaitGroup

	fenced FencedRegister
	values ValueRegister

	mu       sync.Mutex
	counters map[string]*Counter
	holds    map[string]*Hold // by hold
	fails    map[string]int   // Obtains and Releases ("release: …") that failed, by class
	pids     map[string]int   // client processes, by name
	armed    map[string]pause // by client
	paused   map[string]*time.Timer
	pauses   []Pause // done or under way
	conns    map[net.Conn]bool
	obtained int   // holds obtained
	last     int64 // when the last was obtained
	events   int   // received, all told
}

// A pause is a pause armed for a client's next event of a type.
type pause struct {
	on string // the event type
	d  time.Duration
}

// A Pause is a client process stopped (SIGSTOP) and continued.
type Pause struct {
	Client     string // ClientConfig.Name
	On         string // the event it was stopped at: invoke or commit
	Start, End int64  // on the run's clock
}

// NewControl listens on a Unix socket at path.
func NewControl(path string) (*Control, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("jepsen: control socket: %w", err)
	}
	c := &Control{ln: ln, counters: map[string]*Counter{}, holds: map[string]*Hold{}, fails: map[string]int{},
		pids: map[string]int{}, armed: map[string]pause{}, paused: map[string]*time.Timer{}, conns: map[net.Conn]bool{}}
	c.wg.Add(1)
	go c.accept()
	return c, nil
}

// Path returns the control socket's path.
func (c *Control) Path() string { return c.ln.Addr().String() }

func (c *Control) accept() {
	defer c.wg.Done()
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		c.conns[conn] = true
		c.mu.Unlock()
		c.wg.Add(1)
		go c.serve(conn)
	}
}

// serve reads a client's events until it closes the socket, and answers
// those that ask.
func (c *Control) serve(conn net.Conn) {
	defer c.wg.Done()
	defer func() {
		c.mu.Lock()
		delete(c.conns, conn)
		c.mu.Unlock()
		conn.Close()
	}()
	dec := json.NewDecoder(bufio.NewReader(conn))
	enc := json.NewEncoder(conn)
	for {
		var ev Event
		if err := dec.Decode(&ev); err != nil {
			return
		}
		r, answer := c.event(ev)
		if answer && enc.Encode(r) != nil {
			return
		}
	}
}

// event records ev, and returns the answer to it when it asks for one.
func (c *Control) event(ev Event) (Reply, bool) {
	c.mu.Lock()
	c.events++
	c.mu.Unlock()
	switch ev.Type {
	case "read":
		return Reply{Value: int64(c.counter(ev.Key).Read())}, true
	case "write":
		c.counter(ev.Key).Write(int(ev.Value))
		return Reply{OK: true}, true
	case "fenced":
		return Reply{OK: c.fenced.Write(ev.Key, ev.Hold, ev.Fence)}, true
	case "value":
		c.values.Write(ev.Key, ev.Value)
		return Reply{OK: true}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.armed[ev.Client]; ok && p.on == ev.Type {
		delete(c.armed, ev.Client)
		c.stop(ev.Client, p)
	}
	switch ev.Type {
	case "commit":
		return Reply{OK: true}, true
	case "invoke":
		c.holds[ev.Hold] = &Hold{Key: ev.Key, Holder: ev.Hold, Invoked: ev.Time}
	case "fail":
		delete(c.holds, ev.Hold)
		c.fails[ev.Err]++
	case "unreleased":
		c.fails["release: "+ev.Err]++
	case "ok":
		if h := c.holds[ev.Hold]; h != nil {
			h.Obtained, h.Fence, h.ValidUntil = ev.Time, ev.Fence, ev.ValidUntil
			c.obtained++
			c.last = max(c.last, ev.Time)
		}
	case "release":
		if h := c.holds[ev.Hold]; h != nil {
			h.Released, h.ValidUntil, h.Lost = ev.Time, ev.ValidUntil, ev.Lost
		}
	}
	return Reply{}, false
}

// stop stops client's process for p.d. c.mu is held.
func (c *Control) stop(client string, p pause) {
	pid := c.pids[client]
	if pid == 0 || syscall.Kill(pid, syscall.SIGSTOP) != nil {
		return
	}
	c.pauses = append(c.pauses, Pause{Client: client, On: p.on, Start: Now()})
	i := len(c.pauses) - 1
	c.paused[client] = time.AfterFunc(p.d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.resume(client, i)
	})
}

// resume continues the client stopped by pause i. c.mu is held.
func (c *Control) resume(client string, i int) {
	if _, ok := c.paused[client]; !ok {
		return
	}
	delete(c.paused, client)
	_ = syscall.Kill(c.pids[client], syscall.SIGCONT)
	c.pauses[i].End = Now()
}

func (c *Control) counter(key string) *Counter {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.counters[key]
	if ct == nil {
		ct = &Counter{}
		c.counters[key] = ct
	}
	return ct
}

// Client records that the process of client has ID pid, for ArmPause.
func (c *Control) Client(client string, pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pids[client] = pid
}

// ArmPause makes the next event of type on ("invoke": right after the
// client sent an acquire; "commit": mid-hold, right before its writes)
// from client stop the client's process for d. It replaces a pause armed
// before for client, and does nothing while client is paused.
func (c *Control) ArmPause(client, on string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.paused[client]; !ok {
		c.armed[client] = pause{on, d}
	}
}

// Disarm cancels the pause armed for client, or, for "", cancels every
// pause armed and continues every paused client.
func (c *Control) Disarm(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if client != "" {
		delete(c.armed, client)
		return
	}
	clear(c.armed)
	for client, t := range c.paused {
		t.Stop()
		for i := len(c.pauses) - 1; i >= 0; i-- {
			if c.pauses[i].Client == client && c.pauses[i].End == 0 {
				c.resume(client, i)
				break
			}
		}
	}
}

// Close continues every paused client, stops listening, and waits up to
// timeout for the clients to close their sockets; then it closes them.
func (c *Control) Close(timeout time.Duration) error {
	c.Disarm("")
	err := c.ln.Close()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-time.After(timeout):
	}
	c.mu.Lock()
	for conn := range c.conns {
		conn.Close()
	}
	c.mu.Unlock()
	<-done
	return errors.Join(err, fmt.Errorf("jepsen: clients still connected %v after the run", timeout))
}

// Holds returns the holds obtained so far, sorted by their acquisition.
func (c *Control) Holds() []Hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	var hs []Hold
	for _, h := range c.holds {
		if h.Obtained != 0 {
			hs = append(hs, *h)
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].Obtained < hs[j].Obtained })
	return hs
}

// Obtained returns how many holds were obtained so far, and when the last
// was.
func (c *Control) Obtained() (n int, last int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.obtained, c.last
}

// Events returns how many events the clients sent: their operations, on
// the locks and the resources, each Obtain counted at its invocation and
// its outcome.
func (c *Control) Events() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events
}

// Fails returns how many Obtains failed, by class, and how many Releases,
// by "release: " and their class.
func (c *Control) Fails() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for k, v := range c.fails {
		m[k] = v
	}
	return m
}

// Pauses returns the clients' pauses so far.
func (c *Control) Pauses() []Pause {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Pause(nil), c.pauses...)
}

// Resources returns what the resources saw: the fenced register's writes,
// the updates the counters lost, and the value register's stale
// overwrites.
func (c *Control) Resources() (fenced Writes, lost, overwrites int) {
	c.mu.Lock()
	counters := make([]*Counter, 0, len(c.counters))
	for _, ct := range c.counters {
		counters = append(counters, ct)
	}
	c.mu.Unlock()
	for _, ct := range counters {
		lost += ct.LostUpdates()
	}
	return c.fenced.Writes(), lost, c.values.StaleOverwrites()
}
