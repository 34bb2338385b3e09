package lock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/locksmith-go/lock/strategy"
)

// batcher refreshes the auto-refreshed locks of a Locker whose strategy
// batches (strategy.Batcher): one timer for them all, no goroutine per
// lock. Each lock may be refreshed from half its refresh interval after
// its last refresh was sent (from) and must be by the end of it (due): the
// timer fires at the earliest due, and a batch takes every lock whose from
// has come, so that locks whose schedules overlap share round trips, and
// those refreshed together stay together. The reasoning is in
// docs/design/batched-refresh.md.
type batcher struct {
	s  strategy.Batcher
	mu sync.Mutex
	// entries are the registered auto-refreshes, one per StartRefresh (a
	// lock whose auto-refresh was stopped and started again may have two,
	// the first still in a batch on its way). An entry in a batch on its
	// way is flying, and goes back to waiting when the batch's reply is in.
	entries map[*batched]struct{}
	timer   *time.Timer
	at      time.Time // when timer fires; zero when it is stopped
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
// refreshed first as next says. l.mu may be held.
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
	defer b.mu.Unlock()
	_, ok := b.entries[e]
	switch {
	case !ok: // removed already
	case e.flying:
		e.stopping = true // the batch's reply removes it
	default:
		b.drop(e)
	}
}

// drop unregisters e and tells its refresher's waiters that it stopped.
// b.mu must be held.
func (b *batcher) drop(e *batched) {
	delete(b.entries, e)
	if e.stop != nil {
		e.stop()
	}
	e.r.cancel()
	close(e.r.done)
	if len(b.entries) == 0 && b.timer != nil {
		b.timer.Stop()
		b.at = time.Time{}
	}
}

// schedule makes the timer fire at t, unless it fires before. b.mu must be
// held.
func (b *batcher) schedule(t time.Time) {
	if !b.at.IsZero() && !t.Before(b.at) {
		return
	}
	b.at = t
	if b.timer == nil {
		b.timer = time.AfterFunc(time.Until(t), b.fire)
	} else {
		b.timer.Reset(time.Until(t))
	}
}

// fire sends the locks whose refresh may come now in one batch, and sets
// the timer for the next one due.
func (b *batcher) fire() {
	now := time.Now()
	var ready []*batched
	b.mu.Lock()
	b.at = time.Time{}
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

// send refreshes the locks of entries, which fire marked flying, in one
// batch, and schedules each one's next refresh, or drops it.
func (b *batcher) send(entries []*batched) {
	next := make([]schedule, len(entries))
	taken, items := make([]member, len(entries)), make([]strategy.Refresh, len(entries))
	inChunks(len(entries), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			next[i], taken[i], items[i] = take(entries[i].l, entries[i].ctx)
		}
	})
	r := round{s: b.s}
	var in []int // the indexes of the entries in the round
	for i, m := range taken {
		if m.l != nil {
			r.add(m, items[i])
			in = append(in, i)
		}
	}
	r.run(func(j int, err error) { next[in[j]] = entries[in[j]].l.after(err) })
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, e := range entries {
		e.flying = false
		if next[i].stop || e.stopping {
			b.drop(e)
			continue
		}
		e.from, e.due = next[i].from, next[i].due
		b.schedule(e.due)
	}
}

// chunk is the most locks that one goroutine takes into a round, or
// applies the answers of. A round of many thousand locks spreads that work
// over several, so that it gets the cores, and its share of them, that a
// process busy with other goroutines leaves it: one goroutine for 10,000
// locks, under the race detector and two busy loops, took longer than the
// locks' validity (see docs/design/batched-refresh.md).
const chunk = 1000

// inChunks runs f over [0, n) in chunks of at most chunk indexes, side by
// side, the first on the caller's goroutine, and returns when all have.
func inChunks(n int, f func(lo, hi int)) {
	var wg sync.WaitGroup
	for lo := chunk; lo < n; lo += chunk {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, min(lo+chunk, n))
		}()
	}
	f(0, min(chunk, n))
	wg.Wait()
}

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
	sent     time.Time     // set by run, once every lock is in
	until    time.Time     // the earliest end of the members' validity
	interval time.Duration // the shortest of the members' refresh intervals
	members  []member
	items    []strategy.Refresh
	links    []context.Context // what the locks' Op hooks passed on
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
	item := strategy.Refresh{Key: l.key, Value: l.value, TTL: lease, Unsure: l.unsure}
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
// with each member's index and outcome, as Refresh would have returned it
// (from several goroutines at once: see inChunks).
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
	r.sent = time.Now()
	deadline := r.sent.Add(2 * r.interval)
	if r.until.Before(deadline) {
		deadline = r.until
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	r.nest(ctx, 0)
	inChunks(len(r.members), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			l, it := r.members[i].l, r.items[i]
			if len(it.Unsure) > 0 && (it.Err == nil || errors.Is(it.Err, ErrNotHeld)) {
				l.mu.Lock()
				l.unsure = nil // answered: the refresh tried every value
				l.mu.Unlock()
			}
			err := l.endRefresh(ctx, it.Grant, it.Err, r.sent, r.members[i].ttl, it.TTL)
			l.ops.Unlock()
			done(i, err)
		}
	})
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
		r.s.RefreshBatch(ctx, r.items)
		return nil
	})
}

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
