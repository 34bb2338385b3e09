package lock

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locksmith-go/lock/internal/background"
	"github.com/locksmith-go/lock/internal/reach"
	"github.com/locksmith-go/lock/internal/scope"
	"github.com/locksmith-go/lock/strategy"
)

// Locker obtains distributed locks with one strategy: a strategy
// package's New returns it (single.New, redlock.New, …), and so do
// config.Open and [New], for a strategy written elsewhere. Its methods,
// like those of [Lock] and like [Do], refuse a nil ctx with an
// [*ArgumentError] named "ctx". It is safe for concurrent use.
//
// A program that is done with a Locker calls [Locker.Close] before it
// closes the clients the Locker uses, so that the work the Locker left
// running in the background (clean-ups, a Redlock's calls to slow nodes)
// ends first, and leaves no key behind.
type Locker struct {
	s        strategy.Strategy
	defaults []Option
	batch    *batcher // nil when s does not batch refreshes
	life     *life    // shared with the Lockers With derives
}

// life is what a Locker shares with the Lockers With derives from it: its
// calls in flight and the work they left running in the background, for
// Close to wait for, and whether it is closed.
type life struct {
	bg      background.Group // the calls in flight, and the work they left running
	mu      sync.Mutex       // guards closing
	closing bool             // Close was called: calls get ErrClosed
	close   func() error     // what else Close closes (config.Open's clients); nil: nothing
}

func init() {
	reach.SetClose = func(l any, close func() error) { l.(*Locker).life.close = close }
	reach.Strategy = func(l any) strategy.Strategy { return l.(*Locker).s }
}

// enter counts a call in flight, or returns ErrClosed after Close. The
// caller calls l.life.bg.Done when the call returns.
func (l *Locker) enter() error {
	lf := l.life
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.closing {
		return ErrClosed
	}
	lf.bg.Add()
	return nil
}

// Close waits for the Locker's calls in flight to return, and for the work
// they and their locks left running in the background to end (the
// clean-ups of attempts that got no answer, a waiter's leaving its queue,
// Redlock's calls to the nodes that had not answered yet: each bounded,
// by a node timeout or by strategy.CleanupTimeout), then closes what the
// Locker owns: nothing for a Locker from New or a strategy's New, the
// clients it opened for one from config.Open. Call it when the program is
// done with the Locker, before it closes the clients it gave a strategy,
// so that nothing is left on the servers until its TTL ends.
//
// Once Close is called, Obtain, ObtainMany, Inspect and Break return an
// error matching [ErrClosed], on this Locker and on every Locker that
// shares its strategy through With. The locks obtained before go on
// working while their clients are open: release them first. Calling Close
// again does nothing and returns nil.
func (l *Locker) Close() error {
	lf := l.life
	lf.mu.Lock()
	closing := lf.closing
	lf.closing = true
	lf.mu.Unlock()
	if closing {
		return nil
	}
	lf.bg.Wait()
	if d, ok := l.s.(strategy.Drainer); ok {
		d.Drain()
	}
	if lf.close != nil {
		return lf.close()
	}
	return nil
}

// State is what [Locker.Inspect] read of a lock: whether it is held, its
// remaining TTL, the holder's token fingerprint and metadata, its fencing
// counter, and for some strategies more: each Redlock node's answer, a
// legacy lock's decoded timestamp and whether it can be taken over now.
type State = strategy.State

// New returns the Locker of a strategy. The strategy packages call it;
// application code gets a Locker from them (single.New, redlock.New, …) or
// from the config package. The defaults apply to every Obtain, before the
// options of the call. docs/extending.md shows how to write a strategy.
func New(s strategy.Strategy, defaults ...Option) *Locker {
	return &Locker{s: s, defaults: slices.Clip(defaults), batch: newBatcher(s), life: new(life)}
}

