package lock_test

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
)

func TestRetryPolicies(t *testing.T) {
	t.Run("NoRetry stops after the first attempt", func(t *testing.T) {
		p := lock.NoRetry()
		for _, attempt := range []int{1, 2, 100} {
			if d, ok := p.Delay(attempt); ok {
				t.Errorf("NoRetry().Delay(%d) = %v, true, want false", attempt, d)
			}
		}
	})

	t.Run("Linear returns its interval for any attempt", func(t *testing.T) {
		const interval = 250 * time.Millisecond
		p := lock.Linear(interval)
		for _, attempt := range []int{1, 2, 3, 62, 63, 64, 1000, math.MaxInt32, math.MaxInt} {
			if d, ok := p.Delay(attempt); d != interval || !ok {
				t.Errorf("Linear(%v).Delay(%d) = %v, %v, want %v, true", interval, attempt, d, ok, interval)
			}
		}
	})

	t.Run("Exponential's delay lies in [0, min(max, base·2^(attempt-1)))", func(t *testing.T) {
		for _, c := range []struct{ base, max time.Duration }{
			{time.Nanosecond, time.Nanosecond},
			{time.Nanosecond, 1 << 62},
			{3 * time.Nanosecond, time.Hour},
			{10 * time.Millisecond, time.Second},
			{time.Second, time.Second},
			{time.Second, time.Minute},
			{1 << 40, math.MaxInt64},
			{math.MaxInt64 / 3, math.MaxInt64},
			{math.MaxInt64, math.MaxInt64},
		} {
			p := lock.Exponential(c.base, c.max)
			for attempt := 1; attempt <= 70; attempt++ {
				ceiling := exponentialCeiling(c.base, c.max, attempt)
				for range 50 {
					d, ok := p.Delay(attempt)
					if !ok {
						t.Fatalf("Exponential(%v, %v).Delay(%d) = %v, false, want true", c.base, c.max, attempt, d)
					}
					if d < 0 || d >= ceiling {
						t.Fatalf("Exponential(%v, %v).Delay(%d) = %v, want in [0, %v)", c.base, c.max, attempt, d, ceiling)
					}
				}
			}
		}
	})

	t.Run("Exponential(1ns, max) caps attempt 63 at 2^62ns when max is larger", func(t *testing.T) {
		// base·2^62 = 2^62ns fits in a Duration, so for max above it the
		// ceiling of attempt 63 is 2^62ns, not max.
		const base, max = time.Nanosecond, time.Duration(math.MaxInt64)
		p := lock.Exponential(base, max)
		for range 50 {
			if d, _ := p.Delay(63); d >= 1<<62 {
				t.Fatalf("Exponential(%v, %v).Delay(63) = %v, want in [0, %v)", base, max, d, time.Duration(1<<62))
			}
		}
	})

	t.Run("Exponential never overflows at large attempts", func(t *testing.T) {
		const base, max = time.Millisecond, 30 * time.Second
		p := lock.Exponential(base, max)
		for _, attempt := range []int{61, 62, 63, 64, 65, 100, 1 << 20, math.MaxInt32, math.MaxInt} {
			for range 50 {
				d, ok := p.Delay(attempt)
				if d < 0 || d >= max || !ok {
					t.Fatalf("Exponential(%v, %v).Delay(%d) = %v, %v, want in [0, %v), true", base, max, attempt, d, ok, max)
				}
			}
		}
	})

	t.Run("LimitAttempts(p, n) allows exactly n attempts in all", func(t *testing.T) {
		const interval = 7 * time.Millisecond
		for n := 1; n <= 5; n++ {
			p := lock.LimitAttempts(lock.Linear(interval), n)
			for attempt := 1; attempt < n; attempt++ {
				if d, ok := p.Delay(attempt); d != interval || !ok {
					t.Errorf("LimitAttempts(Linear(%v), %d).Delay(%d) = %v, %v, want %v, true", interval, n, attempt, d, ok, interval)
				}
			}
			for _, attempt := range []int{n, n + 1, math.MaxInt} {
				if d, ok := p.Delay(attempt); ok {
					t.Errorf("LimitAttempts(Linear(%v), %d).Delay(%d) = %v, true, want false", interval, n, attempt, d)
				}
			}
		}
	})

	t.Run("LimitAttempts stops early when the policy it wraps stops", func(t *testing.T) {
		p := lock.LimitAttempts(lock.NoRetry(), 5)
		if d, ok := p.Delay(1); ok {
			t.Errorf("LimitAttempts(NoRetry(), 5).Delay(1) = %v, true, want false", d)
		}
	})

	t.Run("a shared policy is safe for concurrent use", func(t *testing.T) {
		const base, max, n = time.Millisecond, time.Second, 10
		policies := []lock.RetryPolicy{
			lock.NoRetry(),
			lock.Linear(time.Millisecond),
			lock.Exponential(base, max),
			lock.LimitAttempts(lock.Exponential(base, max), n),
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16*len(policies))
		for _, p := range policies {
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 1000 {
						attempt := i%20 + 1
						d, ok := p.Delay(attempt)
						if d < 0 || d > max {
							errs <- fmt.Errorf("%T.Delay(%d) = %v, %v, want a delay in [0, %v]", p, attempt, d, ok, max)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// exponentialCeiling returns min(max, base·2^(attempt-1)) without overflow.
func exponentialCeiling(base, max time.Duration, attempt int) time.Duration {
	c := base
	for i := 1; i < attempt && c < max; i++ {
		if c > max/2 {
			return max
		}
		c *= 2
	}
	return min(c, max)
}
