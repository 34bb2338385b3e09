package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver"
)

// RunSubscriberLiveness checks, as subtests, how the sessions of conn, a
// driver.Subscriber whose server is srv and whose pings the caller made
// every ping, watch their connection: a quiet session stays open, and one
// whose server stops answering (SIGSTOP) ends with an error.
func RunSubscriberLiveness(t *testing.T, srv *Server, conn driver.Conn, ping time.Duration) {
	sub, ok := conn.(driver.Subscriber)
	if !ok {
		t.Fatalf("%T is not a driver.Subscriber", conn)
	}
	t.Run("QuietSessionStaysOpen", func(t *testing.T) {
		events, channel := subscribed(t, sub)
		time.Sleep(5 * ping)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		script := driver.NewScript("return redis.call('PUBLISH', KEYS[1], ARGV[1])")
		if _, err := script.Run(ctx, conn, []string{channel}, "hello"); err != nil {
			t.Fatalf("PUBLISH: %v", err)
		}
		want := driver.Event{Kind: driver.Message, Channel: channel, Payload: "hello"}
		if got := next(t, events); got != want {
			t.Errorf("event after %v of silence and a publish = %+v, want %+v", 5*ping, got, want)
		}
	})
	t.Run("SessionWhoseServerStopsAnsweringEnds", func(t *testing.T) {
		events, _ := subscribed(t, sub)
		srv.Pause()
		defer srv.Resume()
		if got := next(t, events); got.Kind != driver.Closed || got.Err == nil {
			t.Errorf("event of a session whose server stopped answering = %+v, want Closed with an error", got)
		}
	})
}

// subscribed opens a session of sub, closed when t ends, and subscribes it
// to a channel of t's.
func subscribed(t *testing.T, sub driver.Subscriber) (chan driver.Event, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events := make(chan driver.Event, 16)
	s, err := sub.Listen(ctx, func(e driver.Event) {
		select {
		case events <- e:
		default:
		}
	})
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	channel := "{" + t.Name() + "}:wake"
	if err := s.Subscribe(ctx, channel); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	if got := next(t, events); got.Kind != driver.Subscribed {
		t.Fatalf("event after Subscribe = %+v, want Subscribed", got)
	}
	return events, channel
}

// next returns the next event, failing t after 10 s (a hang detector).
func next(t *testing.T, events chan driver.Event) driver.Event {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(10 * time.Second):
		t.Fatalf("no event within 10s")
		return driver.Event{}
	}
}
