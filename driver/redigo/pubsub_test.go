package redigo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/redigo"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestSubscriberLiveness: a session pings its server; a quiet one stays
// open, and one whose server stops answering ends.
func TestSubscriberLiveness(t *testing.T) {
	const ping = 300 * time.Millisecond
	redigo.SetPingEvery(t, ping)
	srv := redistest.Start(t, 1)[0]
	redistest.RunSubscriberLiveness(t, srv, redigo.New(redistest.Redigo(t, srv.Addr)), ping)
}

// TestSessionGivesItsConnectionBack: a session takes one connection from
// the pool, and Close gives it back out of the subscribed state.
func TestSessionGivesItsConnectionBack(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	pool := redistest.Redigo(t, srv.Addr)
	pool.MaxIdle = 1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events := make(chan driver.Event, 16)
	s, err := redigo.New(pool).Listen(ctx, func(e driver.Event) { events <- e })
	if err != nil {
		t.Fatalf("Listen = %v, want nil", err)
	}
	if err := s.Subscribe(ctx, "{k}:wake"); err != nil {
		t.Fatalf("Subscribe = %v, want nil", err)
	}
	if n := pool.Stats().ActiveCount; n != 1 {
		t.Errorf("pool connections in use by an open session = %d, want 1", n)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	for closed := false; !closed; {
		select {
		case e := <-events:
			closed = e.Kind == driver.Closed
		case <-ctx.Done():
			t.Fatalf("no Closed event after Close: %v", ctx.Err())
		}
	}
	// Valkey 8.0.0 and 8.0.1 refuse UNSUBSCRIBE outside the subscribed state
	// (NOSUB; reverted by valkey-io/valkey#1265), which redigo's pool sends
	// when it takes back a connection that subscribed: it takes the refusal
	// for a failure and closes the connection instead of keeping it idle.
	want := 1
	if _, err := srv.Command(ctx, "UNSUBSCRIBE"); err != nil && strings.HasPrefix(err.Error(), "NOSUB") {
		want = 0
	}
	if st := pool.Stats(); st.ActiveCount != want || st.IdleCount != want {
		t.Errorf("pool after Close: got %d connections, %d idle; want %d, %d idle", st.ActiveCount, st.IdleCount, want, want)
	}
	conn, err := pool.GetContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got, err := redigoredis.String(redigoredis.DoContext(conn, ctx, "ECHO", "x")); got != "x" || err != nil {
		t.Errorf("ECHO on the connection the session gave back = %q, %v; want \"x\", nil (not in the subscribed state)", got, err)
	}
}

// noTimeoutPool hands out connections that cannot read with a timeout.
type noTimeoutPool struct{ p *redigoredis.Pool }

type noTimeoutConn struct{ redigoredis.Conn }

func (p noTimeoutPool) GetContext(ctx context.Context) (redigoredis.Conn, error) {
	c, err := p.p.GetContext(ctx)
	return noTimeoutConn{c}, err
}

// TestListenNeedsReadTimeouts: Listen refuses, with an error, a pool whose
// connections cannot read with a timeout, since the session could not
// notice a dead server.
func TestListenNeedsReadTimeouts(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	c := redigo.New(noTimeoutPool{redistest.Redigo(t, srv.Addr)})
	s, err := c.Listen(context.Background(), func(driver.Event) {})
	if err == nil {
		_ = s.Close()
		t.Fatalf("Listen over connections without redis.ConnWithTimeout = nil error, want an error")
	}
}
