package lock_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/strategy"
)

// fakeStrategy is an in-memory strategy.Strategy: a map of key to value guarded
// by a mutex, with the documented semantics. It records every call, and can
// be told to fail an operation.
type fakeStrategy struct {
	mu      sync.Mutex
	entries map[string]fakeEntry
	calls   []fakeCall

	// grant and refreshGrant are returned by successful Acquire and
	// Refresh calls; a Grant.Value becomes the stored value.
	grant, refreshGrant strategy.Grant
	// acquireErr, refreshErr, releaseErr and ttlErr, when set, are returned
	// by the operation instead of its normal result.
	acquireErr, refreshErr, releaseErr, ttlErr error
	// onAcquire, when set, is called at the start of every Acquire, outside
	// the mutex.
	onAcquire func(ctx context.Context)
	// refreshErrs are returned, in turn, by the next refreshes (see
	// failRefreshes).
	refreshErrs []error
	// afterRefresh, when set, is called at the end of every successful
	// Refresh, outside the mutex: the new value is stored, and the reply
	// is still on its way.
	afterRefresh func()
}

type fakeEntry struct {
	value   string
	expires time.Time
}

type fakeCall struct {
	op, key, value string
	ctxErr         error // the context's error when the call was made
	hasDeadline    bool
}

var _ strategy.Strategy = (*fakeStrategy)(nil)

// Inspect reads key's entry: held, its TTL, and its value's fingerprint and
// metadata.
func (f *fakeStrategy) Inspect(ctx context.Context, key string) (strategy.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "inspect", key, "")
	if !ok {
		return strategy.State{Verdict: "free"}, nil
	}
	token, meta := strategy.SplitValue(e.value)
	return strategy.State{Held: true, TTL: time.Until(e.expires), Fingerprint: strategy.Fingerprint(token), Metadata: meta, Verdict: "held"}, nil
}

func newFake() *fakeStrategy {
	return &fakeStrategy{entries: make(map[string]fakeEntry)}
}

// record logs a call and returns the live entry of key, if any. f.mu must be
// held.
func (f *fakeStrategy) record(ctx context.Context, op, key, value string) (fakeEntry, bool) {
	_, hasDeadline := ctx.Deadline()
	f.calls = append(f.calls, fakeCall{op: op, key: key, value: value, ctxErr: ctx.Err(), hasDeadline: hasDeadline})
	return f.live(key)
}

// live returns the live entry of key, if any, and deletes it if it has
// expired. f.mu must be held.
func (f *fakeStrategy) live(key string) (fakeEntry, bool) {
	e, ok := f.entries[key]
	if ok && !time.Now().Before(e.expires) {
		delete(f.entries, key)
		return fakeEntry{}, false
	}
	return e, ok
}

// owned returns nil when key holds value, and ErrExpired or ErrTaken
// otherwise.
func owned(e fakeEntry, ok bool, value string) error {
	switch {
	case !ok:
		return lock.ErrExpired
	case e.value != value:
		return lock.ErrTaken
	}
	return nil
}

func (f *fakeStrategy) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	key, value, ttl := r.Key, r.Value(), r.TTL
	if f.onAcquire != nil {
		f.onAcquire(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "acquire", key, value)
	if f.acquireErr != nil {
		return f.grant, f.acquireErr
	}
	if ok && e.value != value {
		return strategy.Grant{}, lock.ErrNotObtained
	}
	stored := value
	if f.grant.Value != "" {
		stored = f.grant.Value
	}
	f.entries[key] = fakeEntry{value: stored, expires: time.Now().Add(ttl)}
	return f.grant, nil
}

func (f *fakeStrategy) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "refresh", key, value)
	if len(f.refreshErrs) > 0 {
		err := f.refreshErrs[0]
		f.refreshErrs = f.refreshErrs[1:]
		return strategy.Grant{}, err
	}
	if f.refreshErr != nil {
		return strategy.Grant{}, f.refreshErr
	}
	if err := owned(e, ok, value); err != nil {
		return strategy.Grant{}, err
	}
	if f.refreshGrant.Value != "" {
		e.value = f.refreshGrant.Value
	}
	e.expires = time.Now().Add(ttl)
	f.entries[key] = e
	if f.afterRefresh != nil {
		f.mu.Unlock()
		f.afterRefresh()
		f.mu.Lock()
	}
	return f.refreshGrant, nil
}