// With returns a Locker that shares l's strategy and background work, and
// whose defaults are l's followed by defaults: what a wrapper such as the
// otel package uses to add its hooks, and a program to set a default TTL
// or retry policy once.
func (l *Locker) With(defaults ...Option) *Locker {
	c := *l
	c.defaults = slices.Concat(l.defaults, defaults)
	return &c
}

// Obtain locks key for ttl; a ttl of 0 is the Locker's default TTL
// ([WithTTL]), and is refused where it has none. It makes one attempt, then
// waits and tries again as the retry policy says (see [WithRetry]; the
// default is [NoRetry]) until the lock is obtained, the policy gives up, or
// ctx is done.
//
// When an attempt found the key held by another owner, the error satisfies
// errors.Is(err, ErrNotObtained); when ctx ended the wait it also matches
// the context's error and cause (for example context.DeadlineExceeded). When
// the last attempt got no answer (a timeout, a dead connection, or ctx
// ending while it was on its way), the error matches [ErrNoAnswer] and the
// driver's error, and says that Redis did not answer; it matches
// ErrNotObtained only if an earlier attempt found the key held. So an Obtain
// against a server that never answers does not report the lock held. A ctx
// done before the first attempt gives its error alone: nothing is sent.
// Invalid arguments give an [*ArgumentError]. Other Redis and transport
// errors (an error reply, a refused connection) are wrapped with the
// operation's name.
func (l *Locker) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	return l.obtainKeys(ctx, key, nil, ttl, opts)
}

// MaxKeys is the most keys that [Locker.ObtainMany] takes as one lock. A
// strategy takes a lock's keys on a server in one script, which blocks the
// server while it runs: a thousand keys cost it about a millisecond (0.96ms
// per script on Redis 7.0, measured; see docs/multi-key.md).
const MaxKeys = 1000

// ObtainMany locks several keys as one lock, for ttl (0: the Locker's
// default, as for Obtain): every key, with one token, or none. It takes them
// in one order whatever the order of keys (sorted, duplicates removed), so
// that two callers that name the same keys in other orders cannot block each
// other. The lock's Refresh extends every key or none, its Release deletes
// each key it still holds and reports the others, and it is lost when any
// key is lost; errors about one key are a [*KeyError] naming it. See the
// repository's docs/multi-key.md for what each strategy guarantees.
//
// It waits and fails as Obtain does. Keys must number from 1 to [MaxKeys],
// none empty, or it returns an [*ArgumentError] named "keys", sending
// nothing; one key (after removing duplicates) is an Obtain of that key. A
// strategy that cannot lock several keys as one (setnx-getset) gives an
// *ArgumentError named "keys" that says so.
func (l *Locker) ObtainMany(ctx context.Context, keys []string, ttl time.Duration, opts ...Option) (*Lock, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	keys, err := checkKeys(keys)
	if err != nil {
		return nil, err
	}
	if len(keys) == 1 {
		return l.obtainKeys(ctx, keys[0], nil, ttl, opts)
	}
	if _, ok := l.s.(strategy.Multi); !ok {
		name, _ := describe(l.s)
		return nil, &ArgumentError{Name: "keys", Reason: "several keys as one lock are not supported by " + name, Err: errors.ErrUnsupported}
	}
	return l.obtainKeys(ctx, keys[0], keys, ttl, opts)
}

