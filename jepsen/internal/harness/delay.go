package harness

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"
)

// Listen announces on the node's network namespace: the listener's socket
// is made there, by a thread that enters it, as DialContext's is, and its
// connections come over the node's link, whatever goroutine accepts them.
func (node *Node) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := node.in(func() (err error) {
		l, err = (&net.ListenConfig{}).Listen(ctx, network, addr)
		return err
	})
	return l, err
}

// Limits of a Delayer's connections.
const (
	delayChunk   = 16 << 10               // the most bytes read at once, each way
	delayQueue   = 256                    // the most chunks held, each way; past that, reading waits
	upstreamDial = 500 * time.Millisecond // the longest dial of the upstream
)

// A Delayer is a TCP proxy in a server's node that delays what it
// forwards, in user space, as this kernel has no netem. Clients dial
// [Delayer.Addr] (node.IP:port), and it
// forwards each connection to its upstream, dialed from the node's
// namespace, so that the hop to the server is local and no fault on the
// bridge touches it.
//
// Each chunk of bytes that it reads, each way, is held for the delay in
// force when it arrived ([Delayer.Set]), and chunks keep their order: a
// chunk is delivered no earlier than the one before it. A round trip
// through a Delayer is thus delayed twice. The end of a side is a chunk
// too: once what that side sent before it is delivered, and the end's own
// delay has passed, both ends of the connection are closed. Connecting is
// not delayed: the proxy's kernel accepts at once, and the first round
// trip carries the delay.
//
// At most 256 chunks of up to 16 KiB are held each way; past that the
// Delayer stops reading, and TCP's flow control holds the sender, as a
// full queue would.
type Delayer struct {
	node     *Node
	upstream string
	ln       net.Listener
	ctx      context.Context // ended by Close, for dials of the upstream
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the Delayer's goroutines

	mu           sync.Mutex
	mean, jitter time.Duration
	rng          *rand.Rand
	links        map[*link]struct{}
	closed       bool
}

// NewDelayer starts a Delayer listening on node.IP:port (port 0 picks a
// free one) that forwards to upstream, a host:port that node reaches,
// with no delay until Set. Its jitter is drawn from a source seeded with
// seed: the same seed draws the same sequence of delays, though which
// chunk takes which draw depends on the order in which chunks arrive.
// Close stops it.
func NewDelayer(node *Node, port int, upstream string, seed uint64) (*Delayer, error) {
	ln, err := node.Listen(context.Background(), "tcp", net.JoinHostPort(node.IP, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Delayer{node: node, upstream: upstream, ln: ln, ctx: ctx, cancel: cancel,
		rng: rand.New(rand.NewPCG(seed, seed)), links: make(map[*link]struct{})}
	d.wg.Add(1)
	go d.accept()
	return d, nil
}

// Addr is the address that clients dial: host:port on the node's address.
func (d *Delayer) Addr() string { return d.ln.Addr().String() }

// Set sets the delay, each way, of what arrives from now on: mean plus
// jitter times a standard normal draw, never below zero. What arrived
// before keeps the delay it had. Set(0, 0) ends the delay. It is safe for
// concurrent use.
func (d *Delayer) Set(mean, jitter time.Duration) {
	d.mu.Lock()
	d.mean, d.jitter = mean, jitter
	d.mu.Unlock()
}

// delay draws the delay of a chunk that arrives now.
func (d *Delayer) delay() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.jitter == 0 {
		return max(d.mean, 0)
	}
	return max(d.mean+time.Duration(d.rng.NormFloat64()*float64(d.jitter)), 0)
}

// Close stops listening, closes both ends of every connection it forwards,
// dropping what it held, and returns once its goroutines have ended.
func (d *Delayer) Close() error {
	d.mu.Lock()
	d.closed = true
	links := make([]*link, 0, len(d.links))
	for l := range d.links {
		links = append(links, l)
	}
	d.mu.Unlock()
	d.cancel()
	err := d.ln.Close()
	for _, l := range links {
		l.close()
	}
	d.wg.Wait()
	return err
}

// accept accepts connections until Close, backing off from errors such as
// running out of file descriptors.
func (d *Delayer) accept() {
	defer d.wg.Done()
	var backoff time.Duration
	for {
		c, err := d.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		d.wg.Add(1)
		go d.forward(c)
	}
}

// forward dials the upstream for the client c, and starts the link
// between them; if the dial fails, as when the server is down, it closes
// c.
func (d *Delayer) forward(c net.Conn) {
	defer d.wg.Done()
	ctx, cancel := context.WithTimeout(d.ctx, upstreamDial)
	u, err := d.node.DialContext(ctx, "tcp", d.upstream)
	cancel()
	if err != nil {
		c.Close()
		return
	}
	l := &link{d: d, client: c, server: u, done: make(chan struct{})}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	d.links[l] = struct{}{}
	d.mu.Unlock()
	d.wg.Add(4)
	go l.pipe(c, u)
	go l.pipe(u, c)
}

// A link is a client's connection and its upstream's, forwarded both ways.
type link struct {
	d              *Delayer
	client, server net.Conn
	once           sync.Once
	done           chan struct{} // closed by close
}

// close closes both ends of the link, once, and forgets it.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.server.Close()
		l.d.mu.Lock()
		delete(l.d.links, l)
		l.d.mu.Unlock()
	})
}

// A chunk is bytes read from one side, or its end (data nil), due to be
// delivered to the other at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe forwards from src to dst: it reads chunks and stamps them with
// their delay, and a goroutine of its own delivers them in order once due.
// Each calls d.wg.Done as it returns. The end of src, or an error either
// way, closes the link.
func (l *link) pipe(src, dst net.Conn) {
	defer l.d.wg.Done()
	queue := make(chan chunk, delayQueue)
	go l.deliver(dst, queue)
	send := func(c chunk) bool {
		select {
		case queue <- c:
			return true
		case <-l.done:
			return false
		}
	}
	buf := make([]byte, delayChunk)
	for {
		n, err := src.Read(buf)
		due := time.Now().Add(l.d.delay())
		if n > 0 && !send(chunk{data: append([]byte(nil), buf[:n]...), due: due}) {
			return
		}
		if err != nil {
			send(chunk{due: due})
			return
		}
	}
}

// deliver writes the chunks of queue to dst, each at its due time or once
// the one before it is written, whichever is later, up to the end of the
// side, which closes the link.
func (l *link) deliver(dst net.Conn, queue <-chan chunk) {
	defer l.d.wg.Done()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var c chunk
		select {
		case c = <-queue:
		case <-l.done:
			return
		}
		if wait := time.Until(c.due); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait) // it fired, and was received, before
			}
			select {
			case <-timer.C:
			case <-l.done:
				return
			}
		}
		if c.data == nil {
			l.close()
			return
		}
		if _, err := dst.Write(c.data); err != nil {
			l.close()
			return
		}
	}
}
