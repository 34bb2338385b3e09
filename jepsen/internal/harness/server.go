package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// A Server is a redis-server (or valkey-server) in a node of a Net. It
// listens on the node's address, for the run's clients, and on a Unix
// socket in Dir, for the harness's own commands ([Server.Admin]): a Unix
// socket reaches it from any namespace, and no network fault touches it.
type Server struct {
	Node *Node  // where it runs
	Addr string // host:port on the node's address
	// Args are more arguments for the server, such as --replicaof; Env,
	// more environment, such as a clock shim's LD_PRELOAD. Set them before
	// Start.
	Args, Env []string

	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has ended
}

// NewServer returns a server for node, not started, with its files in dir.
func NewServer(node *Node, dir string) *Server {
	return &Server{Node: node, Addr: net.JoinHostPort(node.IP, "6379"), dir: dir}
}

// Socket is the path of the server's Unix socket.
func (s *Server) Socket() string { return filepath.Join(s.dir, s.Node.Name+".sock") }

// Start starts the server without persistence, in a process group of its
// own, and returns once it answers PING on its socket, within 10 s. The
// binary is $LOCKSMITH_REDIS_SERVER, or redis-server on PATH.
func (s *Server) Start() error {
	bin, err := redistest.Binary()
	if err != nil {
		return fmt.Errorf("jepsen: %w", err)
	}
	args := slices.Concat([]string{"--bind", s.Node.IP, "--port", "6379", "--unixsocket", s.Socket(), "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, s.Node.Name+".log")}, s.Args)
	s.cmd = s.Node.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), s.Env...)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("jepsen: starting %s in %s: %w", bin, s.Node.Name, err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	c := s.Admin()
	defer c.Close()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("jepsen: redis-server in %s ended at start (see %s)", s.Node.Name, filepath.Join(s.dir, s.Node.Name+".log"))
		default:
		}
		if time.Since(start) > 10*time.Second {
			return errors.Join(fmt.Errorf("jepsen: redis-server in %s: PING on its socket = %w after 10 s, want PONG", s.Node.Name, err), s.Kill())
		}
	}
}

// Admin returns a client of the server's Unix socket, which no network
// fault touches, with timeouts of a second. The caller closes it.
func (s *Server) Admin() *redis.Client {
	return redis.NewClient(&redis.Options{Network: "unix", Addr: s.Socket(), MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
}

// Kill ends the server at once (SIGKILL), and with it every key it held.
// Start starts it again, empty.
func (s *Server) Kill() error {
	if s.cmd == nil {
		return nil
	}
	if s.ended() {
		s.cmd = nil
		return nil
	}
	err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.cmd = nil
	if errors.Is(err, syscall.ESRCH) {
		err = nil
	}
	return err
}

// Pause stops the server's processes (SIGSTOP): connections stay open, and
// nothing answers, until Resume.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume undoes Pause (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	if s.cmd == nil || s.ended() {
		return fmt.Errorf("jepsen: server in %s not running", s.Node.Name)
	}
	return syscall.Kill(-s.cmd.Process.Pid, sig)
}

// ended reports whether the server's process ended and was reaped: its
// number, and its group's, may then be another process's (a test's
// redis-server), which a signal to it would reach.
func (s *Server) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