// checkKeys checks ObtainMany's keys, and returns them sorted, without
// duplicates, in a slice of their own.
func checkKeys(keys []string) ([]string, error) {
	switch {
	case len(keys) == 0:
		return nil, &ArgumentError{Name: "keys", Reason: "must not be empty"}
	case len(keys) > MaxKeys:
		return nil, &ArgumentError{Name: "keys", Reason: fmt.Sprintf("must number at most %d (MaxKeys), got %d", MaxKeys, len(keys))}
	}
	for i, k := range keys {
		if k == "" {
			return nil, &ArgumentError{Name: "keys", Reason: fmt.Sprintf("key %d of %d is empty", i+1, len(keys))}
		}
	}
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// obtainKeys is Obtain of key, or, with keys, ObtainMany of keys (key is
// keys[0]).
func (l *Locker) obtainKeys(ctx context.Context, key string, keys []string, ttl time.Duration, opts []Option) (*Lock, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.life.bg.Done()
	if len(l.defaults) == 0 && len(opts) == 0 { // no options: nothing else on the heap
		return l.obtain(ctx, key, keys, ttl, defaultOptions(), new(pending))
	}
	c := &obtainCall{l: l, key: key, keys: keys, o: defaultOptions()}
	if err := c.o.apply(l.defaults, opts); err != nil {
		return nil, err
	}
	c.ttl = cmp.Or(ttl, c.o.ttl) // 0: WithTTL's, the Locker's default
	if c.o.sharing != (strategy.Sharing{}) {
		var err error
		if c.l, err = l.shared(c.o.sharing, keys); err != nil {
			return nil, err
		}
	}
	if len(c.o.hooks) == 0 {
		return c.l.obtain(ctx, key, keys, c.ttl, c.o, &c.p)
	}
	e := c.o.hooks.event(c.l.s, "obtain", key)
	e.TTL, e.Keys = c.ttl, len(keys)
	defer func() {
		if c.got != nil { // an Obtain hook panicked with it: its caller never gets it
			c.got.abandon(ctx)
		}
	}()
	lk, err := chain(ctx, c.o.hooks, obtainHook, e, c.run)
	c.got = nil
	return lk, err
}

// obtainCall is an Obtain with options: its arguments, its options, its
// attempts, and the lock that its run obtained, until it is back through
// every Obtain hook. One allocation holds them all, for the hooks' next.
type obtainCall struct {
	l    *Locker
	key  string
	keys []string
	ttl  time.Duration
	o    options
	p    pending
	got  *Lock
}

// pending is an Obtain's attempts, and the lock they obtain: one
// allocation for both.
type pending struct {
	a  acquisition
	lk Lock
}

// run runs the Obtain within the Obtain hooks.
func (c *obtainCall) run(ctx context.Context) (*Lock, error) {
	lk, err := c.l.obtain(ctx, c.key, c.keys, c.ttl, c.o, &c.p)
	c.got = lk
	return lk, err
}

// shared returns the locker of the shared locks sh (a semaphore, or a
// side of a read-write lock): the one whose strategy is the Sharer's.
func (l *Locker) shared(sh strategy.Sharing, keys []string) (*Locker, error) {
	name, _ := describe(l.s)
	if keys != nil {
		return nil, &ArgumentError{Name: "keys", Reason: "a semaphore or read-write lock has one key; several keys as one lock cannot be shared"}
	}
	sharer, ok := l.s.(strategy.Sharer)
	if !ok {
		return nil, &ArgumentError{Name: "permits", Reason: "semaphores and read-write locks are not supported by " + name, Err: errors.ErrUnsupported}
	}
	s, err := sharer.Shared(sh)
	if err != nil {
		return nil, err
	}
	return &Locker{s: s, life: l.life}, nil
}

// options returns the options of a call: the Locker's defaults, then the
// call's.
func (l *Locker) options(opts []Option) (options, error) {
	if len(l.defaults) == 0 && len(opts) == 0 {
		return defaultOptions(), nil // no copy on the heap, as apply's would be
	}
	o := defaultOptions()
	err := o.apply(l.defaults, opts)
	return o, err
}

// obtain obtains key (or keys) with the options o, in attempts that p
// records, and in p's lock: the caller's, so that it can share an
// allocation.
func (l *Locker) obtain(ctx context.Context, key string, keys []string, ttl time.Duration, o options, p *pending) (lk *Lock, err error) {
	a := &p.a
	if err := cmp.Or(checkKey(key), checkTTL(ttl)); err != nil {
		return nil, err
	}
	if o.maxHold > 0 && o.maxHold < ttl {
		return nil, &ArgumentError{Name: "max hold", Reason: fmt.Sprintf("must be at least the TTL, %v, got %v", ttl, o.maxHold)}
	}
	w := l.newWaiter(key, keys, o)
	r := strategy.Request{Key: key, Keys: keys, TTL: ttl, Token: o.token, Metadata: o.metadata, CallerToken: o.token != "", Fencing: o.fencing}
	*a = acquisition{s: l.s}
	var trace string // the holder's trace context, for its stamps
	if len(o.hooks) > 0 {
		trace = o.hooks.trace(ctx)
	}
	var refusal error // the last attempt's, when it found the lock held
	defer func() {
		if lk == nil && err == nil { // a hook panicked, or called runtime.Goexit
			w.abandon(ctx)
			if v, held := a.written(); v != "" {
				discard(&l.life.bg, ctx, key, held, l.release(key, keys, v))
			}
		}
	}()
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			w.close(ctx, true)
			if attempt == 1 { // nothing was sent
				return nil, notSent(ctx, "obtain", key)
			}
			return nil, notObtained(ctx, refusal)
		}
		delay, again := o.retry.Delay(attempt)
		if err := w.ask(ctx, &r, delay, again); err != nil {
			w.close(ctx, true)
			return nil, err
		}
		r.Retry, r.Again = attempt > 1, again
		sent := time.Now()
		value, err := lay(&r, sent, trace)
		if err != nil {
			w.close(ctx, true)
			return nil, err
		}
		g, err := l.attempt(ctx, a, r, attempt, o.hooks)
		if err == nil && r.Fencing && !fenced(g, keys) {
			w.close(ctx, true)
			l.cleanUp(ctx, o.hooks, key, l.release(key, keys, cmp.Or(g.Value, r.Value())))
			name, _ := describe(l.s)
			return nil, &ArgumentError{Name: "fencing", Reason: "not supported by " + name + ": it issued no fencing token", Err: errors.ErrUnsupported}
		}
		if err == nil {
			w.obtained(ctx)
			p.lk = Lock{s: l.s, key: key, token: r.Token, metadata: r.Metadata, value: value,
				refreshesLeft: o.maxRefreshes, hooks: o.hooks, obtained: sent,
				fraction: o.fraction, ttl: ttl, bg: &l.life.bg}
			lk := &p.lk
			if o.sharing.Permits > 0 { // a read or write lock has no permit
				lk.permit = g.Permit
			}
			switch {
			case keys != nil && r.Fencing:
				lk.many = &many{keys, g.Fences}
				lk.fence = g.Fences[0]
			case keys != nil:
				lk.many = &many{keys: keys}
			case r.Fencing:
				lk.fence = g.Fence
			}
			if keys == nil {
				lk.batch = l.batch
			}
			if o.maxHold > 0 {
				lk.holdUntil = sent.Add(o.maxHold)
			}
			lk.grant(g, sent, ttl)
			return lk, nil
		}
		if !errors.Is(err, ErrNotObtained) {
			// An attempt that failed may have queued its waiter all the
			// same (its reply was lost, or its script failed after the
			// write): the waiter leaves the queue.
			if r.Waiter != "" {
				w.mayHaveQueued()
			}
			w.close(ctx, true)
			// The command may have been applied even though its reply was
			// lost (a timeout, a cancelled context, a broken connection):
			// delete it, in the background once ctx is done.
			if !g.Undone {
				l.cleanUp(ctx, o.hooks, key, l.release(key, keys, cmp.Or(g.Value, r.Value())))
			}
			if attempt > 1 && unanswered(ctx, err) {
				// The earlier attempts found the lock held; this one got
				// no answer.
				return nil, noAnswer(ctx, "lock: not obtained: held by another owner, then ", err, ErrNotObtained)
			}
			return nil, opError(ctx, "obtain", key, err)
		}
		if !again {
			w.close(ctx, true)
			return nil, err
		}
		refusal = err
		if err := w.sleep(ctx, g, delay); err != nil {
			w.close(ctx, true)
			return nil, notObtained(ctx, refusal)
		}
		if w.woke == strategy.WakeMessage && a.seen != nil {
			a.seen.forget()
		}
	}
}

