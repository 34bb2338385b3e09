package lock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locksmith-go/lock/strategy"
)

// batcher refreshes the auto-refreshed locks of a Locker whose strategy
// batches (strategy.Batcher): one timer for them all, no goroutine per
// lock. Each lock may be refreshed from half its refresh interval after
// its last refresh was sent (from) and must be by the end of it (due): the
// timer fires at the earliest due, and a batch takes every lock whose from
// has come, so that locks whose schedules overlap share round trips, and
// those refreshed together stay together. It also watches their validity,
// with one more timer (see sweep). The reasoning is in
// docs/design/batched-refresh.md.
type batcher struct {
	s  strategy.Batcher
	mu sync.Mutex
	// entries are the registered auto-refreshes, one per StartRefresh (a
	// lock whose auto-refresh was stopped and started again may have two,
	// the first still in a batch on its way). An entry in a batch on its
	// way is flying, and goes back to waiting when the batch's reply is in.
	entries map[*batched]struct{}
	refresh alarm // sends the next batch (fire)
	lapses  alarm // ends the locks whose validity passed (sweep)
}

// alarm is a timer set to the earliest of the times it is asked for.
type alarm struct {
	timer *time.Timer
	at    time.Time // when it fires; zero when it is stopped, or firing
}

// set makes the alarm run f at t, unless it runs before.
func (a *alarm) set(t time.Time, f func()) {
	if !a.at.IsZero() && !t.Before(a.at) {
		return
	}
	a.at = t
	if a.timer == nil {
		a.timer = time.AfterFunc(time.Until(t), f)
	} else {
		a.timer.Reset(time.Until(t))
	}
}

// stop stops the alarm.
func (a *alarm) stop() {
	if a.timer != nil {
		a.timer.Stop()
	}
	a.at = time.Time{}
}

// batched is a lock's auto-refresh, registered in its batcher.
type batched struct {
	l        *Lock
	ctx      context.Context // StartRefresh's: its values reach the hooks
	r        *refresher
	from     time.Time   // the lock may be refreshed from then
	due      time.Time   // and must be by then
	flying   bool        // in a batch on its way
	stopping bool        // its context ended while it was flying
	stop     func() bool // stops the context.AfterFunc that calls remove
}

// newBatcher returns the batcher of s, or nil when s does not batch.
func newBatcher(s strategy.Strategy) *batcher {
	if b, ok := s.(strategy.Batcher); ok && b.Batches() {
		return &batcher{s: b, entries: make(map[*batched]struct{})}
	}
	return nil
}

// add registers l's auto-refresh r, which runs until ctx is done, to be
// refreshed first as next says. l.mu must be held: the caller then has
// l.armLocked hand the watch of l's validity to b.
func (b *batcher) add(ctx context.Context, l *Lock, r *refresher, next schedule) {
	e := &batched{l: l, ctx: ctx, r: r, from: next.from, due: next.due}
	b.mu.Lock()
	b.entries[e] = struct{}{}
	b.schedule(next.due)
	b.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { b.remove(e) })
	b.mu.Lock()
	e.stop = stop // a drop before this leaves it to fire once, finding e gone
	b.mu.Unlock()
}

// remove unregisters e, once its batch, if one is on its way, is back.
func (b *batcher) remove(e *batched) {
	b.mu.Lock()
	_, ok := b.entries[e]
	switch {
	case !ok: // removed already
	case e.flying:
		e.stopping = true // the batch's reply removes it
	default:
		b.drop(e)
		defer e.l.rearm()
	}
	b.mu.Unlock()
}

// drop unregisters e and tells its refresher's waiters that it stopped.
// b.mu must be held; the caller then calls e.l.rearm, without it, so that
// the lock's own timer watches its validity again.
func (b *batcher) drop(e *batched) {
	delete(b.entries, e)
	if e.stop != nil {
		e.stop()
	}
	e.r.cancel()
	close(e.r.done)
	if len(b.entries) == 0 {
		b.refresh.stop()
		b.lapses.stop()
	}
}

// rearm has l's own timer watch its validity, once its batcher no longer
// does.
func (l *Lock) rearm() {
	l.mu.Lock()
	l.armLocked()
	l.mu.Unlock()
}

// schedule makes the next batch go at t, unless one goes before. b.mu
// must be held.
func (b *batcher) schedule(t time.Time) { b.refresh.set(t, b.fire) }

