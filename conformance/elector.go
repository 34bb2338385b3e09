package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/internal/glob"
	"github.com/locksmith-go/lock/internal/notify"
)

// ElectorHarness builds the Lockers that the election suite's Electors
// campaign through. NewLocker, Conn and Counter are required; Pause and
// Restart enable the properties that need them: a property whose field is
// not set fails, naming the field, unless Skip names it.
type ElectorHarness struct {
	// NewLocker returns a Locker of the strategy under test, over a client
	// of its own, as a separate process's would be. Close what it opens
	// with t.Cleanup.
	NewLocker func(t *testing.T) *lock.Locker

	// Conn returns a connection to the server, for deleting and
	// overwriting keys behind the candidates' backs.
	Conn func(t *testing.T) driver.Conn

	// Counter returns the name of the key that numbers the terms of an
	// election on key (for the single strategy, single.FenceKey's).
	Counter func(key string) string

	// Pause stops the server for d (SIGSTOP, then SIGCONT), and returns
	// once it runs again.
	Pause func(t *testing.T, d time.Duration)

	// Restart restarts the server, which keeps its data (persistence),
	// and returns once it serves again.
	Restart func(t *testing.T)

	// Lease is the lease of the Electors that the suite lets expire; it
	// must be long enough for a few round trips on a loaded machine. The
	// default is 600ms.
	Lease time.Duration

	// Skip names the properties the implementation cannot meet, or the
	// harness cannot check, each with the reason, as Harness.Skip does.
	Skip map[string]string
}

// electorProperty is one property of RunElector.
type electorProperty struct {
	name  string
	needs string // the optional ElectorHarness field it needs; "" for none
	f     func(s electorSuite, t *testing.T, ctx context.Context)
}

// electorProperties are RunElector's, in order.
var electorProperties = []electorProperty{
	{"OneLeaderPerTerm", "", electorSuite.oneLeaderPerTerm},
	{"TermsIncrease", "", electorSuite.termsIncrease},
	{"TermsIncreaseAcrossRestart", "Restart", electorSuite.termsIncreaseAcrossRestart},
	{"LossBeforeNextLeader", "", electorSuite.lossBeforeNextLeader},
	{"LossBeforeNextLeaderWhenPaused", "Pause", electorSuite.lossWhenPaused},
	{"NoReleaseWhileLeadRuns", "", electorSuite.noReleaseWhileLeadRuns},
	{"ObserversSeeEveryTerm", "", electorSuite.observersSeeEveryTerm},
	{"CancelledCampaignLeavesNothing", "", electorSuite.cancelledCampaignLeavesNothing},
	{"ResignIsIdempotent", "", electorSuite.resignIsIdempotent},
	{"HandoverWakesTheNext", "", electorSuite.handoverWakesTheNext},
	{"ProclaimKeepsTheTerm", "", electorSuite.proclaimKeepsTheTerm},
	{"RunReturnsLeadsError", "", electorSuite.runReturnsLeadsError},
}