// checkContext checks the ctx of every call that takes one: a nil ctx
// would panic deep in a strategy or a hook.
func checkContext(ctx context.Context) error {
	if ctx == nil {
		return &ArgumentError{Name: "ctx", Reason: "must not be nil"}
	}
	return nil
}

// checkKey checks the key of Obtain or Inspect.
func checkKey(key string) error {
	if key == "" {
		return &ArgumentError{Name: "key", Reason: "must not be empty"}
	}
	return nil
}

// checkTTL checks the ttl of Obtain, once a ttl of 0 is WithTTL's, or of
// WithTTL.
func checkTTL(ttl time.Duration) error {
	switch {
	case ttl == 0:
		return &ArgumentError{Name: "ttl", Reason: "must be at least 1ms, got 0s, which means the Locker's default TTL (lock.WithTTL), and this Locker has none"}
	case ttl < time.Millisecond:
		return &ArgumentError{Name: "ttl", Reason: fmt.Sprintf("must be at least 1ms, got %v", ttl)}
	}
	return nil
}

// NewToken returns a fresh token of the form Obtain makes: 128 random bits
// from crypto/rand, base64url-encoded (22 characters). A program that hands
// a lock from one process to the next chooses its token with it, and
// passes it to [WithToken] in both.
func NewToken() (string, error) {
	var b strings.Builder
	err := writeToken(&b)
	return b.String(), err
}

