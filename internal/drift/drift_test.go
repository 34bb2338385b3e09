package drift_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/internal/drift"
	"github.com/locksmith-go/lock/strategy"
)

func TestAllowance(t *testing.T) {
	for _, tc := range []struct {
		ttl    time.Duration
		factor float64
		want   time.Duration
	}{
		{time.Second, drift.DefaultFactor, 12 * time.Millisecond},
		{3 * time.Millisecond, drift.DefaultFactor, 2030 * time.Microsecond},
		{time.Minute, 0, 2 * time.Millisecond},
		{time.Second, 0.5, 502 * time.Millisecond},
	} {
		if got, err := drift.Allowance(tc.ttl, tc.factor); got != tc.want || err != nil {
			t.Errorf("Allowance(%v, %v) = %v, %v; want %v, nil", tc.ttl, tc.factor, got, err, tc.want)
		}
	}
}

// TestAllowanceRefusesATTLWithoutValidity: a TTL that the allowance uses up
// is refused with an *ArgumentError named ttl that states the least TTL.
func TestAllowanceRefusesATTLWithoutValidity(t *testing.T) {
	for _, tc := range []struct {
		ttl    time.Duration
		factor float64
		least  string
	}{
		{2 * time.Millisecond, drift.DefaultFactor, "more than 2.02ms"},
		{2020 * time.Microsecond, drift.DefaultFactor, "more than 2.02ms"},
		{2 * time.Millisecond, 0, "more than 2ms"},
		{4 * time.Millisecond, 0.5, "more than 4ms"},
		{0, drift.DefaultFactor, "more than 2.02ms"},
	} {
		_, err := drift.Allowance(tc.ttl, tc.factor)
		var ae *strategy.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "ttl" || !strings.Contains(ae.Reason, tc.least) {
			t.Errorf("Allowance(%v, %v) = %v; want an *ArgumentError named ttl saying %q", tc.ttl, tc.factor, err, tc.least)
		}
	}
}
