package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Command sends one command to the server over a fresh connection (TLS for
// a server from [StartTLS]) and returns the reply flattened to text (array
// elements joined by spaces). The harness uses it instead of a client
// library, so it depends on no driver.
func (s *Server) Command(ctx context.Context, args ...string) (string, error) {
	var d interface {
		DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	} = new(net.Dialer)
	if s.tls != nil {
		d = &tls.Dialer{Config: s.tls}
	}
	c, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	_ = c.SetDeadline(deadline)
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

// do sends a command to s, as Command does, within 10s, and fails t if it
// cannot.
func (s *Server) do(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := s.Command(ctx, args...)
	if err != nil {
		t.Fatalf("%s on %s: %v", strings.Join(args, " "), s.Addr, err)
	}
	return reply
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		parts := make([]string, n)
		for i := range parts {
			if parts[i], err = readReply(r); err != nil {
				return "", err
			}
		}
		return strings.Join(parts, " "), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// Scripts returns the script commands (EVAL, EVALSHA, FCALL, SCRIPT and
// their read-only forms) that INFO commandstats counts on the server: none
// for clients that ran without scripts.
func (s *Server) Scripts(ctx context.Context) ([]string, error) {
	stats, err := s.Command(ctx, "INFO", "commandstats")
	if err != nil {
		return nil, err
	}
	var ran []string
	for _, c := range []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "script"} {
		if strings.Contains(stats, "cmdstat_"+c+":") {
			ran = append(ran, c)
		}
	}
	return ran, nil
}
