package rueidis_test

import (
	"context"
	"errors"
	"net"
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
			return redistest.RueidisClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr}, AlwaysRESP2: true})
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

// TestNilClient: New refuses a nil client, with an error that names it.
// The strategy constructors report it in an *lock.ArgumentError, and
// the Conn's commands return it without panicking.
func TestNilClient(t *testing.T) {
	conn := rueidisdriver.New(nil)
	if err := conn.Validate(); err == nil || err.Error() != "rueidis: client must not be nil" {
		t.Fatalf("Validate = %v, want rueidis: client must not be nil", err)
	}
	l, err := single.New(conn)
	var ae *lock.ArgumentError
	if l != nil || !errors.As(err, &ae) || !strings.Contains(err.Error(), conn.Validate().Error()) {
		t.Fatalf("single.New = %v, %v; want nil and an *lock.ArgumentError that says %v", l, err, conn.Validate())
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
			o := rueidis.ClientOption{InitAddress: []string{srv.Addr}, AlwaysRESP2: resp2, ConnWriteTimeout: 2 * ping}
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

// TestNewClient: a client of NewClient on a standalone server that is
// down opens all the same, and the lock calls report the error; once the
// server answers, so does the client.
func TestNewClient(t *testing.T) {
	client, err := rueidisdriver.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.ClosedAddr(t)}})
	if err != nil {
		t.Fatalf("NewClient of a server that is down = %v, want a client (it dials again on each command)", err)
	}
	defer client.Close()
	if got := client.Mode(); got != rueidis.ClientModeStandalone {
		t.Errorf("Mode() = %q, want %q", got, rueidis.ClientModeStandalone)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := rueidisdriver.New(client).Get(ctx, "k"); err == nil {
		t.Errorf("Get with no server = nil error, want the dial's")
	}
}

// TestAbandonedReplyFailsNoOtherCommand: on a client of NewClient
// (AlwaysPipelining), a command whose context ends while the server is
// stalled abandons its own reply only: a release sent meanwhile by another
// caller is answered once the server resumes. Without AlwaysPipelining,
// rueidis sends a lone caller's command with a socket deadline, and closes
// the connection when it passes, failing the release.
func TestAbandonedReplyFailsNoOtherCommand(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	conn := rueidisdriver.New(redistest.Rueidis(t, srv.Addr))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := conn.SetNX(ctx, "k", "v", time.Minute); err != nil {
		t.Fatalf("SetNX: %v", err)
	}
	srv.Pause()
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	abandoned := make(chan error, 1)
	go func() { _, _, err := conn.Get(short, "k"); abandoned <- err }()
	time.Sleep(50 * time.Millisecond) // the lone caller's GET goes first: the other's DEL is sent while it waits
	released := make(chan error, 1)
	go func() { _, err := conn.Del(ctx, "k"); released <- err }()
	if err := <-abandoned; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GET past its deadline = %v, want context.DeadlineExceeded", err)
	}
	srv.Resume()
	if err := <-released; err != nil {
		t.Fatalf("DEL sent while the server was stalled = %v, want its answer once it resumed", err)
	}
	if _, ok, err := conn.Get(ctx, "k"); ok || err != nil {
		t.Errorf("GET after the DEL = found %v, %v; want the key gone", ok, err)
	}
}

// TestNewClientDialsOnFirstCommand: NewClient does not dial a standalone
// server, so that a server that accepts connections but never answers (a
// paused one) cannot hold it; the client dials on its first command,
// within that command's context.
func TestNewClientDialsOnFirstCommand(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // never answered, and closed at the end
		}
	}()
	defer func() {
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	}()

	client, err := rueidisdriver.NewClient(rueidis.ClientOption{InitAddress: []string{ln.Addr().String()}, DisableCache: true})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer client.Close()
	select {
	case c := <-accepted:
		accepted <- c
		t.Fatal("NewClient dialled the server, want no dial before the first command")
	case <-time.After(100 * time.Millisecond):
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err = rueidisdriver.New(client).Get(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get from a server that never answers = %v, want an error matching %v", err, context.DeadlineExceeded)
	}
	select {
	case c := <-accepted:
		accepted <- c
	case <-time.After(time.Minute): // a hang detector
		t.Error("Get did not dial the server within a minute")
	}
}

// TestPinnedTransaction: a pinned Conn sends MULTI, the commands queued
// after it and EXEC in one write.
func TestPinnedTransaction(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	o := rueidis.ClientOption{InitAddress: []string{srv.Addr}}
	o.Dialer.KeepAlive = 5 * time.Millisecond // rueidis pings an idle connection this often, a pinned one included
	conn := rueidisdriver.New(redistest.RueidisClient(t, o))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// transact runs WATCH key, MULTI, cmds and end (EXEC or DISCARD), pausing after MULTI, and returns end's reply.
	transact := func(t *testing.T, key string, cmds [][]any, end string) (any, error) {
		var reply any
		err := driver.Pin(ctx, conn, key, func(one driver.Conn) error {
			if _, err := driver.Do(ctx, one, "WATCH", key); err != nil {
				return err
			}
			defer driver.Do(ctx, one, "UNWATCH")
			if got, err := driver.Do(ctx, one, "MULTI"); got != "OK" || err != nil {
				t.Errorf("MULTI = %v, %v; want OK, nil", got, err)
			}
			time.Sleep(100 * time.Millisecond) // keep-alive PINGs would fall in here, were the transaction sent command by command
			for _, cmd := range cmds {
				if got, err := driver.Do(ctx, one, cmd...); got != "QUEUED" || err != nil {
					t.Errorf("%v after MULTI = %v, %v; want QUEUED, nil", cmd, got, err)
				}
			}
			var err error
			reply, err = driver.Do(ctx, one, end)
			return err
		})
		return reply, err
	}

	t.Run("EXEC answers one reply per queued command", func(t *testing.T) {
		key := conformance.Key(t)
		reply, err := transact(t, key, [][]any{{"SET", key, "x"}}, "EXEC")
		if replies, _ := reply.([]any); len(replies) != 1 || err != nil {
			t.Fatalf("EXEC = %#v, %v; want one reply, nil", reply, err)
		}
		if v, _, err := conn.Get(ctx, key); v != "x" || err != nil {
			t.Errorf("%s after EXEC = %q, %v; want \"x\", nil", key, v, err)
		}
	})
	t.Run("DISCARD sends nothing", func(t *testing.T) {
		key := conformance.Key(t)
		if reply, err := transact(t, key, [][]any{{"SET", key, "x"}}, "DISCARD"); reply != "OK" || err != nil {
			t.Fatalf("DISCARD = %#v, %v; want OK, nil", reply, err)
		}
		if _, ok, err := conn.Get(ctx, key); ok || err != nil {
			t.Errorf("%s after DISCARD: found %v, %v; want it absent", key, ok, err)
		}
	})
	t.Run("a command refused as it is queued is EXEC's error", func(t *testing.T) {
		key := conformance.Key(t)
		_, err := transact(t, key, [][]any{{"SET", key, "x"}, {"NOSUCHCOMMAND"}}, "EXEC")
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "unknown command") {
			t.Fatalf("EXEC with an unknown command queued = %v, want the server's unknown command error", err)
		}
		if _, ok, err := conn.Get(ctx, key); ok || err != nil {
			t.Errorf("%s after the refused transaction: found %v, %v; want it absent", key, ok, err)
		}
	})
}
