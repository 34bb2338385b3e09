package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy/redlock"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
	"github.com/locksmith-go/lock/strategy/single"
)

// Now returns the time on the clock that every process of a run shares:
// CLOCK_MONOTONIC in nanoseconds, one kernel's, so that the times of two
// processes order their events. Go's own monotonic clock is per process.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // CLOCK_MONOTONIC is always there on Linux
	}
	return ts.Nano()
}

// at converts tm, a time of this process, to the shared clock.
func at(tm time.Time) int64 { return Now() + int64(time.Until(tm)) }

// A ClientConfig is what a client process of a run does: it takes locks
// on Keys through a Locker of Strategy over Driver, holds them, writes to
// the run's resources on the control socket, and releases them, until its
// context ends.
type ClientConfig struct {
	Name     string   // unique in the run
	Control  string   // the control socket's path
	Strategy string   // "single", "redlock" or "setnx-getset"
	Driver   string   // one of Drivers
	Addrs    []string // the server, or Redlock's nodes
	// Sentinels name a master that Sentinels monitor, instead of Addrs,
	// for single, and Master is its name.
	Sentinels []string
	Master    string        // the master's name
	Keys      []string      // the keys it locks, one at a time, at random
	TTL       time.Duration // of every lock
	// Hold is the longest of most holds; one in a thousand lasts from one to
	// two TTLs, refreshed as it goes.
	Hold     time.Duration
	Fencing  bool // lock.WithFencing
	Replicas int  // single.WithReplicas(Replicas, ReplicaTimeout)
	// Skew puts a setnx-getset client's clock this far ahead; Margin is
	// the skew its locks allow for (setnxgetset.WithClockSkew).
	Skew, Margin time.Duration
	Seed         uint64 // of its choices of keys and holds
}

// An Event is one line of a run's history, as a client sends it on the
// control socket. Times are Now's.
type Event struct {
	Type       string `json:"type"`                  // invoke, ok, fail, commit, read, write, fenced, value, release, unreleased
	Client     string `json:"client"`                // ClientConfig.Name
	Hold       string `json:"hold"`                  // the client's hold: Client#n
	Key        string `json:"key"`                   // the lock's key
	Time       int64  `json:"time"`                  // when the client sent it
	Fence      int64  `json:"fence,omitempty"`       // ok: the fencing token
	ValidUntil int64  `json:"valid_until,omitempty"` // ok, release: the end of the validity, as the holder knew it
	Lost       int64  `json:"lost,omitempty"`        // release: when the holder learnt of its loss
	// write: the counter's new value; value: the hold's acquisition time.
	Value int64 `json:"value,omitempty"`
	// fail, unreleased: why the Obtain or the Release failed, as a class
	// (no-answer, not-obtained, replica) or, for any other error, its
	// message. Errors never hold tokens.
	Err string `json:"err,omitempty"`
}

// A Reply answers the events that ask: commit, read (Value), write,
// fenced (OK) and value.
type Reply struct {
	Value int64 `json:"value"` // read: the counter's value
	OK    bool  `json:"ok"`    // fenced: whether the register took the write
}