// RunElector runs the election suite as subtests of t, one per property,
// named after it, against Electors (package elect) over the Lockers that
// h builds. These are the properties, with the ElectorHarness field that
// a property needs, if any:
//
//   - OneLeaderPerTerm: candidates with one identity, campaigning in a
//     loop (Elector.Run), never lead at once (a [Detector] watches), and
//     each term has its own number, larger than the one before.
//   - TermsIncrease: the next term's number is larger after a Resign, an
//     expiry (the leader's refreshes blocked), a killed candidate (all its
//     calls blocked), a Break, a deleted key, an overwritten key and a
//     deleted counter.
//   - TermsIncreaseAcrossRestart (Restart): and after a restart of the
//     server.
//   - LossBeforeNextLeader: a leader whose refreshes are blocked is told
//     to stop (ErrStepDown, the stop grace before its lease ends), and its
//     lead returns before the next leader is elected; the margin is
//     logged.
//   - LossBeforeNextLeaderWhenPaused (Pause): the same with the server
//     paused past the lease.
//   - NoReleaseWhileLeadRuns: Run keeps the lease while lead runs after its
//     context ended, so nobody else is elected; and a lead that returns
//     past the end of its lease is reported as an overrun (Hooks.Ended).
//   - ObserversSeeEveryTerm: an observer (Elector.Observe) sees each term,
//     or a Gap with the exact count of those it missed, then Vacant once
//     the key is gone, never naming the gone leader again; through a
//     stretch of failed readings, it converges, gaps counted.
//   - CancelledCampaignLeavesNothing: a campaign that its context ends
//     returns the context's error, and leaves no place in the queue, no
//     subscription once the process's linger passed (30s: a channel stays
//     subscribed that long after its last waiter, for the next), and no
//     key but the counter once the leader resigns.
//   - ResignIsIdempotent: a second Resign returns nil and deletes nothing
//     of the successor's; a Resign that got no answer can be called again,
//     and never deletes a successor.
//   - HandoverWakesTheNext: a Resign wakes the next candidate, whose timer
//     is a minute, at once; the handover times are logged.
//   - ProclaimKeepsTheTerm: a Proclaim changes the identity that Leader
//     reads and keeps the term; a deposed leader's writes nothing.
//   - RunReturnsLeadsError: an error of lead ends Run with it, after the
//     release; the end of Run's ctx ends it with ctx's error.
//
// RunElector fails on a key of ElectorHarness.Skip that names no property.
func RunElector(t *testing.T, h ElectorHarness) {
	if h.NewLocker == nil || h.Conn == nil || h.Counter == nil {
		t.Fatal("conformance: ElectorHarness.NewLocker, Conn and Counter are required")
	}
	if h.Lease == 0 {
		h.Lease = 600 * time.Millisecond
	}
	var names []string
	for _, p := range electorProperties {
		names = append(names, p.name)
	}
	for name := range h.Skip {
		if !slices.Contains(names, name) {
			t.Errorf("conformance: ElectorHarness.Skip names %q, which is not a property of the suite; the properties are %s", name, strings.Join(names, ", "))
		}
	}
	s := electorSuite{h}
	for _, p := range electorProperties {
		t.Run(p.name, func(t *testing.T) {
			if reason, ok := h.Skip[p.name]; ok {
				t.Skipf("ElectorHarness.Skip: %s", reason)
			}
			if !h.has(p.needs) {
				t.Fatalf("%s needs ElectorHarness.%s, which is not set: set it, or name %s in ElectorHarness.Skip with the reason", p.name, p.needs, p.name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), subtestTimeout)
			defer cancel()
			p.f(s, t, ctx)
		})
	}
}

func (h ElectorHarness) has(field string) bool {
	return map[string]bool{"": true, "Pause": h.Pause != nil, "Restart": h.Restart != nil}[field]
}

type electorSuite struct{ h ElectorHarness }

// fault makes a Locker's calls hang until their context ends, unsent, as
// they would if its process were stopped or cut off: the refreshes, the
// releases, or every call. A reading (Inspect) fails at once instead. (Its
// hooks return without calling next: a call sent on a context that ended
// may reach the server all the same, as go-redis sends one.)
type fault struct {
	refresh, release, all, inspect atomic.Bool

	refreshed atomic.Int64 // the refreshes that succeeded
}

// errCutOff is the error of a call that the fault kept from the server.
var errCutOff = errors.New("conformance: the call was kept from the server, as the harness asked")

func (f *fault) option() lock.Option {
	cutOff := func(ctx context.Context) error {
		<-ctx.Done()
		return fmt.Errorf("%w: %w", errCutOff, ctx.Err())
	}
	return lock.WithHooks(&lock.Hooks{
		Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			if f.all.Load() {
				return cutOff(ctx)
			}
			return next(ctx)
		},
		Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			switch {
			case e.Op == "inspect" && f.inspect.Load():
				return errCutOff
			case f.all.Load(), e.Op == "refresh" && f.refresh.Load(), e.Op == "release" && f.release.Load():
				return cutOff(ctx)
			}
			err := next(ctx)
			if e.Op == "refresh" && err == nil {
				f.refreshed.Add(1)
			}
			return err
		},
	})
}

// candidate is an Elector over a Locker of its own, with a fault to inject.
type candidate struct {
	*elect.Elector
	fault  *fault
	locker *lock.Locker
}

// candidate returns a new candidate for key.
func (s electorSuite) candidate(t *testing.T, key string, opts ...elect.Option) candidate {
	t.Helper()
	f := &fault{}
	l := s.h.NewLocker(t).With(f.option())
	opts = append([]elect.Option{elect.WithLease(s.h.Lease), elect.WithStopGrace(s.h.Lease / 4), elect.WithInterval(s.h.Lease / 10)}, opts...)
	e, err := elect.New(l, key, opts...)
	if err != nil {
		t.Fatalf("elect.New = %v, want an Elector", err)
	}
	return candidate{e, f, l}
}

// campaign elects c, or fails t.
func campaign(t *testing.T, ctx context.Context, c candidate) *elect.Term {
	t.Helper()
	term, err := c.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign = %v, want a term", err)
	}
	return term
}

// resign resigns term, or fails t.
func resign(t *testing.T, ctx context.Context, term *elect.Term) {
	t.Helper()
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("Resign of %v = %v, want nil", term, err)
	}
}

