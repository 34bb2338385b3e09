package redigo

import (
	"testing"
	"time"
)

// SetPingEvery sets how often the sessions opened from now on ping their
// server, until t ends.
func SetPingEvery(t testing.TB, d time.Duration) {
	old := pingEvery
	pingEvery = d
	t.Cleanup(func() { pingEvery = old })
}
