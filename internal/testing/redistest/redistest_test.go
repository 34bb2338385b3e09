package redistest

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestServerLifecycle(t *testing.T) {
	s := Start(t, 1)[0]
	ctx := context.Background()
	if s.Port == 6379 {
		t.Fatalf("got port 6379, want any other")
	}
	if _, err := s.Command(ctx, "SET", "k", "v"); err != nil {
		t.Fatalf("SET: %v", err)
	}

	t.Run("Pause blocks replies until Resume", func(t *testing.T) {
		s.Pause()
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := s.Command(short, "PING"); err == nil {
			t.Fatalf("PING on a paused server: got a reply, want a timeout")
		}
		s.Resume()
		if got, err := s.Command(ctx, "GET", "k"); err != nil || got != "v" {
			t.Fatalf("GET after Resume = %q, %v; want \"v\", nil", got, err)
		}
	})

	t.Run("Restart comes back empty on the same port", func(t *testing.T) {
		if err := s.Restart(); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		if got, err := s.Command(ctx, "EXISTS", "k"); err != nil || got != "0" {
			t.Fatalf("EXISTS k after Restart = %q, %v; want \"0\", nil", got, err)
		}
	})

	t.Run("Kill makes it unreachable", func(t *testing.T) {
		s.Kill()
		if _, err := s.Command(ctx, "PING"); err == nil {
			t.Fatalf("PING after Kill: got a reply, want an error")
		}
	})
}

func TestProxy(t *testing.T) {
	s := Start(t, 1)[0]
	p := s.Proxy(t)
	ctx := context.Background()
	c := GoRedis(t, p.Addr, 3)
	t.Run("forwards", func(t *testing.T) {
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatalf("SET through the proxy: %v, want nil", err)
		}
	})
	t.Run("Cut drops what is sent, and the server goes on", func(t *testing.T) {
		p.Cut()
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if err := c.Set(short, "k", "cut", 0).Err(); err == nil {
			t.Fatalf("SET through a cut proxy: got a reply, want none")
		}
		if got, err := s.Command(ctx, "GET", "k"); err != nil || got != "v" {
			t.Fatalf("GET on the server during the cut = %q, %v; want \"v\", nil", got, err)
		}
	})
	t.Run("Heal lets clients connect again", func(t *testing.T) {
		p.Heal()
		if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
			t.Fatalf("GET through the healed proxy = %q, %v; want \"v\", nil", got, err)
		}
	})
}

func TestCluster(t *testing.T) {
	c := StartCluster(t, 3)
	info, err := c.Servers[0].Command(context.Background(), "CLUSTER", "INFO")
	if err != nil || !strings.Contains(info, "cluster_slots_assigned:16384") {
		t.Fatalf("CLUSTER INFO = %q, %v; want all 16384 slots assigned", info, err)
	}
	t.Run("StartReplica", func(t *testing.T) {
		r := c.StartReplica(t, c.Servers[1])
		role, err := r.Command(context.Background(), "ROLE")
		if err != nil || !strings.HasPrefix(role, "slave") {
			t.Errorf("ROLE of the replica = %q, %v; want a replica's", role, err)
		}
	})
}

func TestStartTLS(t *testing.T) {
	p := NewPKI(t)
	s := StartTLS(t, p)
	ctx := context.Background()

	t.Run("Command speaks TLS with the client certificate", func(t *testing.T) {
		if got, err := s.Command(ctx, "PING"); err != nil || got != "PONG" {
			t.Fatalf("PING = %q, %v; want \"PONG\", nil", got, err)
		}
	})

	t.Run("plain TCP gets no reply", func(t *testing.T) {
		plain := &Server{Addr: s.Addr}
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if got, err := plain.Command(short, "PING"); err == nil {
			t.Fatalf("PING over plain TCP = %q, want an error", got)
		}
	})
}

func TestStartUnix(t *testing.T) {
	s := StartUnix(t)

	t.Run("the socket answers PING", func(t *testing.T) {
		var d net.Dialer
		c, err := d.DialContext(context.Background(), "unix", s.Socket)
		if err != nil {
			t.Fatalf("dial %s: %v", s.Socket, err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "*1\r\n$4\r\nPING\r\n"); err != nil {
			t.Fatalf("send PING: %v", err)
		}
		if got, err := readReply(bufio.NewReader(c)); err != nil || got != "PONG" {
			t.Fatalf("PING over %s = %q, %v; want \"PONG\", nil", s.Socket, got, err)
		}
	})

	t.Run("only the owner may connect", func(t *testing.T) {
		fi, err := os.Stat(s.Socket)
		if err != nil {
			t.Fatalf("stat %s: %v", s.Socket, err)
		}
		if got := fi.Mode(); got&os.ModeSocket == 0 || got.Perm() != 0o700 {
			t.Fatalf("mode of %s = %v, want a socket with permissions 0700", s.Socket, got)
		}
	})

	t.Run("the loopback port still answers", func(t *testing.T) {
		if got, err := s.Command(context.Background(), "PING"); err != nil || got != "PONG" {
			t.Fatalf("PING on %s = %q, %v; want \"PONG\", nil", s.Addr, got, err)
		}
	})
}