// watch makes the sweep run at t, unless it runs before: t is the end of
// the validity of one of b's locks. b.mu must be held.
func (b *batcher) watch(t time.Time) { b.lapses.set(t, b.sweep) }

// sweep ends, with ErrLapsed, each lock whose validity has passed, and
// sets the timer for the next end of one. The locks of a batch whose
// refresh got no answer lapse together: their own timers, one per lock,
// would each start a goroutine at the same moment, and on a busy machine
// the last of thousands would run long after its validity; here one
// goroutine ends them one after another (the reasoning is in
// docs/design/batched-refresh.md).
func (b *batcher) sweep() {
	b.mu.Lock()
	b.lapses.at = time.Time{}
	entries := make([]*batched, 0, len(b.entries))
	for e := range b.entries {
		entries = append(entries, e)
	}
	b.mu.Unlock()
	now := time.Now()
	var next time.Time
	var due []*batched
	for _, e := range entries {
		e.l.mu.Lock()
		until, ended := e.l.validUntil, e.l.cause != nil
		e.l.mu.Unlock()
		switch {
		case ended:
		case !now.Before(until):
			due = append(due, e)
		case next.IsZero() || until.Before(next):
			next = until
		}
	}
	for _, e := range due {
		b.lapse(e)
	}
	if !next.IsZero() {
		b.mu.Lock()
		b.watch(next)
		b.mu.Unlock()
	}
}

// lapse ends e's lock, if its validity has passed, and unregisters e,
// here rather than on a goroutine of the context.AfterFunc that the end of
// its refresher's context would start.
func (b *batcher) lapse(e *batched) {
	b.mu.Lock()
	stopped := e.stop != nil && e.stop()
	b.mu.Unlock()
	switch {
	case e.l.lapse():
		b.remove(e)
	case stopped: // refreshed meanwhile: the context's end must still remove it
		b.mu.Lock()
		e.stop = context.AfterFunc(e.ctx, func() { b.remove(e) })
		b.mu.Unlock()
	}
}

// fire sends the locks whose refresh may come now in one batch, and sets
// the timer for the next one due.
func (b *batcher) fire() {
	now := time.Now()
	var ready []*batched
	b.mu.Lock()
	b.refresh.at = time.Time{}
	var next time.Time
	for e := range b.entries {
		switch {
		case e.flying:
		case !now.Before(e.from):
			e.flying = true
			ready = append(ready, e)
		case next.IsZero() || e.due.Before(next):
			next = e.due
		}
	}
	if !next.IsZero() {
		b.schedule(next)
	}
	b.mu.Unlock()
	if len(ready) > 0 {
		b.send(ready)
	}
}

// send refreshes the locks of entries, which fire marked flying, and
// schedules each one's next refresh, or drops it. It sends them in
// batches of at most chunk locks, those whose validity ends first first,
// up to inFlight batches at once, each with its own deadline: on a machine
// too busy to refresh them all in time, the locks closest to lapsing are
// refreshed first, and a batch that cannot finish in time costs its own
// locks only (see docs/design/batched-refresh.md).
func (b *batcher) send(entries []*batched) {
	until := make(map[*batched]time.Time, len(entries))
	for _, e := range entries {
		e.l.mu.Lock()
		until[e] = e.l.validUntil
		e.l.mu.Unlock()
	}
	slices.SortFunc(entries, func(a, b *batched) int { return until[a].Compare(until[b]) })
	next := make([]schedule, len(entries))
	var wg sync.WaitGroup
	var taken atomic.Int64 // chunks taken by a goroutine
	for range min(inFlight, (len(entries)+chunk-1)/chunk) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(taken.Add(1)-1) * chunk
				if lo >= len(entries) {
					return
				}
				hi := min(lo+chunk, len(entries))
				b.sendChunk(entries[lo:hi], next[lo:hi], len(entries))
			}
		}()
	}
	wg.Wait()
	var dropped []*batched
	b.mu.Lock()
	for i, e := range entries {
		e.flying = false
		if next[i].stop || e.stopping {
			b.drop(e)
			dropped = append(dropped, e)
			continue
		}
		e.from, e.due = next[i].from, next[i].due
		b.schedule(e.due)
	}
	b.mu.Unlock()
	for _, e := range dropped {
		e.l.rearm()
	}
}

