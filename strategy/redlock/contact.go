package redlock

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/internal/wait"
	"github.com/locksmith-go/lock/strategy"
)

// contactTimeout bounds the first contact with a node: opening its
// connection and reading its run id. A node timeout set with
// [WithNodeTimeout] above it raises it to that timeout. The contact goes on
// in the background when the call that started it returns first, so that the
// next call finds the node reached.
const contactTimeout = 5 * time.Second

// contactPause spaces out the retries of a first contact that timed out.
const contactPause = 50 * time.Millisecond

// runID reads the server's run id, or "" where the server reports none (the
// embedded miniredis) or refuses INFO in a script.
var runID = driver.NewScript(`local info = redis.pcall('INFO', 'server')
if type(info) ~= 'string' then return '' end
return string.match(info, 'run_id:(%x+)') or ''`)

// errNoContact is a node's answer while its first contact is under way.
var errNoContact error = unanswered("redlock: the node has not answered its first contact yet")

// peer is what the first contact learned about one node.
type peer struct {
	known atomic.Bool // the first contact succeeded: the node may vote
	// Guarded by Strategy.mu:
	runID   string // the server's run id, or "" if it reports none
	pending bool   // a contact is under way
	err     error  // why the last contact failed
}

// gated is a node's connection: it sends nothing until the node's first
// contact succeeded, so that no node votes before it was checked to be a
// server of its own. Until then every command returns the contact's error.
type gated struct {
	driver.Conn
	s *redlock
	i int
}

func (g gated) ready() error {
	if g.s.peers[g.i].known.Load() {
		return nil
	}
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	return cmp.Or(g.s.peers[g.i].err, errNoContact)
}

// gate runs call once the node's first contact succeeded.
func gate[T any](g gated, call func() (T, error)) (v T, err error) {
	if err := g.ready(); err != nil {
		return v, err
	}
	return call()
}

func (g gated) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return gate(g, func() (bool, error) { return g.Conn.SetNX(ctx, key, value, ttl) })
}

func (g gated) Get(ctx context.Context, key string) (string, bool, error) {
	if err := g.ready(); err != nil {
		return "", false, err
	}
	return g.Conn.Get(ctx, key)
}

func (g gated) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	if err := g.ready(); err != nil {
		return "", false, err
	}
	return g.Conn.GetSet(ctx, key, value)
}

func (g gated) Del(ctx context.Context, key string) (bool, error) {
	return gate(g, func() (bool, error) { return g.Conn.Del(ctx, key) })
}

func (g gated) PTTL(ctx context.Context, key string) (time.Duration, bool, error) {
	if err := g.ready(); err != nil {
		return 0, false, err
	}
	return g.Conn.PTTL(ctx, key)
}

func (g gated) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	return gate(g, func() (any, error) { return g.Conn.EvalSha(ctx, sha1, keys, args...) })
}

func (g gated) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	return gate(g, func() (any, error) { return g.Conn.Eval(ctx, src, keys, args...) })
}

// Do sends a command of the caller's choice, where the node's connection
// can: driver.Do says.
func (g gated) Do(ctx context.Context, args ...any) (any, error) {
	return gate(g, func() (any, error) { return driver.Do(ctx, g.Conn, args...) })
}

// Pipeline sends commands in one round trip, where the node's connection
// can: driver.Pipeline says.
func (g gated) Pipeline(ctx context.Context, cmds [][]any) ([]any, error) {
	return gate(g, func() ([]any, error) { return driver.Pipeline(ctx, g.Conn, cmds) })
}

// Pinnable is the node's connection's: driver.Pinnable says.
func (g gated) Pinnable() error { return driver.Pinnable(g.Conn) }

// Pin pins the node's connection, once the node's first contact succeeded.
func (g gated) Pin(ctx context.Context, key string, f func(driver.Conn) error) error {
	if err := g.ready(); err != nil {
		return err
	}
	return driver.Pin(ctx, g.Conn, key, f)
}

