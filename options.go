package lock

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"
)

// Option configures one call of [Locker.Obtain].
type Option func(*options)

type options struct {
	retry        RetryPolicy
	metadata     string
	token        string
	maxRefreshes int
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

// WithMetadata stores metadata with the lock (in the key's value, after the
// token), for example the holder's host name, so an operator inspecting the
// key can see it. [Lock.Metadata] returns it.
func WithMetadata(metadata string) Option {
	return func(o *options) { o.metadata = metadata }
}

// WithMaxRefreshes caps how many times the lock may be refreshed; past
// the cap, [Lock.Refresh] returns ErrRefreshLimit and the lock expires at the
// end of its TTL. It bounds how long a holder that keeps refreshing can keep
// others out (the Redlock specification asks for such a cap). The default
// is no limit.
func WithMaxRefreshes(n int) Option {
	return func(o *options) {
		if n < 0 {
			o.errs = append(o.errs, &ArgumentError{"max refreshes", fmt.Sprintf("must not be negative, got %d", n)})
		}
		o.maxRefreshes = n
	}
}

// MinTokenLen is the shortest token [WithToken] accepts: 16 bytes, 128 bits.
const MinTokenLen = 16

// WithToken sets the token instead of a random one, for advanced use such as
// handing a lock over to another process, which then obtains it again with
// the same token and the same metadata (the stored value is the token
// followed by the metadata, and ownership is equality of values). Two
// obtainers that use the same value both succeed, so the token must be
// secret and unique to its owner. It must be at least [MinTokenLen] bytes
// long.
func WithToken(token string) Option {
	return func(o *options) {
		if len(token) < MinTokenLen {
			o.errs = append(o.errs, &ArgumentError{"token", fmt.Sprintf("must be at least %d bytes, got %d", MinTokenLen, len(token))})
		}
		o.token = token
	}
}

func newOptions(opts []Option) (options, error) {
	o := options{retry: NoRetry(), maxRefreshes: -1}
	for _, opt := range opts {
		if opt == nil {
			return o, &ArgumentError{"option", "must not be nil"}
		}
		opt(&o)
	}
	if len(o.errs) > 0 {
		return o, o.errs[0]
	}
	return o, nil
}

func checkKeyTTL(key string, ttl time.Duration) error {
	if key == "" {
		return &ArgumentError{"key", "must not be empty"}
	}
	return checkTTL(ttl)
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return &ArgumentError{"ttl", fmt.Sprintf("must be at least 1ms, got %v", ttl)}
	}
	return nil
}

// newToken returns 128 random bits from crypto/rand, base64url-encoded (22
// characters).
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lock: token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