// sendChunk refreshes the locks of entries in one batch, of burst sent
// together, and sets next to each one's next refresh.
func (b *batcher) sendChunk(entries []*batched, next []schedule, burst int) {
	r := round{s: b.s, burst: burst}
	var in []int // the indexes of the entries in the round
	for i, e := range entries {
		var m member
		var item strategy.Refresh
		next[i], m, item = take(e.l, e.ctx)
		if m.l != nil {
			r.add(m, item)
			in = append(in, i)
		}
	}
	r.run(func(j int, err error) { next[in[j]] = entries[in[j]].l.after(err) })
}

// chunk is the most locks in one batch, and inFlight the most batches of
// one send on their way at once. A chunk is the locks of one of single's
// scripts (cas.PerScript), so that a send of up to 1000 locks is still one
// round trip; a send of many thousand goes in several batches side by
// side, which get the cores, and their share of them, that a process busy
// with other goroutines leaves them, the locks closest to lapsing first.
const (
	chunk    = 1000
	inFlight = 4
)

// schedule is when a lock is next refreshed, or that its auto-refresh
// stops.
type schedule struct {
	from, due time.Time
	stop      bool
}

// round is one batch: its locks, and what is sent for each (items[i] for
// members[i]).
type round struct {
	s        strategy.Batcher
	burst    int           // the locks sent at about the same time, in this round and those beside it
	sent     time.Time     // set by run, once every lock is in
	until    time.Time     // the earliest end of the members' validity
	interval time.Duration // the shortest of the members' refresh intervals
	members  []member
	items    []strategy.Refresh
	links    []context.Context // what the locks' Op hooks passed on
	batched  bool              // the batch went to the strategy
}

// member is a lock of a round.
type member struct {
	l        *Lock
	ctx      context.Context // its StartRefresh context
	ttl      time.Duration   // its TTL, which its refreshes renew
	until    time.Time       // the end of its validity
	interval time.Duration   // its refresh interval
}

// take takes l into a round, taking its ops mutex and spending a refresh
// as Refresh does, and returns it with what to send for it; or it returns
// l's schedule at once, and no member.
func take(l *Lock, ctx context.Context) (schedule, member, strategy.Refresh) {
	if !l.ops.TryLock() {
		// A Refresh, Release or TTL by hand is on its way: try again a
		// quarter interval on, as after a refresh without an answer.
		return l.next(true), member{}, strategy.Refresh{}
	}
	ttl, lease, until, err := l.beginRefresh()
	if err != nil {
		l.ops.Unlock()
		return schedule{stop: true}, member{}, strategy.Refresh{}
	}
	l.mu.Lock()
	item := strategy.Refresh{Key: l.key, Value: l.value, TTL: lease, Unsure: l.unsureValues()}
	l.mu.Unlock()
	return schedule{}, member{l, ctx, ttl, until, l.interval(ttl)}, item
}

// add adds m, taken with item, to the round.
func (r *round) add(m member, item strategy.Refresh) {
	if r.until.IsZero() || m.until.Before(r.until) {
		r.until = m.until
	}
	if r.interval == 0 || m.interval < r.interval {
		r.interval = m.interval
	}
	r.members = append(r.members, m)
	r.items = append(r.items, item)
}

