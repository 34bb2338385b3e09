package redigo

import (
	"testing"
	"time"
)

// SetPingEvery sets how often the sessions opened from now on ping their
// server, until t ends.
func SetPingEvery(t testing.TB, d time.Duration) {
	old := pingEvery.Swap(int64(d))
	t.Cleanup(func() { pingEvery.Store(old) })
}

// Unwatched and SmallCommand are the bounds of the commands sent with
// DoWithTimeout, unwatched by a goroutine.
const (
	Unwatched    = unwatched
	SmallCommand = smallCommand
)
