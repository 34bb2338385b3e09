package lock

import (
	"fmt"
	"time"

	"github.com/locksmith-go/lock/strategy"
)

// Option configures a call of [Locker.Obtain] or [Locker.ObtainMany] (and,
// of the options, only [WithHooks] a call of [Locker.Inspect] or
// [Locker.Break]); given to [New], it is a default of every call of that
// Locker.
type Option func(*options)

type options struct {
	retry        RetryPolicy
	ttl          time.Duration // WithTTL's: the TTL of a call that passes 0; 0: none
	metadata     string
	token        string
	maxRefreshes int
	maxHold      time.Duration // 0: no limit
	fraction     float64       // the auto-refresh interval, as a fraction of the TTL
	fencing      bool
	poll         bool
	sharing      strategy.Sharing // a shared lock: WithPermits, WithRead, WithWrite
	sharedBy     string           // the option that set sharing, for share's refusal
	hooks        hookList
	errs         []error
}

// WithRetry sets the retry policy. The default is [NoRetry].
func WithRetry(p RetryPolicy) Option {
	return func(o *options) {
		if err := checkRetry(p); err != nil {
			o.errs = append(o.errs, err)
		}
		o.retry = p
	}
}

// WithTTL sets the TTL of an Obtain or ObtainMany (and so of [Do]) that
// passes a ttl of 0. Given to [New], it is the Locker's default TTL, as the
// config package's Locker has its ttl setting. A ttl other than 0, passed
// to the call, wins. d must be at least 1ms. Without it, a ttl of 0 is
// refused, as a TTL under 1ms is, with an [*ArgumentError] named "ttl".
func WithTTL(d time.Duration) Option {
	return func(o *options) {
		if err := checkTTL(d); err != nil {
			o.errs = append(o.errs, err)
		}
		o.ttl = d
	}
}

// WithPolling makes Obtain wait by polling alone: it tries again when the
// retry policy's delay has passed, and neither queues nor listens for the
// release. By default, a waiter of a strategy that notifies (single, and
// over a driver that can subscribe, also redlock and setnx-getset as
// hints) is woken by the release, and takes its turn in a FIFO queue (see
// docs/waiting.md). Polling suits a deployment whose ACL or
// proxy allows no pub/sub. Config's wait=poll sets it.
func WithPolling() Option {
	return func(o *options) { o.poll = true }
}

// WithMetadata stores metadata with the lock (in the key's value, after the
// token), for example the holder's host name, so that whoever inspects the
// lock can see who holds it: [Lock.Metadata] returns it to the holder, and
// [Locker.Inspect] to anyone, and a waiter's not-obtained error names the
// holder by it ([*NotObtainedError]). Metadata must not start with the
// byte 0x1e, which opens the stamp that precedes it in the value.
// [Lock.SetMetadata] replaces it while the lock is held.
func WithMetadata(metadata string) Option {
	return func(o *options) {
		if err := checkMetadata(metadata); err != nil {
			o.errs = append(o.errs, err)
		}
		o.metadata = metadata
	}
}

// checkMetadata checks the metadata of WithMetadata and Lock.SetMetadata.
func checkMetadata(metadata string) error {
	if metadata != "" && metadata[0] == stampMark {
		return &ArgumentError{Name: "metadata", Reason: "must not start with the byte 0x1e, which opens the stamp before it in the value"}
	}
	return nil
}

// WithMaxRefreshes caps how many times the lock may be refreshed; past
// the cap, [Lock.Refresh] returns ErrRefreshLimit and the lock expires at the
// end of its TTL. It bounds how long a holder that keeps refreshing can keep
// others out (the Redlock specification asks for such a cap). The default
// is no limit.
func WithMaxRefreshes(n int) Option {
	return func(o *options) {
		if n < 0 {
			o.errs = append(o.errs, &ArgumentError{Name: "max refreshes", Reason: fmt.Sprintf("must not be negative, got %d", n)})
		}
		o.maxRefreshes = n
	}
}

// WithMaxHold caps how long the lock may be held: refreshes, automatic or
// not, never extend it beyond d after it was requested. Past the cap,
// [Lock.Refresh] returns ErrRefreshLimit, and an auto-refreshed lock lapses
// (ErrLapsed) at the end of its last refresh, so [Do] cancels fn's context.
// d must be at least the TTL. The default is no limit.
func WithMaxHold(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, &ArgumentError{Name: "max hold", Reason: fmt.Sprintf("must be positive, got %v", d)})
		}
		o.maxHold = d
	}
}

// defaultRefreshFraction is WithRefreshFraction's default.
const defaultRefreshFraction = 1.0 / 3

// WithRefreshFraction sets how often auto-refresh ([Do], [Lock.StartRefresh])
// refreshes the lock: every f × TTL after the last successful refresh was
// sent. f must be in (0, 1); the default is 1/3: a lock of 30s is refreshed
// every 10s. A smaller f leaves more time to retry a failed refresh before
// the lock lapses, for more refreshes.
func WithRefreshFraction(f float64) Option {
	return func(o *options) {
		if !(f > 0 && f < 1) {
			o.errs = append(o.errs, &ArgumentError{Name: "refresh fraction", Reason: fmt.Sprintf("must be in (0, 1), got %v", f)})
		}
		o.fraction = f
	}
}