// ended waits for term to end, and returns its error.
func ended(t *testing.T, ctx context.Context, term *elect.Term) error {
	t.Helper()
	select {
	case <-term.Done():
		return term.Err()
	case <-ctx.Done():
		t.Fatalf("%v never ended", term)
		return nil
	}
}

func (s electorSuite) oneLeaderPerTerm(t *testing.T, ctx context.Context) {
	const candidates, terms = 4, 40
	key := Key(t)
	var (
		d       Detector
		mu      sync.Mutex
		numbers []int64
	)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for range candidates {
		c := s.candidate(t, key, elect.WithIdentity("one identity"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Run(rctx, func(ctx context.Context, term *elect.Term) error {
				d.Enter()
				mu.Lock()
				numbers = append(numbers, term.Number())
				if len(numbers) >= terms {
					stop()
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				d.Exit()
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled once the terms are done", err)
			}
		}()
	}
	wg.Wait()
	if n := d.Overlaps(); n > 0 {
		t.Errorf("%d of %d terms began while another leader led, want none", n, d.Entries())
	}
	for i := 1; i < len(numbers); i++ {
		if numbers[i] <= numbers[i-1] {
			t.Errorf("term %d began after term %d, want a larger number each time (all: %v)", numbers[i], numbers[i-1], numbers)
			break
		}
	}
	if len(numbers) < terms {
		t.Errorf("%d terms, want %d", len(numbers), terms)
	}
}

func (s electorSuite) termsIncrease(t *testing.T, ctx context.Context) {
	for _, c := range []struct {
		name string
		end  func(t *testing.T, ctx context.Context, key string, c candidate, term *elect.Term)
	}{
		{"after Resign", func(t *testing.T, ctx context.Context, _ string, _ candidate, term *elect.Term) {
			resign(t, ctx, term)
		}},
		{"after an expiry", func(t *testing.T, ctx context.Context, _ string, c candidate, term *elect.Term) {
			c.fault.refresh.Store(true)
			ended(t, ctx, term)
		}},
		{"after a killed candidate", func(t *testing.T, ctx context.Context, _ string, c candidate, term *elect.Term) {
			c.fault.all.Store(true)
			ended(t, ctx, term)
		}},
		{"after a Break", func(t *testing.T, ctx context.Context, key string, _ candidate, _ *elect.Term) {
			if _, err := s.h.NewLocker(t).Break(ctx, key, ""); err != nil {
				t.Fatalf("Break = %v, want nil", err)
			}
		}},
		{"after a deleted key", func(t *testing.T, ctx context.Context, key string, _ candidate, _ *elect.Term) {
			if _, err := s.h.Conn(t).Del(ctx, key); err != nil {
				t.Fatalf("DEL = %v", err)
			}
		}},
		{"after an overwritten key", func(t *testing.T, ctx context.Context, key string, _ candidate, _ *elect.Term) {
			if _, err := driver.Do(ctx, s.h.Conn(t), "SET", key, "intruder", "PX", s.h.Lease.Milliseconds()); err != nil {
				t.Fatalf("SET = %v", err)
			}
		}},
		{"after a deleted counter", func(t *testing.T, ctx context.Context, key string, _ candidate, term *elect.Term) {
			if _, err := s.h.Conn(t).Del(ctx, s.h.Counter(key)); err != nil {
				t.Fatalf("DEL = %v", err)
			}
			resign(t, ctx, term)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := Key(t)
			first := s.candidate(t, key)
			term := campaign(t, ctx, first)
			c.end(t, ctx, key, first, term)
			next := campaign(t, ctx, s.candidate(t, key))
			defer resign(t, ctx, next)
			if next.Number() <= term.Number() {
				t.Errorf("the next term = %d, want more than %d", next.Number(), term.Number())
			}
		})
	}
}

func (s electorSuite) termsIncreaseAcrossRestart(t *testing.T, ctx context.Context) {
	key := Key(t)
	term := campaign(t, ctx, s.candidate(t, key))
	resign(t, ctx, term)
	s.h.Restart(t)
	next := campaign(t, ctx, s.candidate(t, key))
	defer resign(t, ctx, next)
	if next.Number() <= term.Number() {
		t.Errorf("the term after the restart = %d, want more than %d", next.Number(), term.Number())
	}
}

// leadRecord is what a leader's lead and its successor's election
// recorded.
type leadRecord struct {
	returned time.Time // when the old leader's lead returned
	cause    error     // why its context ended
	elected  time.Time // when the next leader was elected
}

// handover elects a leader that leads until its context ends, then
// breaks it with fault, and elects the next; it returns what they
// recorded.
func (s electorSuite) handover(t *testing.T, ctx context.Context, fault func(c candidate)) leadRecord {
	key := Key(t)
	old := s.candidate(t, key)
	var rec leadRecord
	leading := make(chan struct{})
	done := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		done <- old.Run(rctx, func(lctx context.Context, _ *elect.Term) error {
			select {
			case <-leading:
				// A second term: the fault passed, and Run campaigned again.
				<-lctx.Done()
				return nil
			default:
			}
			close(leading)
			<-lctx.Done()
			rec.returned, rec.cause = time.Now(), context.Cause(lctx)
			stop()
			return nil
		})
	}()
	select {
	case <-leading:
	case <-ctx.Done():
		t.Fatal("the first candidate was never elected")
	}
	next := s.candidate(t, key)
	elected := make(chan *elect.Term, 1)
	go func() {
		term, err := next.Campaign(ctx)
		if err != nil {
			t.Errorf("the next candidate's Campaign = %v, want a term", err)
		}
		elected <- term
	}()
	fault(old)
	term := <-elected
	rec.elected = time.Now()
	<-done
	if term != nil {
		resign(t, ctx, term)
	}
	return rec
}

// checkLoss checks that rec's old lead returned before the next leader
// was elected, told by ErrStepDown, and logs the margin.
func (s electorSuite) checkLoss(t *testing.T, rec leadRecord) {
	t.Helper()
	if !errors.Is(rec.cause, elect.ErrStepDown) {
		t.Errorf("the cause of the old lead's end = %v, want ErrStepDown", rec.cause)
	}
	if rec.returned.IsZero() || !rec.returned.Before(rec.elected) {
		t.Fatalf("the old lead returned at %v, the next leader was elected at %v: want the lead to return first",
			rec.returned.Format(time.StampMicro), rec.elected.Format(time.StampMicro))
	}
	t.Logf("the old lead returned %v before the next leader was elected (stop grace %v)", rec.elected.Sub(rec.returned).Round(time.Millisecond), s.h.Lease/4)
}

func (s electorSuite) lossBeforeNextLeader(t *testing.T, ctx context.Context) {
	// Cut off: neither its refreshes nor its release reach the server.
	s.checkLoss(t, s.handover(t, ctx, func(c candidate) { c.fault.refresh.Store(true); c.fault.release.Store(true) }))
}

func (s electorSuite) lossWhenPaused(t *testing.T, ctx context.Context) {
	// Paused a little past the lease: the next leader gets in once it runs
	// again, which a leader that counted its lease too long outlives.
	s.checkLoss(t, s.handover(t, ctx, func(candidate) { s.h.Pause(t, s.h.Lease*5/4) }))
}

func (s electorSuite) noReleaseWhileLeadRuns(t *testing.T, ctx context.Context) {
	t.Run("after Run's ctx ended", func(t *testing.T) {
		key := Key(t)
		// A lease of 3s, refreshed every second: the old leader refreshes
		// it four times while the next candidate tries, so a lease that
		// was not renewed would end meanwhile, and only a stall of two
		// seconds could end a renewed one.
		const lease = 3 * time.Second
		old := s.candidate(t, key, elect.WithLease(lease), elect.WithStopGrace(lease/4))
		leading, finish := make(chan struct{}), make(chan struct{})
		rctx, stop := context.WithCancel(ctx)
		var returned atomic.Bool
		done := make(chan error, 1)
		go func() {
			done <- old.Run(rctx, func(lctx context.Context, _ *elect.Term) error {
				close(leading)
				<-lctx.Done()
				<-finish // winding down, past the end of its context
				returned.Store(true)
				return nil
			})
		}()
		<-leading
		stop()
		// The next candidate tries every few milliseconds, and counts its
		// attempts: while it tries, and the old leader refreshes its lease,
		// nobody must have released.
		var attempts atomic.Int64
		tried := make(chan struct{}, 1)
		counter := lock.WithHooks(&lock.Hooks{Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			err := next(ctx)
			attempts.Add(1)
			select {
			case tried <- struct{}{}:
			default:
			}
			return err
		}})
		e, err := elect.New(s.h.NewLocker(t).With(counter), key, elect.WithLease(lease), elect.WithInterval(5*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		elected := make(chan *elect.Term, 1)
		go func() {
			term, err := e.Campaign(ctx)
			if err != nil {
				t.Errorf("the next candidate's Campaign = %v, want a term", err)
			}
			if !returned.Load() {
				t.Errorf("the next candidate was elected while the old lead ran, want it elected after")
			}
			elected <- term
		}()
		for refreshed := old.fault.refreshed.Load(); attempts.Load() < 5 || old.fault.refreshed.Load() < refreshed+4; {
			select {
			case <-tried:
			case <-time.After(s.h.Lease / 10):
			}
		}
		close(finish)
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		if term := <-elected; term != nil {
			resign(t, ctx, term)
		}
	})
	t.Run("an overrun is reported", func(t *testing.T) {
		key := Key(t)
		overruns := make(chan time.Duration, 1)
		hooks := elect.WithHooks(&elect.Hooks{Ended: func(_ *elect.Term, _ error, overrun time.Duration) { overruns <- overrun }})
		old := s.candidate(t, key, hooks)
		next := s.candidate(t, key)
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		elected := make(chan *elect.Term, 1)
		done := make(chan error, 1)
		go func() {
			done <- old.Run(rctx, func(lctx context.Context, _ *elect.Term) error {
				old.fault.refresh.Store(true)
				<-lctx.Done()
				// It goes on past its lease, until the next leader is in.
				go func() {
					term, err := next.Campaign(ctx)
					if err != nil {
						t.Errorf("the next candidate's Campaign = %v, want a term", err)
					}
					elected <- term
				}()
				term := <-elected
				elected <- term
				stop()
				return nil
			})
		}()
		<-done
		if term := <-elected; term != nil {
			resign(t, ctx, term)
		}
		if d := <-overruns; d <= 0 {
			t.Errorf("the overrun that Ended reported = %v, want more than 0: lead returned after the next leader was elected", d)
		} else {
			t.Logf("overrun %v", d.Round(time.Millisecond))
		}
	})
}

// observed collects an observer's events.
type observed struct {
	mu  sync.Mutex
	evs []elect.Event
	new chan struct{}
}

func observe(ctx context.Context, e *elect.Elector) *observed {
	o := &observed{new: make(chan struct{}, 1)}
	go func() {
		for ev := range e.Observe(ctx) {
			o.mu.Lock()
			o.evs = append(o.evs, ev)
			o.mu.Unlock()
			select {
			case o.new <- struct{}{}:
			default:
			}
		}
	}()
	return o
}

// until waits for an event that ok accepts, and returns the events.
func (o *observed) until(t *testing.T, ctx context.Context, what string, ok func(elect.Event) bool) []elect.Event {
	t.Helper()
	for {
		o.mu.Lock()
		evs := slices.Clone(o.evs)
		o.mu.Unlock()
		if len(evs) > 0 && ok(evs[len(evs)-1]) {
			return evs
		}
		select {
		case <-o.new:
		case <-ctx.Done():
			t.Fatalf("the observer never saw %s; it saw %v", what, describeEvents(evs))
		}
	}
}

func describeEvents(evs []elect.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		switch ev.Kind {
		case elect.Gap:
			fmt.Fprintf(&b, "[gap %d] ", ev.Missed)
		case elect.Error:
			b.WriteString("[error] ")
		default:
			fmt.Fprintf(&b, "[%v %d %s] ", ev.Kind, ev.Leader.Term, ev.Leader.Identity)
		}
	}
	return b.String()
}

// checkEvents checks that evs account for every term from the first they
// name to last, each once, in order, with exact gaps, and that every
// Elected names a term of elected.
func checkEvents(t *testing.T, evs []elect.Event, elected map[int64]bool, last int64) {
	t.Helper()
	var (
		at     int64 // the last term accounted for; 0 before the first
		missed int64
		seen   int
	)
	for _, ev := range evs {
		switch ev.Kind {
		case elect.Error:
			continue
		case elect.Gap:
			missed += ev.Missed
			continue
		case elect.Proclaimed:
			continue
		case elect.Elected:
			seen++
			if !elected[ev.Leader.Term] {
				t.Errorf("the observer saw term %d elected, which no candidate was (events: %s)", ev.Leader.Term, describeEvents(evs))
			}
			if at > 0 && ev.Leader.Term != at+missed+1 {
				t.Errorf("the observer saw term %d after term %d and a gap of %d: want term %d (events: %s)", ev.Leader.Term, at, missed, at+missed+1, describeEvents(evs))
			}
		case elect.Vacant:
			if at > 0 && ev.Leader.Term != at+missed {
				t.Errorf("the observer saw vacant after term %d at term %d, after a gap of %d: want term %d (events: %s)", at, ev.Leader.Term, missed, at+missed, describeEvents(evs))
			}
		}
		at, missed = ev.Leader.Term, 0
	}
	if at != last {
		t.Errorf("the observer's last term = %d, want %d (events: %s)", at, last, describeEvents(evs))
	}
	t.Logf("the observer saw %d of %d terms, and counted the others in gaps", seen, len(elected))
}

func (s electorSuite) observersSeeEveryTerm(t *testing.T, ctx context.Context) {
	key := Key(t)
	watcher := s.candidate(t, key, elect.WithInterval(5*time.Millisecond))
	octx, stop := context.WithCancel(ctx)
	defer stop()
	o := observe(octx, watcher.Elector)
	o.until(t, ctx, "the first reading", func(elect.Event) bool { return true })
	elected := map[int64]bool{}
	var last int64
	lead := func(wait bool, c candidate) {
		term := campaign(t, ctx, c)
		elected[term.Number()], last = true, term.Number()
		if wait {
			// At that term or past it: checkEvents tells a wrong number.
			o.until(t, ctx, fmt.Sprintf("term %d", term.Number()), func(ev elect.Event) bool {
				return ev.Kind == elect.Elected && ev.Leader.Term >= term.Number()
			})
		}
		resign(t, ctx, term)
	}
	for i := range 12 {
		// Some terms last until the observer saw them; the others pass
		// between two readings, most likely.
		lead(i%3 == 0, s.candidate(t, key))
	}
	// A stretch of failed readings, during which terms come and go.
	watcher.fault.inspect.Store(true)
	o.until(t, ctx, "a failed reading", func(ev elect.Event) bool { return ev.Kind == elect.Error })
	for range 3 {
		lead(false, s.candidate(t, key))
	}
	watcher.fault.inspect.Store(false)
	evs := o.until(t, ctx, fmt.Sprintf("vacant after term %d", last), func(ev elect.Event) bool {
		return ev.Kind == elect.Vacant && ev.Leader.Term >= last
	})
	checkEvents(t, evs, elected, last)
	// The leader's key deleted behind its back: the observer names it no
	// more.
	c := s.candidate(t, key)
	term := campaign(t, ctx, c)
	elected[term.Number()], last = true, term.Number()
	o.until(t, ctx, fmt.Sprintf("term %d", last), func(ev elect.Event) bool { return ev.Kind == elect.Elected && ev.Leader.Term >= last })
	if _, err := s.h.Conn(t).Del(ctx, key); err != nil {
		t.Fatal(err)
	}
	evs = o.until(t, ctx, "vacant after the key was deleted", func(ev elect.Event) bool { return ev.Kind == elect.Vacant })
	checkEvents(t, evs, elected, last)
	if l, err := watcher.Leader(ctx); !errors.Is(err, elect.ErrNoLeader) {
		t.Errorf("Leader after the key was deleted = %+v, %v, want ErrNoLeader", l, err)
	}
	ended(t, ctx, term)
}

func (s electorSuite) cancelledCampaignLeavesNothing(t *testing.T, ctx context.Context) {
	for _, c := range []struct {
		name string
		want error
	}{
		{"at its deadline", context.DeadlineExceeded},
		{"cancelled", context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each waits out the linger of the subscriptions
			// Its own ctx: the property's ends when the property returns,
			// before its parallel subtests run.
			ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), subtestTimeout)
			defer stop()
			key := Key(t)
			leader := s.candidate(t, key)
			term := campaign(t, ctx, leader)
			var cctx context.Context
			var cancel context.CancelFunc
			if c.want == context.DeadlineExceeded {
				cctx, cancel = context.WithTimeout(ctx, s.h.Lease/2)
			} else {
				cctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(s.h.Lease/2, cancel)
			}
			defer cancel()
			// Its timer is a minute, and so its patience three: only its
			// leaving takes it out of the queue, which its Locker's Close
			// waits for, as for all the work a call left in the background.
			waiter := s.candidate(t, key, elect.WithInterval(noTimer))
			if _, err := waiter.Campaign(cctx); !errors.Is(err, c.want) {
				t.Fatalf("Campaign %s = %v, want %v", c.name, err, c.want)
			}
			if err := waiter.locker.Close(); err != nil {
				t.Fatalf("Close of the waiter's Locker = %v, want nil", err)
			}
			st, err := s.h.NewLocker(t).Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if st.Waiters != 0 {
				t.Fatalf("the queue after the campaign ended: %d waiters, want 0", st.Waiters)
			}
			if chans := s.channelsLeft(t, ctx, key); len(chans) > 0 {
				t.Errorf("channels subscribed after the campaign ended: %q, want none", chans)
			}
			resign(t, ctx, term)
			left := s.keysLeft(t, ctx, key)
			if len(left) > 0 {
				t.Errorf("keys left after the leader resigned: %q, want only the counter %q", left, s.h.Counter(key))
			}
		})
	}
}

