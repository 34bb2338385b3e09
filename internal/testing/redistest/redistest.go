// Package redistest starts real redis-server processes for tests, on free
// loopback ports, with no persistence, and stops them when the test ends.
// It can kill, pause (SIGSTOP), resume and restart a server, cut it off
// from its clients with a proxy that drops every byte, and start a
// Redis Cluster, a TLS-only server with a PKI made for the test, and a
// server that also listens on a Unix socket. It never touches port 6379 or
// a server it did not start.
//
// The binary is $LOCKSMITH_REDIS_SERVER, or redis-server on PATH; a
// valkey-server serves too (.ci/servers fetches Valkey 8.0 and 8.1). Without
// it, tests that need real servers skip, and [Addr] falls back to an
// embedded in-process server; with LOCKSMITH_REQUIRE_REDIS=1 (as CI sets),
// a missing binary fails the test instead. Topologies that take long to
// start or to fail over, and long runs, run only with LOCKSMITH_FULL=1, as
// CI sets (see [RequireFull]).
package redistest

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy"
)

// Environment variables read by the harness.
const (
	EnvBinary  = "LOCKSMITH_REDIS_SERVER"  // path to redis-server
	EnvRequire = "LOCKSMITH_REQUIRE_REDIS" // "1": a missing redis-server fails the test
	EnvFull    = "LOCKSMITH_FULL"          // "1": run the long tests too
	EnvAlone   = "LOCKSMITH_ALONE"         // "1": run the timing tests that need the machine to themselves
)

// Binary returns the path of redis-server.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	return exec.LookPath("redis-server")
}

// Required reports whether real servers are mandatory.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Full reports whether the long tests run: LOCKSMITH_FULL=1.
func Full() bool { return os.Getenv(EnvFull) == "1" }

// RequireFull skips t, saying what it is, unless LOCKSMITH_FULL=1.
func RequireFull(t testing.TB, what string) {
	t.Helper()
	if !Full() {
		t.Skipf("%s runs only with %s=1, as CI sets", what, EnvFull)
	}
}

// RequireAlone skips t, saying what it is, unless LOCKSMITH_ALONE=1: for a
// timing test under a load it makes itself, which CI runs in a step of its
// own.
func RequireAlone(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(EnvAlone) != "1" {
		t.Skipf("%s runs only with %s=1, alone on the machine, as CI's step of its own has it", what, EnvAlone)
	}
}

// ParallelUnlessFull marks t parallel unless LOCKSMITH_FULL=1: for tests
// that keep the CPU busy (conformance suites, the CLI's -race builds), whose
// load side by side, in CI's full step of four packages at a time on two
// cores, starved Redlock's node timeouts.
func ParallelUnlessFull(t *testing.T) {
	if !Full() {
		t.Parallel()
	}
}

// Parallel sets go test's -parallel to n, unless the command line sets it,
// for a TestMain (before m.Run) whose parallel tests wait on servers and
// timers rather than on the CPU.
func Parallel(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// RequireBinary returns the redis-server path, or skips the test (fails it
// when real servers are required).
func RequireBinary(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err == nil {
		return bin
	}
	if Required() {
		t.Fatalf("redis-server is required (%s=1) but not found: %v", EnvRequire, err)
	}
	t.Skipf("real redis-server not available (%v): install it, or set %s; skipping real-server test", err, EnvBinary)
	return ""
}

// Addr returns the address of a Redis for functional tests: a real server
// started for t when redis-server is available, an embedded one otherwise.
// The second result says which.
func Addr(t testing.TB) (addr string, real bool) {
	t.Helper()
	if _, err := Binary(); err == nil || Required() {
		return Start(t, 1)[0].Addr, true
	}
	s := locktest.NewServer(t)
	t.Logf("redis-server not found: using the embedded server at %s", s.Addr())
	return s.Addr(), false
}

// Server is a redis-server process started by the harness.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int
	// Socket is the path of the server's Unix socket, for a server from
	// [StartUnix]; empty otherwise.
	Socket string

	bin  string
	dir  string
	args []string
	tls  *tls.Config // how the harness talks to a TLS-only server

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts n servers and stops them when t ends.
func Start(t testing.TB, n int, extra ...string) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = startWith(t, "redis-server", func(s *Server) []string {
			return append(s.baseArgs("--port"), expand(extra, s)...)
		})
	}
	return servers
}

// maxSocketPath is the longest Unix socket path every system takes: sun_path
// holds 108 bytes on Linux and 104 on macOS, with the terminating NUL.
const maxSocketPath = 103

// StartUnix starts a server that also listens on a Unix socket, in its own
// temporary directory, that only its owner may connect to (unixsocketperm
// 700), and stops it when t ends. It keeps its loopback port, over which
// the harness's own commands go, so that Command, Kill and Restart work as
// on any server.
func StartUnix(t testing.TB) *Server {
	t.Helper()
	return startWith(t, "redis-server on a Unix socket", func(s *Server) []string {
		s.Socket = filepath.Join(s.dir, "redis.sock")
		if len(s.Socket) > maxSocketPath {
			t.Fatalf("Unix socket path %s is %d bytes, more than the %d a socket address holds: set GOTMPDIR to a shorter directory",
				s.Socket, len(s.Socket), maxSocketPath)
		}
		return append(s.baseArgs("--port"), "--unixsocket", s.Socket, "--unixsocketperm", "700")
	})
}

// baseArgs are the arguments of every server: listening on its port (as
// portFlag says: --port, or --tls-port for TLS only), with no persistence.
func (s *Server) baseArgs(portFlag string) []string {
	return []string{
		portFlag, strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"), "--daemonize", "no",
	}
}