// writeToken writes a fresh token (see NewToken) to b.
func writeToken(b *strings.Builder) error {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("lock: token: %w", err)
	}
	var enc [strategy.TokenLen]byte
	base64.RawURLEncoding.Encode(enc[:], raw[:])
	b.Write(enc[:])
	return nil
}

// lay sets r's token, a fresh one for every attempt unless the caller
// chose it, and its stamp, that of an attempt sent at sent by a holder
// whose trace context is trace, and returns r.Value(), the value the
// attempt writes: the token, the stamp and the metadata, laid out in one
// allocation. A fresh token for every attempt, so that a clean-up of an
// earlier attempt still on its way to a slow server can never delete what
// a later attempt acquired. A chosen token gets no stamp: its value must be
// the same in every process that passes the lock on.
func lay(r *strategy.Request, sent time.Time, trace string) (string, error) {
	var b strings.Builder
	if r.CallerToken {
		b.Grow(len(r.Token) + len(r.Metadata))
		b.WriteString(r.Token)
		b.WriteString(r.Metadata)
		return b.String(), nil
	}
	b.Grow(strategy.TokenLen + stampLen(trace) + len(r.Metadata))
	if err := writeToken(&b); err != nil {
		return "", err
	}
	writeStamp(&b, sent, trace)
	b.WriteString(r.Metadata)
	v := b.String()
	r.Token, r.Stamp = v[:strategy.TokenLen], v[strategy.TokenLen:len(v)-len(r.Metadata)]
	return v, nil
}

// attempt runs one Acquire of r, the n-th, through the Attempt hooks, and
// records it in a.
func (l *Locker) attempt(ctx context.Context, a *acquisition, r strategy.Request, n int, hs hookList) (strategy.Grant, error) {
	*a = acquisition{s: a.s, r: r, seen: a.seen, observed: hs.attempted()}
	if len(hs) == 0 {
		err := a.run(ctx)
		return a.g, err
	}
	e := hs.event(l.s, "attempt", r.Key)
	e.TTL, e.Attempt, e.Keys = r.TTL, n, len(r.Keys)
	err := hs.wrap(ctx, l.s, e, attemptHook, a.run)
	return a.g, err
}