// RunClient runs the client that c describes until ctx ends, then releases
// what it holds and returns. Its dialer is the process's own: the process
// runs in its node's namespace.
func RunClient(ctx context.Context, c ClientConfig) error {
	l, closers, err := c.locker()
	if err != nil {
		return err
	}
	defer func() {
		for _, cl := range closers {
			cl.Close()
		}
	}()
	sock, err := net.Dial("unix", c.Control)
	if err != nil {
		return fmt.Errorf("jepsen: client %s: control socket: %w", c.Name, err)
	}
	defer sock.Close()
	w := &wire{enc: json.NewEncoder(sock), dec: json.NewDecoder(bufio.NewReader(sock)), client: c.Name}
	rng := rand.New(rand.NewPCG(c.Seed, 0x6a657073656e))
	opts := []lock.Option{lock.WithRetry(lock.Linear(10 * time.Millisecond))}
	if c.Fencing {
		opts = append(opts, lock.WithFencing())
	}
	for n := 0; ctx.Err() == nil; n++ {
		if err := c.hold(ctx, l, w, rng, fmt.Sprintf("%s#%d", c.Name, n), opts); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// hold takes one hold of a key, named id, and reports it on w.
func (c ClientConfig) hold(ctx context.Context, l *lock.Locker, w *wire, rng *rand.Rand, id string, opts []lock.Option) error {
	key := c.Keys[rng.IntN(len(c.Keys))]
	ev := Event{Hold: id, Key: key}
	if err := w.send("invoke", ev); err != nil {
		return err
	}
	// An Obtain has a second, as a client's request would: a fault then
	// ends it.
	attempt, cancel := context.WithTimeout(ctx, time.Second)
	lk, err := l.Obtain(attempt, key, c.TTL, opts...)
	cancel()
	if err != nil && ctx.Err() != nil { // the run's end
		return nil
	}
	if err != nil {
		ev.Err = class(err)
		if err := w.send("fail", ev); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
		return nil
	}
	obtained := Now()
	var lost atomic.Int64
	go func() {
		<-lk.Done()
		lost.CompareAndSwap(0, Now())
	}()
	ev.Fence, _ = lk.Fence()
	ev.ValidUntil = at(lk.ValidUntil())
	if err := w.send("ok", ev); err != nil {
		return errors.Join(err, release(lk))
	}
	d := time.Duration(rng.Int64N(int64(c.Hold) + 1))
	if rng.IntN(1000) == 0 {
		d = c.TTL + time.Duration(rng.Int64N(int64(c.TTL)))
	}
	if d > c.TTL/4 {
		_ = lk.StartRefresh(ctx) // a lock already lost shows in Done
	}
	// The work: read the counter, work for d, and, unless the lock was
	// lost meanwhile, commit: write the counter and the registers. The
	// commit is where the parent may pause the client, as a garbage
	// collector may pause a holder between its last check and its write.
	read, err := w.ask(Event{Type: "read", Hold: id, Key: key})
	if err != nil {
		return errors.Join(err, release(lk))
	}
	select {
	case <-time.After(d):
	case <-lk.Done():
	case <-ctx.Done():
	}
	if lk.Err() == nil && ctx.Err() == nil {
		// The parent answers a commit once it has paused the client, if
		// it does: the writes wait for the answer.
		ev.Type = "commit"
		_, err := w.ask(ev)
		if err == nil {
			_, err = w.ask(Event{Type: "write", Hold: id, Key: key, Value: read.Value + 1})
		}
		if err == nil && ev.Fence != 0 {
			_, err = w.ask(Event{Type: "fenced", Hold: id, Key: key, Fence: ev.Fence})
		}
		if err == nil {
			_, err = w.ask(Event{Type: "value", Hold: id, Key: key, Value: obtained})
		}
		if err != nil {
			return errors.Join(err, release(lk))
		}
	}
	if vu := lk.ValidUntil(); !vu.IsZero() { // zero once lost
		ev.ValidUntil = at(vu)
	}
	ev.Lost = lost.Load()
	if err := w.send("release", ev); err != nil {
		return errors.Join(err, release(lk))
	}
	if err := release(lk); err != nil && !errors.Is(err, lock.ErrNotHeld) {
		// The server's refusal (such as NOREPLICAS, under
		// min-replicas-to-write) or no answer: the key expires.
		ev.Err = class(err)
		return w.send("unreleased", ev)
	}
	return nil
}

// release releases lk within a second.
func release(lk *lock.Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return lk.Release(ctx)
}

// class names why an Obtain failed, for the history.
func class(err error) string {
	var re *single.ReplicaError
	switch {
	case errors.As(err, &re):
		return "replica"
	case errors.Is(err, lock.ErrNoAnswer), errors.Is(err, context.DeadlineExceeded):
		return "no-answer"
	case errors.Is(err, lock.ErrNotObtained):
		return "not-obtained"
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// locker returns the client's Locker, and what closes its connections.
func (c ClientConfig) locker() (*lock.Locker, []io.Closer, error) {
	var closers []io.Closer
	dial := (&net.Dialer{}).DialContext
	connect := func(addr string) (driver.Conn, error) {
		conn, cl, err := NewConn(c.Driver, dial, addr)
		if err == nil {
			closers = append(closers, cl)
		}
		return conn, err
	}
	var (
		l   *lock.Locker
		err error
	)
	switch c.Strategy {
	case "single", "setnx-getset":
		var conn driver.Conn
		if len(c.Sentinels) > 0 {
			var cl io.Closer
			conn, cl, err = SentinelConn(c.Driver, dial, c.Sentinels, c.Master)
			if err == nil {
				closers = append(closers, cl)
			}
		} else if len(c.Addrs) == 1 {
			conn, err = connect(c.Addrs[0])
		} else {
			err = fmt.Errorf("%d addresses, want one", len(c.Addrs))
		}
		if err != nil {
			break
		}
		if c.Strategy == "single" {
			var opts []single.Option
			if c.Replicas > 0 {
				opts = append(opts, single.WithReplicas(c.Replicas, 100*time.Millisecond))
			}
			l, err = single.New(conn, opts...)
		} else {
			// Milliseconds, as seconds are too coarse for a TTL of a second,
			// and a safety TTL, so that no key is left without an expiry.
			skew := c.Skew
			l, err = setnxgetset.New(conn, setnxgetset.WithFormat(setnxgetset.Milliseconds),
				setnxgetset.WithClockSkew(c.Margin), setnxgetset.WithSafetyTTL(c.TTL),
				setnxgetset.WithClock(func() time.Time { return time.Now().Add(skew) }))
		}
	case "redlock":
		var conns []driver.Conn
		for _, addr := range c.Addrs {
			conn, e := connect(addr)
			if e != nil {
				err = e
				break
			}
			conns = append(conns, conn)
		}
		if err == nil {
			l, err = redlock.New(conns, redlock.WithNodeTimeout(100*time.Millisecond))
		}
	default:
		err = errors.New("no such strategy")
	}
	if err != nil {
		for _, cl := range closers {
			cl.Close()
		}
		return nil, nil, fmt.Errorf("jepsen: client %s: %s over %s: %w", c.Name, c.Strategy, c.Driver, err)
	}
	return l, closers, nil
}

// wire is a client's end of the control socket.
type wire struct {
	enc    *json.Encoder
	dec    *json.Decoder
	client string
}

// send sends ev as an event of type typ, stamped now; the parent does not
// answer it.
func (w *wire) send(typ string, ev Event) error {
	ev.Type, ev.Client, ev.Time = typ, w.client, Now()
	if err := w.enc.Encode(ev); err != nil {
		return fmt.Errorf("jepsen: client %s: control socket: %w", w.client, err)
	}
	return nil
}

// ask sends ev, stamped now, and returns the parent's answer.
func (w *wire) ask(ev Event) (Reply, error) {
	if err := w.send(ev.Type, ev); err != nil {
		return Reply{}, err
	}
	var r Reply
	if err := w.dec.Decode(&r); err != nil {
		return Reply{}, fmt.Errorf("jepsen: client %s: control socket: %w", w.client, err)
	}
	return r, nil
}
