package redlock

import "time"

// WithClock replaces the clock that measures an attempt, so a test can make
// an acquisition take longer than its TTL without waiting for it.
func WithClock(now func() time.Time) Option { return func(s *Strategy) { s.now = now } }

// NodeTimeout returns the node timeout of an attempt with ttl.
func (s *Strategy) NodeTimeout(ttl time.Duration) (time.Duration, error) {
	timeout, _, err := s.timeouts(ttl)
	return timeout, err
}
