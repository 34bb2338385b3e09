package lock

import (
	"math/rand/v2"
	"time"
)

// RetryPolicy decides whether and when [Locker.Obtain] tries again after an
// attempt found the lock held. Policies are stateless: one value is safe to
// share across goroutines and calls. Waiting always ends when the context
// passed to Obtain is done, whatever the policy says.
type RetryPolicy interface {
	// Delay returns how long to wait after the failed attempt number
	// attempt (1 for the first), and false to stop trying.
	Delay(attempt int) (time.Duration, bool)
}

// NoRetry makes a single attempt. It is the default.
func NoRetry() RetryPolicy { return noRetry{} }

type noRetry struct{}

func (noRetry) Delay(int) (time.Duration, bool) { return 0, false }

// Linear tries again every interval, until the context is done.
func Linear(interval time.Duration) RetryPolicy { return linear(interval) }

type linear time.Duration

func (p linear) Delay(int) (time.Duration, bool) { return time.Duration(p), true }

// Exponential tries again after a random delay drawn uniformly from
// [0, min(max, base·2^(attempt-1))): exponential backoff with full jitter,
// until the context is done.
func Exponential(base, max time.Duration) RetryPolicy {
	return exponential{base: base, max: max}
}

type exponential struct{ base, max time.Duration }

func (p exponential) Delay(attempt int) (time.Duration, bool) {
	ceiling := p.max
	if shift := max(attempt-1, 0); shift < 63 && p.base <= p.max>>shift {
		ceiling = p.base << shift
	}
	if ceiling <= 0 {
		return 0, true
	}
	return rand.N(ceiling), true
}

// LimitAttempts stops p after n attempts in all (n ≥ 1; LimitAttempts(p, 1)
// is NoRetry).
func LimitAttempts(p RetryPolicy, n int) RetryPolicy {
	return limitAttempts{p: p, n: n}
}

type limitAttempts struct {
	p RetryPolicy
	n int
}

func (p limitAttempts) Delay(attempt int) (time.Duration, bool) {
	if attempt >= p.n {
		return 0, false
	}
	return p.p.Delay(attempt)
}

// checkRetry validates a policy built by this package.
func checkRetry(p RetryPolicy) error {
	switch p := p.(type) {
	case nil:
		return &ArgumentError{Name: "retry", Reason: "must not be nil"}
	case linear:
		if p <= 0 {
			return &ArgumentError{Name: "retry", Reason: "Linear interval must be positive"}
		}
	case exponential:
		if p.base <= 0 || p.max < p.base {
			return &ArgumentError{Name: "retry", Reason: "Exponential needs 0 < base ≤ max"}
		}
	case limitAttempts:
		if p.n < 1 {
			return &ArgumentError{Name: "retry", Reason: "LimitAttempts needs at least 1 attempt"}
		}
		return checkRetry(p.p)
	}
	return nil
}