// run sends the round's batch, through each lock's Op hooks, applies each
// answer as Refresh does, releases the locks' ops mutexes, and calls done
// with each member's index and outcome, as Refresh would have returned it.
func (r *round) run(done func(i int, err error)) {
	if len(r.items) == 0 {
		return
	}
	// Each lock's validity counts from now, after the locks were taken in
	// and before anything is sent. The batch gives up when the first of
	// its locks would lapse, or two of their shortest refresh intervals
	// on: a batch of many thousand locks, on a busy machine, may take the
	// client longer than one interval to build and read, and giving up
	// then would only send it again, as large. At the default refresh
	// fraction the second interval ends about when the locks lapse.
	//
	// It also gives up early enough to leave, before the first lapse, the
	// time to signal the lapses (see lapseAllowance), so as not to compete
	// with them, unless that time has come already.
	r.sent = time.Now()
	allow := lapseAllowance(r.burst)
	deadline := r.sent.Add(2 * r.interval)
	if until := r.until.Add(-allow); until.Before(deadline) && until.After(r.sent) {
		deadline = until
	} else if r.until.Before(deadline) {
		deadline = r.until
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	r.nest(ctx, 0)
	if !r.batched {
		// An Op or Batch hook returned without calling next: nothing was
		// sent, and no lock may count the round as a refresh.
		for i := range r.items {
			r.items[i].Grant, r.items[i].Err = strategy.Grant{}, errNotBatched
		}
	}
	for i, m := range r.members {
		l, it := m.l, r.items[i]
		answered := len(it.Unsure) > 0 && (it.Err == nil || errors.Is(it.Err, ErrNotHeld))
		g := it.Grant
		g.Drift += max(0, min(allow, (it.TTL-g.Drift-m.interval)/2))
		err := l.endRefresh(ctx, "refresh", g, it.Err, r.sent, m.ttl, it.TTL, lockValue{})
		if answered {
			l.mu.Lock()
			l.unsure = nil // answered: the refresh tried every value (once endRefresh looked for Grant.Value among them)
			l.mu.Unlock()
		}
		l.ops.Unlock()
		done(i, err)
	}
}

// lapseAllowance is how much sooner than that of a lock refreshed alone
// the validity of each of n locks refreshed together ends (at most half of
// what the validity has beyond the lock's refresh interval, so that the
// refresh is still due before it), so that their lapses, which come
// together, are all signalled before the server can let the first key go:
// the sweep that signals them starts late by the time a busy process
// takes to run a timer's function (up to Go's 10 ms time slice, twice),
// and ends each lock in a few microseconds, or tens on a loaded machine.
// Measured in TestLapseBurstSignalledBeforeExpiry, on two cores kept busy
// by the test and another package's tests: 2,000 lapses signalled up to
// 167 ms after their validity, against this allowance of 120 ms and 12 ms
// of drift allowance (see docs/design/batched-refresh.md).
func lapseAllowance(n int) time.Duration {
	return 20*time.Millisecond + time.Duration(n)*50*time.Microsecond
}

// nest runs the Op hooks of the round's lock i, and within them, those of
// the locks after it: the innermost sends the batch, within the Batch
// hooks, so that each lock's hooks wrap its refresh as they wrap one sent
// alone. Locks without hooks cost nothing here.
func (r *round) nest(ctx context.Context, i int) {
	for i < len(r.members) && len(r.members[i].l.hooks) == 0 {
		i++
	}
	if i == len(r.members) {
		r.batch(ctx)
		return
	}
	l := r.members[i].l
	e := l.hooks.event(l.s, "refresh", l.key)
	e.TTL, e.Lock = r.items[i].TTL, l
	_ = l.hooks.wrap(r.members[i].ctx, l.s, e, opHook, func(hctx context.Context) error {
		r.links = append(r.links, hctx)
		r.nest(ctx, i+1)
		return r.items[i].Err
	})
}

// batch sends the batch through the Batch hooks of the round's locks,
// each set of hooks once, which see the nodes' answers of a strategy that
// reports them.
func (r *round) batch(ctx context.Context) {
	if r.links == nil {
		r.batched = true
		r.s.RefreshBatch(ctx, r.items)
		return
	}
	var hs hookList
	for _, m := range r.members {
		for _, h := range m.l.hooks {
			if h.Batch != nil && !slices.Contains(hs, h) {
				hs = append(hs, h)
			}
		}
	}
	s := r.members[0].l.s
	e := hs.event(s, "batch", "")
	e.Keys, e.Links = len(r.items), r.links
	_ = hs.wrap(ctx, s, e, batchHook, func(ctx context.Context) error {
		r.batched = true
		r.s.RefreshBatch(ctx, r.items)
		return nil
	})
}

// errNotBatched is the refresh error of the locks of a round that a hook
// kept from the strategy, by returning without calling next: it breaks
// the hooks' contract, and the refresh, never sent, is tried again.
var errNotBatched = errors.New("lock: refresh not sent: a hook returned without calling next")

// after returns when l is next refreshed, or that its auto-refresh stops,
// after a refresh that returned err, as the refresher's loop does.
func (l *Lock) after(err error) schedule {
	if stopsRefresh(err) {
		return schedule{stop: true}
	}
	return l.next(err != nil)
}

// next returns l's next refresh: from half its interval after its last
// refresh was sent to the end of it, or, after a failed one, a quarter of
// its interval from now.
func (l *Lock) next(failed bool) schedule {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextLocked(failed)
}

// nextLocked is next, with l.mu held.
func (l *Lock) nextLocked(failed bool) schedule {
	interval, sent := l.interval(l.ttl), l.sent
	if failed {
		t := time.Now().Add(interval / 4)
		return schedule{from: t, due: t}
	}
	return schedule{from: sent.Add(interval / 2), due: sent.Add(interval)}
}

// interval returns the auto-refresh interval of a lock of ttl.
func (l *Lock) interval(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl) * l.fraction)
}