func (f *fakeStrategy) Release(ctx context.Context, key, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "release", key, value)
	if f.releaseErr != nil {
		return f.releaseErr
	}
	if err := owned(e, ok, value); err != nil {
		return err
	}
	delete(f.entries, key)
	return nil
}

func (f *fakeStrategy) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.record(ctx, "ttl", key, value)
	if f.ttlErr != nil {
		return 0, f.ttlErr
	}
	if err := owned(e, ok, value); err != nil {
		return 0, err
	}
	return time.Until(e.expires), nil
}

// hold makes value the holder of key for an hour, as another owner would.
func (f *fakeStrategy) hold(key, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries[key] = fakeEntry{value: value, expires: time.Now().Add(time.Hour)}
}

// failRefreshes makes the next refreshes fail with errs, one each, and
// every one after them with always (nil: succeed). It is safe while a
// refresher runs.
func (f *fakeStrategy) failRefreshes(always error, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshErrs, f.refreshErr = errs, always
}

// drop deletes key, as if it had expired.
func (f *fakeStrategy) drop(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.entries, key)
}

// callsTo returns the recorded calls of op, in order.
func (f *fakeStrategy) callsTo(op string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var cs []fakeCall
	for _, c := range f.calls {
		if c.op == op {
			cs = append(cs, c)
		}
	}
	return cs
}

// values returns the values of calls.
// values returns the values of calls, each without the stamp that the
// Locker writes after the token (unstamped): the tests of stamps read
// them from the calls themselves.
func values(calls []fakeCall) []string {
	vs := make([]string, len(calls))
	for i, c := range calls {
		vs[i] = unstamped(c.value)
	}
	return vs
}

// stampPattern matches the stamp that a Locker writes after the token
// (see stamp.go).
var stampPattern = regexp.MustCompile("^\x1e[0-9]+(/[0-9a-f]{32}-[0-9a-f]{16})?\x1e")

// unstamped returns v, a value that a Locker wrote, without its stamp.
func unstamped(v string) string {
	if len(v) < strategy.TokenLen {
		return v
	}
	return v[:strategy.TokenLen] + stampPattern.ReplaceAllString(v[strategy.TokenLen:], "")
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// obtain obtains key on f for a minute, failing the test on error.
func obtain(t *testing.T, f *fakeStrategy, key string, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := lock.New(f).Obtain(context.Background(), key, time.Minute, opts...)
	if err != nil {
		t.Fatalf("Obtain(%q) = %v, want a lock", key, err)
	}
	return lk
}

var errBoom = errors.New("boom: connection reset")

// timeout bounds the tests that wait, so that a hang fails the test instead
// of the binary.
const timeout = time.Minute

// notifyFake is a fakeStrategy with a wait queue: a strategy.Notifier. An
// attempt of a waiter (Request.Waiter set) that finds the key held reports
// the waiter at rank (1: the head) with holderTTL left; the waiter's
// listener delivers what the test sends on wakes. It records the requests,
// and counts Listen, Close and Leave.
type notifyFake struct {
	*fakeStrategy
	rank      int
	holderTTL time.Duration
	wakes     chan strategy.Wake
	deaf      bool // Listen returns nil: the strategy cannot deliver

	nmu      sync.Mutex
	requests []strategy.Request
	listens  int
	closes   int
	leaves   []string // the ids Leave was given
}

var _ strategy.Notifier = (*notifyFake)(nil)

// newNotifyFake returns a notifyFake whose waiters are at rank, with
// holderTTL left to the holder.
func newNotifyFake(rank int, holderTTL time.Duration) *notifyFake {
	return &notifyFake{fakeStrategy: newFake(), rank: rank, holderTTL: holderTTL, wakes: make(chan strategy.Wake, 1)}
}

func (f *notifyFake) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	f.nmu.Lock()
	f.requests = append(f.requests, r)
	f.nmu.Unlock()
	g, err := f.fakeStrategy.Acquire(ctx, r)
	if errors.Is(err, lock.ErrNotObtained) && r.Waiter != "" {
		g.Position, g.HolderTTL = f.rank, f.holderTTL
	}
	return g, err
}

