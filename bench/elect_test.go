package bench

import (
	"context"
	"errors"
	"flag"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// crashLease is the lease of BenchmarkElectHandover's crash case: short
// by default, so that a crashed leader's key expires within a second; the
// Elector's default, 15s, takes -elect.lease 15s.
var crashLease = flag.Duration("elect.lease", time.Second, "the lease of BenchmarkElectHandover's crash case")

// BenchmarkElectHandover measures how long the leadership of an elect
// Elector is vacant when it passes from a leader, A, to the one candidate
// queued behind it, B, each an Elector over a Locker and a client of its
// own (two processes' worth), over each driver that can subscribe, on a
// server of its own (BenchmarkElectHandover/<case>/<driver>):
//
//   - resign: A resigns (Term.Resign), which wakes B by pub/sub; from the
//     call of Resign to the return of B's Campaign. Lease 10s.
//   - crash: A stops refreshing and releasing, as a killed process would
//     (its Locker's refreshes and releases hang, unsent, until their
//     context ends), with a lease of 1s (-elect.lease), the rest of the
//     options the defaults (an interval of a tenth of the lease, at most
//     1s); from the crash to the return of B's Campaign. A crashes right
//     after B queued, a few milliseconds into its lease. net-*: from the
//     end of A's lease (when its last obtain or refresh that succeeded was
//     sent, plus the lease: the earliest the server could expire the key)
//     to B's election.
//
// Each iteration is one handover, the two changing roles from one to the
// next; B is queued, and listening, before A resigns or crashes. It
// reports, over the iterations, p50-ms, p99-ms and max-ms (and net-p50-ms,
// net-p99-ms, net-max-ms for crash); ns/op is the mean handover, the setup
// of an iteration (B's campaign until it waits) left out.
//
//	go test -run '^$' -bench ElectHandover/resign -benchtime 300ms
//	go test -run '^$' -bench ElectHandover/crash -benchtime 10x
//	go test -run '^$' -bench ElectHandover/crash/goredis -benchtime 3x -elect.lease 15s
func BenchmarkElectHandover(b *testing.B) {
	addr := redistest.Start(b, 1)[0].Addr
	for _, c := range []struct {
		name  string
		lease time.Duration
		crash bool
	}{{"resign", ttl, false}, {"crash", *crashLease, true}} {
		for _, d := range drivers {
			b.Run(c.name+"/"+d, func(b *testing.B) {
				if !subscribes(b, d, addr) {
					b.Skipf("the %s driver cannot subscribe: a resignation would wake nobody", d)
				}
				handover(b, d, addr, "elect:"+c.name+"/"+d, c.lease, c.crash)
			})
		}
	}
}

// handover runs BenchmarkElectHandover's case over driver d: a handover of
// key per iteration, by resignation, or with crash by a crash.
func handover(b *testing.B, d, addr, key string, lease time.Duration, crash bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hang detector
	defer cancel()
	cs := [2]*candidate{newCandidate(b, d, addr, key, lease), newCandidate(b, d, addr, key, lease)}
	term, err := cs[0].e.Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var took, vacant []time.Duration // from the resignation or crash; from the lease's end
	leader := 0
	for b.Loop() {
		a, next := cs[leader], cs[1-leader]
		elected := next.campaign(ctx)
		select {
		case <-next.ready:
		case r := <-elected:
			b.Fatalf("B's Campaign returned while A held its term: %v, %v", r.term, r.err)
		case <-time.After(time.Minute):
			b.Fatal("B's Campaign did not wait, listening, within a minute")
		}
		start := time.Now()
		if crash {
			a.crashed.Store(true)
		} else if err := term.Resign(ctx); err != nil {
			b.Fatal(err)
		}
		r := <-elected
		if r.err != nil {
			b.Fatal(r.err)
		}
		took = append(took, r.at.Sub(start))
		if crash {
			vacant = append(vacant, r.at.Sub(a.lastSent().Add(lease)))
			<-term.Done() // it stepped down: its refreshes have stopped
			a.crashed.Store(false)
		}
		if r.term.Number() <= term.Number() {
			b.Fatalf("B's term %d follows A's %d: want a larger number", r.term.Number(), term.Number())
		}
		term, leader = r.term, 1-leader
	}
	if err := term.Resign(ctx); err != nil {
		b.Fatal(err)
	}
	reportHandovers(b, "", took)
	if crash {
		reportHandovers(b, "net-", vacant)
	}
}

// reportHandovers reports the p50, p99 and greatest of ds, in ms, as
// prefix+"p50-ms" and so on; without a prefix, ns/op is their mean.
func reportHandovers(b *testing.B, prefix string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	slices.Sort(ds)
	if prefix == "" {
		b.ReportMetric(float64(sum.Nanoseconds())/float64(len(ds)), "ns/op")
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(quantile(ds, 0.50)), prefix+"p50-ms")
	b.ReportMetric(ms(quantile(ds, 0.99)), prefix+"p99-ms")
	b.ReportMetric(ms(ds[len(ds)-1]), prefix+"max-ms")
}

// candidate is one of BenchmarkElectHandover's two candidates: an Elector
// over a Locker and a client of its own, whose lock hooks say when its
// campaign waits, queued and listening, remember when its lease was last
// confirmed, and crash it.
//
// A campaign listens from its first refusal on; the first subscription to
// the key's channel is confirmed by a wake-up ("subscribed"), after which
// the campaign tries again. The channel then stays subscribed (for 30s
// after its last waiter left, much longer than an iteration), and the next
// campaigns join it at once, with no such wake-up: so a refusal once the
// candidate was ever subscribed says that it waits, listening.
type candidate struct {
	e          *elect.Elector
	crashed    atomic.Bool   // refreshes and releases hang, unsent, until their context ends
	subscribed atomic.Bool   // a subscription to the key's channel was confirmed
	ready      chan struct{} // an attempt was refused once subscribed: the campaign waits, listening

	mu   sync.Mutex
	sent time.Time // when the last obtain or refresh that succeeded was sent
}

// newCandidate returns a candidate for key over driver d, with lease and
// the other options the defaults.
func newCandidate(b *testing.B, d, addr, key string, lease time.Duration) *candidate {
	c := &candidate{ready: make(chan struct{}, 1)}
	l, err := single.New(conn(b, d, addr, nil))
	if err != nil {
		b.Fatal(err)
	}
	e, err := elect.New(l.With(lock.WithHooks(c.hooks())), key, elect.WithLease(lease))
	if err != nil {
		b.Fatal(err)
	}
	c.e = e
	return c
}

// hooks returns the lock hooks of the candidate's Locker.
func (c *candidate) hooks() *lock.Hooks {
	sent := func(at time.Time) {
		c.mu.Lock()
		c.sent = at
		c.mu.Unlock()
	}
	return &lock.Hooks{
		Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			at := time.Now()
			err := next(ctx)
			var refused *lock.NotObtainedError
			switch {
			case err == nil:
				sent(at)
			case errors.As(err, &refused) && c.subscribed.Load():
				select {
				case c.ready <- struct{}{}:
				default:
				}
			}
			return err
		},
		Wait: func(ctx context.Context, e lock.Event) {
			if e.Op == "woken" && e.Reason == "subscribed" {
				c.subscribed.Store(true)
			}
		},
		Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			if c.crashed.Load() && (e.Op == "refresh" || e.Op == "release") {
				<-ctx.Done()
				return ctx.Err()
			}
			at := time.Now()
			err := next(ctx)
			if e.Op == "refresh" && err == nil {
				sent(at)
			}
			return err
		},
	}
}

// lastSent returns when the candidate's last obtain or refresh that
// succeeded was sent.
func (c *candidate) lastSent() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent
}

// elected is what a candidate's Campaign returned, and when.
type elected struct {
	term *elect.Term
	err  error
	at   time.Time
}

// campaign starts the candidate's Campaign, and returns the channel of
// its outcome; ready is signalled once it waits, queued and listening.
func (c *candidate) campaign(ctx context.Context) <-chan elected {
	select {
	case <-c.ready:
	default:
	}
	out := make(chan elected, 1)
	go func() {
		t, err := c.e.Campaign(ctx)
		out <- elected{t, err, time.Now()}
	}()
	return out
}