// channelsLeft returns the channels named after key that a client is
// subscribed to, on the server of key, once there are none, or the
// linger of a process's subscriptions (notify.Linger, 30s: a channel stays
// subscribed that long after its last waiter left, for the next) and
// waitBound have passed.
func (s electorSuite) channelsLeft(t *testing.T, ctx context.Context, key string) []string {
	t.Helper()
	c := s.h.Conn(t)
	pattern := "*" + glob.Escape(key) + "*"
	for deadline := time.Now().Add(notify.Lingers() + waitBound); ; time.Sleep(10 * time.Millisecond) {
		var left []string
		read := func(c driver.Conn) error {
			for _, sub := range []string{"CHANNELS", "SHARDCHANNELS"} {
				v, err := driver.Do(ctx, c, "PUBSUB", sub, pattern)
				if sub == "SHARDCHANNELS" && err != nil && strings.Contains(err.Error(), "unknown subcommand") {
					continue // a server without sharded pub/sub (an embedded one) has no shard channels
				}
				if err != nil {
					return fmt.Errorf("PUBSUB %s: %w", sub, err)
				}
				found, _ := v.([]any)
				for _, f := range found {
					left = append(left, fmt.Sprint(f))
				}
			}
			return nil
		}
		var err error
		if driver.Pinnable(c) == nil {
			err = driver.Pin(ctx, c, key, read) // on a Cluster, the master of key's slot
		} else {
			err = read(c)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

// keysLeft returns the keys named after key, but its counter, once there
// are none, or waitBound has passed.
func (s electorSuite) keysLeft(t *testing.T, ctx context.Context, key string) []string {
	t.Helper()
	c := s.h.Conn(t)
	for deadline := time.Now().Add(waitBound); ; time.Sleep(10 * time.Millisecond) {
		v, err := keysScript.Run(ctx, c, []string{key}, "*"+glob.Escape(key)+"*")
		if err != nil {
			t.Fatalf("KEYS *%s*: %v", key, err)
		}
		found, _ := v.([]any)
		var left []string
		for _, f := range found {
			if k := fmt.Sprint(f); k != s.h.Counter(key) {
				left = append(left, k)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

func (s electorSuite) resignIsIdempotent(t *testing.T, ctx context.Context) {
	t.Run("twice", func(t *testing.T) {
		key := Key(t)
		term := campaign(t, ctx, s.candidate(t, key))
		resign(t, ctx, term)
		next := campaign(t, ctx, s.candidate(t, key))
		resign(t, ctx, term)
		s.stillLeads(t, ctx, key, next)
		resign(t, ctx, next)
	})
	t.Run("after no answer, and a successor", func(t *testing.T) {
		key := Key(t)
		c := s.candidate(t, key)
		term := campaign(t, ctx, c)
		c.fault.all.Store(true)
		rctx, cancel := context.WithTimeout(ctx, s.h.Lease/10)
		err := term.Resign(rctx)
		cancel()
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Resign that got no answer = %v, want context.DeadlineExceeded", err)
		}
		if !errors.Is(term.Err(), elect.ErrResigned) {
			t.Errorf("Err after Resign = %v, want ErrResigned", term.Err())
		}
		next := campaign(t, ctx, s.candidate(t, key)) // once the lease ended
		c.fault.all.Store(false)
		resign(t, ctx, term)
		s.stillLeads(t, ctx, key, next)
		resign(t, ctx, next)
	})
	t.Run("after no answer, retried", func(t *testing.T) {
		key := Key(t)
		c := s.candidate(t, key, elect.WithLease(longTTL))
		term := campaign(t, ctx, c)
		c.fault.release.Store(true)
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := term.Resign(rctx)
		cancel()
		if err == nil {
			t.Fatal("Resign that got no answer = nil, want its error")
		}
		c.fault.release.Store(false)
		resign(t, ctx, term)
		if l, err := c.Leader(ctx); !errors.Is(err, elect.ErrNoLeader) {
			t.Errorf("Leader after the Resign retried = %+v, %v, want ErrNoLeader", l, err)
		}
	})
}

// stillLeads checks that term leads key, as the server sees it.
func (s electorSuite) stillLeads(t *testing.T, ctx context.Context, key string, term *elect.Term) {
	t.Helper()
	e, err := elect.New(s.h.NewLocker(t), key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.Leader(ctx)
	if err != nil || l.Term != term.Number() {
		t.Errorf("Leader = %+v, %v, want term %d", l, err, term.Number())
	}
	if err := term.Err(); err != nil {
		t.Errorf("the successor's term: Err = %v, want nil", err)
	}
}

func (s electorSuite) handoverWakesTheNext(t *testing.T, ctx context.Context) {
	const rounds = 20
	key := Key(t)
	var handovers []time.Duration
	var reported []time.Duration
	var mu sync.Mutex
	hooks := elect.WithHooks(&elect.Hooks{Elected: func(_ context.Context, _ *elect.Term, d time.Duration) {
		mu.Lock()
		reported = append(reported, d)
		mu.Unlock()
	}})
	// Timers of a minute: only the release's message explains a prompt
	// election.
	a := s.candidate(t, key, elect.WithInterval(time.Minute), elect.WithLease(longTTL), hooks)
	b := s.candidate(t, key, elect.WithInterval(time.Minute), elect.WithLease(longTTL), hooks)
	term := campaign(t, ctx, a)
	for i := range rounds {
		next := b
		if i%2 == 1 {
			next = a
		}
		type result struct {
			term *elect.Term
			err  error
		}
		elected := make(chan result, 1)
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			term, err := next.Campaign(cctx)
			elected <- result{term, err}
		}()
		waitQueued(t, ctx, s.h.NewLocker(t), key)
		resigned := time.Now()
		resign(t, ctx, term)
		var r result
		select {
		case r = <-elected:
		case <-time.After(waitBound):
			cancel()
			<-elected
			t.Fatalf("round %d: the next candidate, whose timer is a minute, was not elected within %v of the Resign: no message woke it", i, waitBound)
		}
		cancel()
		if r.err != nil {
			t.Fatalf("round %d: Campaign = %v, want a term", i, r.err)
		}
		term = r.term
		handovers = append(handovers, time.Since(resigned))
	}
	resign(t, ctx, term)
	slices.Sort(handovers)
	t.Logf("handover after Resign, %d rounds: p50 %v, p99 %v, max %v; as the candidates saw it: %v", rounds,
		handovers[len(handovers)/2], handovers[len(handovers)*99/100], handovers[len(handovers)-1], reported)
}

// waitQueued waits until key's queue holds a waiter.
func waitQueued(t *testing.T, ctx context.Context, l *lock.Locker, key string) {
	t.Helper()
	for {
		st, err := l.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no candidate ever queued")
		case <-time.After(time.Millisecond):
		}
	}
}

func (s electorSuite) proclaimKeepsTheTerm(t *testing.T, ctx context.Context) {
	key := Key(t)
	c := s.candidate(t, key, elect.WithIdentity("before"))
	term := campaign(t, ctx, c)
	if err := term.Proclaim(ctx, "after"); err != nil {
		t.Fatalf("Proclaim = %v, want nil", err)
	}
	if l, err := c.Leader(ctx); err != nil || l.Identity != "after" || l.Term != term.Number() {
		t.Errorf("Leader after Proclaim = %+v, %v, want identity %q and term %d", l, err, "after", term.Number())
	}
	if got := term.Identity(); got != "after" {
		t.Errorf("Identity = %q, want %q", got, "after")
	}
	if _, err := s.h.Conn(t).Del(ctx, key); err != nil {
		t.Fatal(err)
	}
	next := campaign(t, ctx, s.candidate(t, key, elect.WithIdentity("successor")))
	if err := term.Proclaim(ctx, "deposed"); !errors.Is(err, elect.ErrNotLeader) {
		t.Errorf("Proclaim of a deposed leader = %v, want ErrNotLeader", err)
	}
	if l, err := c.Leader(ctx); err != nil || l.Identity != "successor" {
		t.Errorf("Leader after the deposed leader's Proclaim = %+v, %v, want the successor", l, err)
	}
	if err := c.IsLeader(ctx); !errors.Is(err, elect.ErrNotLeader) {
		t.Errorf("IsLeader of the deposed leader = %v, want ErrNotLeader", err)
	}
	resign(t, ctx, next)
}

func (s electorSuite) runReturnsLeadsError(t *testing.T, ctx context.Context) {
	t.Run("lead's error", func(t *testing.T) {
		key := Key(t)
		c := s.candidate(t, key, elect.WithLease(longTTL))
		boom := errors.New("boom")
		err := c.Run(ctx, func(ctx context.Context, _ *elect.Term) error {
			if err := c.IsLeader(ctx); err != nil {
				t.Errorf("IsLeader within lead = %v, want nil", err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("Run = %v, want lead's error", err)
		}
		if err := c.IsLeader(ctx); !errors.Is(err, elect.ErrNotLeader) {
			t.Errorf("IsLeader after Run = %v, want ErrNotLeader", err)
		}
		if l, err := c.Leader(ctx); !errors.Is(err, elect.ErrNoLeader) {
			t.Errorf("Leader after Run = %+v, %v, want ErrNoLeader: Run releases", l, err)
		}
	})
	t.Run("ctx's end", func(t *testing.T) {
		key := Key(t)
		c := s.candidate(t, key, elect.WithLease(longTTL))
		rctx, cancel := context.WithTimeout(ctx, s.h.Lease)
		defer cancel()
		terms := 0
		err := c.Run(rctx, func(ctx context.Context, _ *elect.Term) error {
			terms++
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, context.DeadlineExceeded) || terms != 1 {
			t.Errorf("Run = %v after %d terms, want context.DeadlineExceeded after 1", err, terms)
		}
	})
}