func (f *notifyFake) Listen(string, string) strategy.Listener {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	f.listens++
	if f.deaf {
		return nil
	}
	return fakeListener{f}
}

func (f *notifyFake) Leave(_ context.Context, _, id string) error {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	f.leaves = append(f.leaves, id)
	return nil
}

// counts returns how many times Listen and Close were called, and the ids
// Leave was given.
func (f *notifyFake) counts() (listens, closes int, leaves []string) {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	return f.listens, f.closes, slices.Clone(f.leaves)
}

// waiters returns the Waiter and Patience of each request, in order.
func (f *notifyFake) waiters() ([]string, []time.Duration) {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	var ids []string
	var ps []time.Duration
	for _, r := range f.requests {
		ids, ps = append(ids, r.Waiter), append(ps, r.Patience)
	}
	return ids, ps
}

// polls returns the Poll of each request, in order.
func (f *notifyFake) polls() []time.Duration {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	var ps []time.Duration
	for _, r := range f.requests {
		ps = append(ps, r.Poll)
	}
	return ps
}

type fakeListener struct{ f *notifyFake }

func (l fakeListener) Wakes() <-chan strategy.Wake { return l.f.wakes }

func (l fakeListener) Close() {
	l.f.nmu.Lock()
	defer l.f.nmu.Unlock()
	l.f.closes++
}

// The fakeStrategy is a strategy.Multi too: it locks several keys as one,
// recording each call under the op's name (acquireKeys, refreshKeys,
// releaseKeys, ttlKeys) with the keys joined by commas.
var _ strategy.Multi = (*fakeStrategy)(nil)

// AcquireKeys takes every key of r.Keys, or none when one is held, with
// the Grant f.grant (whose Fences, if set, are the keys' fencing tokens).
func (f *fakeStrategy) AcquireKeys(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, "acquireKeys", strings.Join(r.Keys, ","), r.Value())
	if f.acquireErr != nil {
		return f.grant, f.acquireErr
	}
	for _, k := range r.Keys {
		if e, ok := f.live(k); ok && e.value != r.Value() {
			return strategy.Grant{}, &lock.KeyError{Key: k, Err: lock.ErrNotObtained}
		}
	}
	for _, k := range r.Keys {
		f.entries[k] = fakeEntry{value: r.Value(), expires: time.Now().Add(r.TTL)}
	}
	return f.grant, nil
}

// ownedKeys returns the errors of the keys that do not hold value, joined.
// f.mu must be held.
func (f *fakeStrategy) ownedKeys(keys []string, value string) error {
	var errs []error
	for _, k := range keys {
		e, ok := f.live(k)
		if err := owned(e, ok, value); err != nil {
			errs = append(errs, &lock.KeyError{Key: k, Err: err})
		}
	}
	return errors.Join(errs...)
}

func (f *fakeStrategy) RefreshKeys(ctx context.Context, keys []string, value string, ttl time.Duration) (strategy.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, "refreshKeys", strings.Join(keys, ","), value)
	if f.refreshErr != nil {
		return strategy.Grant{}, f.refreshErr
	}
	if err := f.ownedKeys(keys, value); err != nil {
		return strategy.Grant{}, err
	}
	for _, k := range keys {
		f.entries[k] = fakeEntry{value: value, expires: time.Now().Add(ttl)}
	}
	return strategy.Grant{}, nil
}

func (f *fakeStrategy) ReleaseKeys(ctx context.Context, keys []string, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, "releaseKeys", strings.Join(keys, ","), value)
	if f.releaseErr != nil {
		return f.releaseErr
	}
	err := f.ownedKeys(keys, value)
	for _, k := range keys {
		if e, ok := f.entries[k]; ok && e.value == value {
			delete(f.entries, k)
		}
	}
	return err
}

func (f *fakeStrategy) TTLKeys(ctx context.Context, keys []string, value string) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, "ttlKeys", strings.Join(keys, ","), value)
	if f.ttlErr != nil {
		return 0, f.ttlErr
	}
	if err := f.ownedKeys(keys, value); err != nil {
		return 0, err
	}
	least := time.Until(f.entries[keys[0]].expires)
	for _, k := range keys[1:] {
		least = min(least, time.Until(f.entries[k].expires))
	}
	return least, nil
}