// WithFencing asks for a fencing token ([Lock.Fence]): a number per key,
// issued atomically with the acquisition, that is larger for every new
// holder, so that the resource the lock protects can reject a write from a
// holder that lost the lock without knowing it. The single strategy supports
// it; the others cannot issue such tokens and refuse it with an
// [*ArgumentError] named "fencing", leaving nothing behind (so does Obtain
// when any strategy issues no token).
func WithFencing() Option {
	return func(o *options) { o.fencing = true }
}

// WithToken sets the token instead of a random one, for advanced use such as
// handing a lock over to another process, which then obtains it again with
// the same token and the same metadata (the stored value is the token
// followed by the metadata, and ownership is equality of values). Two
// obtainers that use the same value both succeed, so the token must be
// secret and unique to its owner: make it with [NewToken]. It must have the
// form of the tokens Obtain makes, which [Lock.Token] returns: 22 base64url
// characters, 128 bits (bsm/redislock's tokens have it too), so that the
// metadata after it can be read back.
func WithToken(token string) Option {
	return func(o *options) {
		if !strategy.IsToken(token) {
			o.errs = append(o.errs, &ArgumentError{Name: "token", Reason: fmt.Sprintf(
				"must be %d base64url characters (128 bits, the form Lock.Token returns), got %d bytes", strategy.TokenLen, len(token))})
		}
		o.token = token
	}
}

// MaxPermits is the most holders that a semaphore ([WithPermits]) admits.
// A semaphore keeps a map of its permits, one byte each, which its scripts
// read and write whole at each step: the bound keeps it at 1000 bytes. The
// number of holders does not change what a permit costs (see the
// repository's docs/design/semaphores.md).
const MaxPermits = 1000

// WithPermits makes the lock a counting semaphore: at most n holders of the
// key at once, each with a lease of its own, which only it refreshes and
// releases, so that a crashed holder's permit comes back when its TTL ends.
// The limit is stored with the semaphore: while it has holders, an Obtain
// that states another n fails with an error matching [ErrMismatch]. Each
// holder gets the lowest free permit index ([Lock.Permit]), and with
// [WithFencing] a fencing token for that index. n must be from 1 to
// [MaxPermits]. The single strategy supports it; the others refuse it with
// an [*ArgumentError] that says why, and matches errors.ErrUnsupported.
// Given with [WithRead], [WithWrite] or another n, in the defaults or the
// call, it is refused with an *ArgumentError naming both, before anything
// is sent. See the repository's docs/semaphores.md.
func WithPermits(n int) Option {
	return func(o *options) {
		if n < 1 || n > MaxPermits {
			o.errs = append(o.errs, &ArgumentError{Name: "permits", Reason: fmt.Sprintf("must be from 1 to %d (MaxPermits), got %d", MaxPermits, n)})
		}
		o.share(strategy.Sharing{Permits: n}, fmt.Sprintf("WithPermits(%d)", n))
	}
}

// WithRead makes the lock the read side of a read-write lock on the key:
// many readers at once, and no writer ([WithWrite]). A reader is granted
// when no writer holds the lock and none waits ahead of it, so that a
// stream of readers cannot starve a writer. See [WithPermits] for where it
// runs, and the repository's docs/semaphores.md.
func WithRead() Option {
	return func(o *options) { o.share(strategy.Sharing{Read: true}, "WithRead()") }
}

// WithWrite makes the lock the write side of a read-write lock on the key:
// one writer, and no reader ([WithRead]). A writer is granted when nobody
// holds the lock and it heads the queue of waiters. It fences as a plain
// lock does ([WithFencing]), and readers with WithFencing read the
// current fence. [Lock.Downgrade] turns it into a reader.
func WithWrite() Option {
	return func(o *options) { o.share(strategy.Sharing{Write: true}, "WithWrite()") }
}

// share makes the lock the shared lock sh, which the option by asked for,
// and refuses a second shape: a lock is a semaphore of n permits, or a
// side of a read-write lock, not two of them. The same option twice (as a
// Locker's default and in the call, say) is no conflict.
func (o *options) share(sh strategy.Sharing, by string) {
	if o.sharedBy != "" && o.sharing != sh {
		o.errs = append(o.errs, &ArgumentError{Name: sh.Option(), Reason: fmt.Sprintf(
			"lock.%s and lock.%s cannot both hold: a lock is a semaphore of n permits, a read lock or a write lock, one of them", o.sharedBy, by)})
	}
	o.sharing, o.sharedBy = sh, by
}

// defaultOptions returns the options of a call that sets none.
func defaultOptions() options {
	return options{retry: NoRetry(), maxRefreshes: -1, fraction: defaultRefreshFraction}
}

// apply applies each list of options to o in turn, and returns the first
// error they record. The options take o's address: o ends up on the heap.
func (o *options) apply(lists ...[]Option) error {
	for _, opts := range lists {
		for _, opt := range opts {
			if opt == nil {
				return &ArgumentError{Name: "option", Reason: "must not be nil"}
			}
			opt(o)
		}
	}
	if len(o.errs) > 0 {
		return o.errs[0]
	}
	return nil
}
