package goredis

import (
	"testing"
	"time"
)

// SetPingEvery sets how long the connections of sessions opened from now
// on may stay silent before they are pinged, until t ends.
func SetPingEvery(t testing.TB, d time.Duration) {
	old := pingEvery.Swap(int64(d))
	t.Cleanup(func() { pingEvery.Store(old) })
}