// startWith starts what, a server with the arguments args returns for it,
// and stops it when t ends; it fails t if it cannot.
func startWith(t testing.TB, what string, args func(*Server) []string) *Server {
	t.Helper()
	bin := RequireBinary(t)
	var err error
	for try := 0; try < 5; try++ { // a free port can be taken before we bind it
		var port int
		if port, err = freePort(); err != nil {
			break
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, bin: bin, dir: t.TempDir()}
		s.args = args(s)
		if err = s.launch(); err == nil {
			t.Cleanup(s.Kill) // SIGKILL ends a paused server too
			return s
		}
	}
	t.Fatalf("start %s: %v", what, err)
	return nil
}

// expand replaces {busport} in extra arguments with a free port, and {dir}
// with s's directory, for per-server settings such as the cluster's.
func expand(extra []string, s *Server) []string {
	out := make([]string, len(extra))
	for i, a := range extra {
		if a == "{busport}" {
			p, _ := freePort()
			a = strconv.Itoa(p)
		}
		out[i] = strings.ReplaceAll(a, "{dir}", s.dir)
	}
	return out
}

func freePort() (int, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 6379 {
			return port, nil
		}
	}
}

// launch starts the process and waits until it answers, as itself.
func (s *Server) launch() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.SysProcAttr = sysProcAttr()
	if err := start(cmd); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited: %s", s.Addr, s.logTail())
		default:
		}
		if s.answers(cmd.Process.Pid) == nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Kill()
	return fmt.Errorf("redis-server on %s did not answer as itself within 10s: %s", s.Addr, s.logTail())
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// answers reports whether the server on s.Addr is the process pid: a port
// that freePort found free can be taken by another test's server before
// ours binds it, and ours then exits while the other answers PING.
func (s *Server) answers(pid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	info, err := s.Command(ctx, "INFO", "server")
	if err != nil {
		return err
	}
	if want := "process_id:" + strconv.Itoa(pid) + "\r\n"; !strings.Contains(info, want) {
		return fmt.Errorf("%s is answered by another process than %d", s.Addr, pid)
	}
	// A server restarted with persistence answers INFO while it loads its
	// data, and LOADING to the rest until it is done.
	if p, err := s.Command(ctx, "INFO", "persistence"); err != nil || strings.Contains(p, "loading:1") {
		return fmt.Errorf("%s is loading its data (%v)", s.Addr, err)
	}
	return nil
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Kill kills the server with SIGKILL and waits until it has exited. Its
// data is lost: there is no persistence.
func (s *Server) Kill() {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	s.signal(syscall.SIGKILL)
	if exited != nil {
		<-exited
	}
}

// Pause stops the server with SIGSTOP: it keeps its connections and data
// but answers nothing until Resume.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Restart kills the server if it runs and starts it again, empty, on the
// same port.
func (s *Server) Restart() error {
	s.Kill()
	return s.launch()
}

// Cluster is a Redis Cluster of masters started by the harness.
type Cluster struct {
	Servers []*Server
}

// Addrs returns the masters' addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// clusterArgs are the arguments of a Cluster node.
var clusterArgs = []string{"--cluster-enabled", "yes",
	"--cluster-config-file", "{dir}/nodes.conf", "--cluster-port", "{busport}",
	"--cluster-node-timeout", "5000"}

// StartCluster starts a cluster of n masters (no replicas), with the 16384
// slots split evenly, and waits until every node reports cluster_state:ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	servers := Start(t, n, clusterArgs...)
	const slots = 16384
	for i, s := range servers {
		lo, hi := i*slots/n, (i+1)*slots/n-1
		s.do(t, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
		if i > 0 {
			meet(t, s, servers[0])
		}
	}
	for _, s := range servers {
		Eventually(t, "the cluster ready on "+s.Addr, func(ctx context.Context) bool {
			info, err := s.Command(ctx, "CLUSTER", "INFO")
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r")
		})
	}
	return &Cluster{Servers: servers}
}

// meet introduces the Cluster node s to the node to.
func meet(t testing.TB, s, to *Server) {
	t.Helper()
	_, bus, _ := strings.Cut(to.do(t, "CONFIG", "GET", "cluster-port"), " ") // "cluster-port <port>"
	s.do(t, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(to.Port), bus)
}

// StartReplica starts a Cluster node that replicates master, one of c's
// masters, and stops it when t ends. It returns once master counts it as
// an online replica. c.Servers still lists the masters only.
func (c *Cluster) StartReplica(t testing.TB, master *Server) *Server {
	t.Helper()
	noSyncDelay(t, master)
	id := master.do(t, "CLUSTER", "MYID")
	r := Start(t, 1, clusterArgs...)[0]
	meet(t, r, master)
	// CLUSTER REPLICATE fails until the new node has learnt of master.
	Eventually(t, r.Addr+" replicates "+master.Addr, func(ctx context.Context) bool {
		_, err := r.Command(ctx, "CLUSTER", "REPLICATE", id)
		return err == nil
	})
	WaitReplicas(t, master.Addr, 1)
	return r
}

// Unstamped returns v, a lock's value as a Locker wrote it, without the
// stamp that the Locker writes between the token and the metadata (see the
// lock package's stamp.go): the token and the metadata, as tests compare
// them. Any other value is returned as it is.
func Unstamped(v string) string {
	if len(v) < strategy.TokenLen || len(v) == strategy.TokenLen || v[strategy.TokenLen] != '\x1e' {
		return v
	}
	end := strings.IndexByte(v[strategy.TokenLen+1:], '\x1e')
	if end < 0 {
		return v
	}
	return v[:strategy.TokenLen] + v[strategy.TokenLen+1+end+1:]
}
