package rueidis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestRunDriver runs the driver suite over every kind of rueidis client,
// against real servers.
func TestRunDriver(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	for _, c := range []struct {
		name   string
		client func(t *testing.T) rueidis.Client
	}{
		{"Standalone-RESP3", func(t *testing.T) rueidis.Client { return redistest.Rueidis(t, srv.Addr) }},
		{"Standalone-RESP2", func(t *testing.T) rueidis.Client {
			return redistest.RueidisClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr}, ForceSingleClient: true, AlwaysRESP2: true})
		}},
		{"Cluster", func(t *testing.T) rueidis.Client {
			return redistest.RueidisCluster(t, redistest.StartCluster(t, 3).Addrs())
		}},
		{"Sentinel", func(t *testing.T) rueidis.Client {
			sentinel := redistest.StartSentinel(t, srv)
			return redistest.RueidisClient(t, rueidis.ClientOption{
				InitAddress: []string{sentinel.Addr}, Sentinel: rueidis.SentinelOption{MasterSet: redistest.MasterName},
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := c.client(t)
			conformance.RunDriver(t, func(t *testing.T) driver.Conn { return rueidisdriver.New(client) })
		})
	}
}

// TestNilClient: New refuses a nil client. The strategy constructors
// report an *lock.ArgumentError that names it, and the Conn's commands
// return it without panicking.
func TestNilClient(t *testing.T) {
	conn := rueidisdriver.New(nil)
	l, err := single.New(conn)
	var ae *lock.ArgumentError
	if l != nil || !errors.As(err, &ae) || ae.Name != "rueidis client" || !strings.HasPrefix(ae.Reason, "must not be nil") {
		t.Fatalf("single.New = %v, %v; want nil and an ArgumentError naming the rueidis client: must not be nil", l, err)
	}
	if _, _, err := conn.Get(context.Background(), "k"); err != conn.Validate() {
		t.Errorf("Get = %v, want Validate's error %v", err, conn.Validate())
	}
	if addr := conn.Addr(); addr != "" {
		t.Errorf("Addr() = %q, want \"\"", addr)
	}
}

// TestAddr: a standalone client reports its server's address, and
// WithAddr replaces it.
func TestAddr(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	client := redistest.Rueidis(t, srv.Addr)
	if got := rueidisdriver.New(client).Addr(); got != srv.Addr {
		t.Errorf("Addr() = %q, want %q", got, srv.Addr)
	}
	if got := rueidisdriver.New(client, rueidisdriver.WithAddr("node-a")).Addr(); got != "node-a" {
		t.Errorf("Addr() with WithAddr(\"node-a\") = %q, want \"node-a\"", got)
	}
}

// TestSubscriberLiveness: rueidis pings a silent subscribed connection
// every Dialer.KeepAlive; a quiet session stays open, and one whose
// server stops answering for ConnWriteTimeout ends.
func TestSubscriberLiveness(t *testing.T) {
	const ping = 300 * time.Millisecond
	srv := redistest.Start(t, 1)[0]
	for _, resp2 := range []bool{false, true} {
		name := "RESP3"
		if resp2 {
			name = "RESP2"
		}
		t.Run(name, func(t *testing.T) {
			o := rueidis.ClientOption{InitAddress: []string{srv.Addr}, ForceSingleClient: true, AlwaysRESP2: resp2, ConnWriteTimeout: 2 * ping}
			o.Dialer.KeepAlive = ping
			redistest.RunSubscriberLiveness(t, srv, rueidisdriver.New(redistest.RueidisClient(t, o)), ping)
		})
	}
}

// TestListenOnADownServer: Listen dials within its context, and fails when
// no server listens.
func TestListenOnADownServer(t *testing.T) {
	conn := rueidisdriver.New(redistest.Rueidis(t, redistest.ClosedAddr(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := conn.Listen(ctx, func(driver.Event) {})
	if err == nil {
		_ = s.Close()
		t.Fatalf("Listen with no server = a session, want an error")
	}
}
