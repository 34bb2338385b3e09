package redigo_test

import (
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver/redigo"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestSubscriberLiveness: a session pings its server; a quiet one stays
// open, and one whose server stops answering ends.
func TestSubscriberLiveness(t *testing.T) {
	const ping = 100 * time.Millisecond
	redigo.SetPingEvery(t, ping)
	srv := redistest.Start(t, 1)[0]
	redistest.RunSubscriberLiveness(t, srv, redigo.New(redistest.Redigo(t, srv.Addr)), ping)
}
