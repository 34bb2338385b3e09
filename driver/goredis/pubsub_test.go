package goredis_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestSubscriberLiveness: a session pings a silent connection; a quiet one
// stays open, and one whose server stops answering ends.
func TestSubscriberLiveness(t *testing.T) {
	const ping = 100 * time.Millisecond
	goredis.SetPingEvery(t, ping)
	srv := redistest.Start(t, 1)[0]
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) {
			redistest.RunSubscriberLiveness(t, srv, goredis.New(redistest.GoRedis(t, srv.Addr, protocol)), ping)
		})
	}
}
