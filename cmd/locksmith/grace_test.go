package main

import (
	"testing"
	"time"
)

// TestDefaultKillGrace: the default --kill-grace is 5s, or a sixth of the
// lease when that is less, and never more than the lease leaves after two
// refresh intervals and the margin.
func TestDefaultKillGrace(t *testing.T) {
	for _, c := range []struct {
		ttl, refresh, want time.Duration
	}{
		{time.Hour, 20 * time.Minute, 5 * time.Second},
		{30 * time.Second, 10 * time.Second, 5 * time.Second},
		{10 * time.Second, 10 * time.Second / 3, 10 * time.Second / 6},
		{3 * time.Second, time.Second, 500 * time.Millisecond},
		{10 * time.Second, 4500 * time.Millisecond, 900 * time.Millisecond}, // what the lease leaves: 10s - 2 x 4.5s - 100ms
		{450 * time.Millisecond, 150 * time.Millisecond, 50 * time.Millisecond},
		{250 * time.Millisecond, 250 * time.Millisecond / 3, 0},
	} {
		if got := defaultKillGrace(c.ttl, c.refresh); got != c.want {
			t.Errorf("defaultKillGrace(%v, %v) = %v, want %v", c.ttl, c.refresh, got, c.want)
		}
	}
}
