package redlock

import "time"

// GuardKey is the restart guard's key, for the tests that seed it.
const GuardKey = guardKey

// WithClock replaces the clock that measures an attempt, so a test can make
// an acquisition take longer than its TTL without waiting for it.
func WithClock(now func() time.Time) Option { return func(s *Strategy) { s.now = now } }

// NodeTimeout returns the node timeout of an attempt with ttl.
func (s *Strategy) NodeTimeout(ttl time.Duration) (time.Duration, error) {
	timeout, _, err := s.timeouts(ttl)
	return timeout, err
}

// Releasing reports whether a Release of key is still on its way to some
// node: one of its fan-out's ops has not returned.
func (s *Strategy) Releasing(key string) bool {
	f := s.releasing.load(lockName{key: key})
	if f == nil {
		return false
	}
	select {
	case <-f.idle:
		return false
	default:
		return true
	}
}

// Strategy is the strategy New builds, and NewStrategy builds it, for the
// tests that call its methods.
type Strategy = redlock

var NewStrategy = newStrategy