// acquisition is the last Acquire of an Obtain, whose request and result
// outlive the hooks around it: should a hook panic, they tell what the
// attempt may have left on the server.
type acquisition struct {
	s              strategy.Strategy
	r              strategy.Request
	sent, returned bool // Acquire was called; it returned
	g              strategy.Grant
	err            error
	seen           *sighting // what the Obtain's attempts read of the holder; nil until one is refused
	observed       bool      // an Attempt hook sees each attempt's error, and so the holder it names
}

func (a *acquisition) run(ctx context.Context) error {
	a.sent = true
	if a.r.Keys != nil {
		a.g, a.err = a.s.(strategy.Multi).AcquireKeys(ctx, a.r)
	} else {
		a.g, a.err = a.s.Acquire(ctx, a.r)
	}
	a.returned = true
	if a.err != nil && errors.Is(a.err, ErrNotObtained) {
		if a.seen == nil {
			a.seen = new(sighting)
		}
		a.err = a.seen.refused(ctx, a.s, a.r, a.g.Holder, a.err, a.observed || !a.r.Again)
	}
	return a.err
}

// written returns the value that the attempt may have written, and whether
// it holds the lock with it; "" when it wrote nothing: it was not sent,
// found the lock held, or undid itself.
func (a *acquisition) written() (value string, held bool) {
	if !a.sent || a.returned && (a.g.Undone || errors.Is(a.err, ErrNotObtained)) {
		return "", false
	}
	return cmp.Or(a.g.Value, a.r.Value()), a.returned && a.err == nil
}

// release returns the clean-up that deletes value, which an attempt may
// have written under key, or under each of keys.
func (l *Locker) release(key string, keys []string, value string) func(context.Context) error {
	if keys != nil {
		return func(ctx context.Context) error { return l.s.(strategy.Multi).ReleaseKeys(ctx, keys, value) }
	}
	return func(ctx context.Context) error { return l.s.Release(ctx, key, value) }
}

// fenced reports whether g carries the fencing token of a key, or of each
// of keys.
func fenced(g strategy.Grant, keys []string) bool {
	if keys == nil {
		return g.Fence > 0
	}
	return len(g.Fences) == len(keys) && !slices.ContainsFunc(g.Fences, func(n int64) bool { return n <= 0 })
}

// cleanUp runs del, which undoes what an attempt on key may have done, with
// strategy.CleanUp in the background, and waits for it while ctx allows.
func (l *Locker) cleanUp(ctx context.Context, hs hookList, key string, del func(context.Context) error) {
	done := make(chan struct{})
	l.life.bg.Go(func() {
		defer close(done)
		ctx := ctx // its own: the select below reads the caller's
		if len(hs) > 0 {
			ctx = scope.With(ctx, &hookScope{hs, l.s})
		}
		_ = strategy.CleanUp(ctx, key, del)
	})
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// discard runs del, which undoes what an Obtain that a panic interrupted
// left on key, in the background (counted in g) and without the hooks: one of them may be
// what panicked. del runs once, bounded by strategy.CleanupTimeout, when
// what it deletes is held (there, and ours: a second delete could hit a
// later holder whose value is the same, as setnx-getset's timestamps can
// be), and otherwise with strategy.CleanUp, until the server has answered
// twice.
func discard(g *background.Group, ctx context.Context, key string, held bool, del func(context.Context) error) {
	g.Go(func() {
		if !held {
			_ = strategy.CleanUp(ctx, key, del)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), strategy.CleanupTimeout)
		defer cancel()
		_ = del(ctx)
	})
}

// notObtained is the error of an Obtain whose ctx ended the wait, after an
// attempt found the lock held, with refusal, that attempt's error (a
// *NotObtainedError).
func notObtained(ctx context.Context, refusal error) error {
	ends := ended(ctx, nil)
	return &callError{msg: fmt.Sprintf("%v: %v", refusal, ends[len(ends)-1]), errs: append(ends, refusal)}
}