// contact makes first contact with every node not reached yet, and waits
// for those contacts until they all ended, or ctx is done, or a quorum of
// the nodes is reached and the others had grace more. A node not reached by
// then answers the call with its contact's error (or as timed out, while
// the contact goes on). It returns an error if two nodes are one server.
//
// Opening a connection (a TCP dial, go-redis's HELLO) is thus bounded by
// the caller's context and contactTimeout, never by the node timeout, which
// is left to the commands on open connections.
func (s *redlock) contact(ctx context.Context, grace time.Duration) error {
	if int(s.known.Load()) == len(s.nodes) {
		return nil
	}
	// Derived before s.mu is taken: WithoutCancel panics on a nil ctx, and
	// a panic must never leave s.mu held, nor a contact marked pending
	// that no goroutine makes.
	if err := s.startContacts(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	// A contact gives up after its bound; a driver that does not honour its
	// context may not return by then, and the wait does not outlast it by
	// much, as fanOut's does not.
	bound := s.contactBound()
	late := time.NewTimer(bound + bound/2)
	defer late.Stop()
	var graceC <-chan time.Time
	for {
		changed, pending, dup := s.progress()
		switch {
		case dup != nil:
			return dup
		case pending == 0:
			return nil
		case graceC == nil && int(s.known.Load()) >= s.quorum:
			graceC = time.After(grace)
		}
		select {
		case <-changed:
		case <-graceC:
			return nil
		case <-late.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startContacts starts, on ctx, the first contact with every node that is
// neither reached nor being contacted. It returns the error of two nodes
// found to be one server, if any.
func (s *redlock) startContacts(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dup != nil {
		return s.dup
	}
	for i := range s.peers {
		if p := &s.peers[i]; !p.known.Load() && !p.pending {
			p.pending, p.err = true, nil
			go s.reach(ctx, i)
		}
	}
	return nil
}

// progress returns the state of the first contacts: the channel closed
// when a contact next ends, how many are under way, and the error of two
// nodes found to be one server, if any.
func (s *redlock) progress() (changed <-chan struct{}, pending int, dup error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.peers {
		if s.peers[i].pending {
			pending++
		}
	}
	return s.changed, pending, s.dup
}

// runID reads node i's run id: with the runID script, or, on a node
// without scripts, with INFO server, whose refusal (an ACL that denies
// INFO, a proxy that lacks it) reads as "", as in the script.
func (s *redlock) runID(ctx context.Context, i int) (string, error) {
	n := s.nodes[i]
	if n.srv.Scripts() {
		reply, err := runID.Run(ctx, n.raw, nil)
		id, _ := reply.(string)
		return id, err
	}
	reply, err := driver.Do(ctx, n.raw, "INFO", "server")
	if cas.Refused(err) {
		return "", nil
	}
	info, _ := reply.(string)
	for line := range strings.Lines(info) {
		if id, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(id), err
		}
	}
	return "", err
}

// contactBound bounds a first contact: contactTimeout, or the node timeout
// when that is longer.
func (s *redlock) contactBound() time.Duration { return max(contactTimeout, s.nodeTimeout) }

// reach makes first contact with node i: it reads the server's run id and,
// unless another node reported the same one, lets the node vote. A contact
// that timed out (a dial on a loaded machine can overrun the client's dial
// timeout) is tried again within contactTimeout; a refused one is not.
func (s *redlock) reach(ctx context.Context, i int) {
	ctx, cancel := context.WithTimeout(ctx, s.contactBound())
	defer cancel()
	id, err := s.runID(ctx, i)
	for err != nil && neterr.Timeout(err) && wait.Sleep(ctx, contactPause) == nil {
		id, err = s.runID(ctx, i)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.peers[i]
	p.pending = false
	close(s.changed)
	s.changed = make(chan struct{})
	if err != nil {
		p.err = fmt.Errorf("redlock: first contact: %w", err)
		return
	}
	for j := range s.peers {
		if q := &s.peers[j]; id != "" && q.known.Load() && q.runID == id {
			s.dup = &strategy.ArgumentError{Name: fmt.Sprintf("nodes[%d]", max(i, j)), Reason: fmt.Sprintf(
				"%s and %s are the same server (one run id): each node must be an independent master, listed once",
				s.nodes[min(i, j)].name, s.nodes[max(i, j)].name)}
			p.err = s.dup
			return
		}
	}
	p.runID = id
	p.known.Store(true)
	s.known.Add(1)
}
