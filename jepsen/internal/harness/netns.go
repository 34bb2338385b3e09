package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Net is a run's network: a namespace for each node, joined by a bridge
// in a namespace of its own. Its traffic stays inside those namespaces. The
// names carry the run's process ID, so that two runs never meet and a dead
// run's leftovers can be swept ([Sweep]).
type Net struct {
	prefix string // j<pid>
	nodes  []*Node
}

// A Node is a namespace of a Net, with one address on its bridge.
type Node struct {
	Name string // as given to NewNet
	IP   string // its address on the bridge

	ns   string // the namespace's name
	link string // its end of the link, in the bridge's namespace
	net  *Net
}

// nsRun is the directory of the namespaces that ip netns names.
const nsRun = "/var/run/netns"

// Supported returns why this process cannot make a Net, or nil: it needs
// CAP_NET_ADMIN and the ip command.
func Supported() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("jepsen: no ip command (iproute2): %w", err)
	}
	caps, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("jepsen: reading this process's capabilities: %w", err)
	}
	for line := range strings.Lines(string(caps)) {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				return fmt.Errorf("jepsen: reading CapEff %q: %w", hex, err)
			}
			if eff&(1<<unix.CAP_NET_ADMIN) == 0 {
				return errors.New("jepsen: this process lacks CAP_NET_ADMIN, which network namespaces need (run as root)")
			}
			return nil
		}
	}
	return errors.New("jepsen: no CapEff in /proc/self/status")
}

// NewNet makes a namespace for each name, with the address 10.77.0.i
// for the ith, on one bridge. Close removes them. The names must be
// distinct and not empty, from 1 to 250 of them.
func NewNet(names ...string) (*Net, error) {
	if len(names) == 0 || len(names) > 250 {
		return nil, fmt.Errorf("jepsen: NewNet of %d nodes, want 1 to 250", len(names))
	}
	for i, name := range names {
		if name == "" || slices.Contains(names[:i], name) {
			return nil, fmt.Errorf("jepsen: NewNet: node name %q, want names non-empty and distinct", name)
		}
	}
	n := &Net{prefix: "j" + strconv.Itoa(os.Getpid())}
	sw := n.prefix + "-sw"
	if err := ip("netns", "add", sw); err != nil {
		return nil, err
	}
	n.nodes = append(n.nodes, &Node{Name: "switch", ns: sw, net: n})
	err := ipAll(
		[]string{"-n", sw, "link", "add", "br0", "type", "bridge"},
		[]string{"-n", sw, "link", "set", "br0", "up"},
	)
	for i, name := range names {
		if err != nil {
			break
		}
		node := &Node{
			Name: name,
			IP:   fmt.Sprintf("10.77.0.%d", i+1),
			ns:   fmt.Sprintf("%s-%d", n.prefix, i+1),
			link: fmt.Sprintf("%ss%d", n.prefix, i+1),
			net:  n,
		}
		if err = ip("netns", "add", node.ns); err != nil {
			break
		}
		n.nodes = append(n.nodes, node)
		inner := fmt.Sprintf("%sn%d", n.prefix, i+1)
		err = ipAll(
			[]string{"link", "add", inner, "type", "veth", "peer", "name", node.link},
			[]string{"link", "set", inner, "netns", node.ns},
			[]string{"link", "set", node.link, "netns", sw},
			[]string{"-n", node.ns, "addr", "add", node.IP + "/24", "dev", inner},
			[]string{"-n", node.ns, "link", "set", inner, "up"},
			[]string{"-n", node.ns, "link", "set", "lo", "up"},
			[]string{"-n", sw, "link", "set", node.link, "master", "br0"},
			[]string{"-n", sw, "link", "set", node.link, "up"},
		)
	}
	if err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

// Node returns the node named name, or nil.
func (n *Net) Node(name string) *Node {
	for _, node := range n.nodes[1:] {
		if node.Name == name {
			return node
		}
	}
	return nil
}

// Close removes the Net's namespaces, and with them their links. A process
// still running in one keeps its namespace alive, unreachable, until it
// ends: stop them first.
func (n *Net) Close() error {
	var errs []error
	for _, node := range n.nodes {
		if err := ip("netns", "del", node.ns); err != nil {
			errs = append(errs, err)
		}
	}
	n.nodes = nil
	return errors.Join(errs...)
}

// Cut isolates the node: its link to the bridge goes down, and nothing
// reaches it or leaves it, until Heal.
func (node *Node) Cut() error {
	return ip("-n", node.net.nodes[0].ns, "link", "set", node.link, "down")
}

// Heal undoes Cut.
func (node *Node) Heal() error {
	return ip("-n", node.net.nodes[0].ns, "link", "set", node.link, "up")
}

// Command returns a command that runs in the node's namespace, in a process
// group of its own, so that killing the group ends it and its children.
func (node *Node) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", node.ns, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// DialContext dials from the node's namespace: the connection's socket is
// made there, so its traffic goes over the node's link, whatever goroutine
// then uses it. It has the signature of go-redis's Options.Dialer.
func (node *Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := node.in(func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// in calls fn on a thread that is in the node's namespace, and returns its
// error. The sockets that fn makes stay in the namespace.
//
// The thread goes back to its own namespace afterwards, and serves other
// goroutines again: a thread that Go ends (a locked one whose goroutine
// returns) kills the children it started with a parent-death signal, as
// the servers of internal/testing/redistest are. A thread that cannot go
// back stays locked, and ends with fn's goroutine.
func (node *Node) in(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread() // it never left its namespace
			done <- fmt.Errorf("jepsen: open this thread's namespace: %w", err)
			return
		}
		defer home.Close()
		if err := enter(filepath.Join(nsRun, node.ns)); err != nil {
			// It never left its namespace (a Net already closed, whose
			// clients dial again in the background): ending the thread
			// would kill the children it started, such as a later test's
			// redis-server, with their parent-death signal.
			runtime.UnlockOSThread()
			done <- err
			return
		}
		err = fn()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// enter moves the calling thread into the network namespace at path.
func enter(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("jepsen: open namespace: %w", err)
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("jepsen: setns %s: %w", path, err)
	}
	return nil
}

// Sweep removes the namespaces of runs whose process has ended, and kills
// the processes still in them: a run that was killed leaves its
// namespaces behind, and its servers running there.
func Sweep() error {
	entries, err := os.ReadDir(nsRun)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jepsen: %w", err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		pid, ok := runPID(name)
		if !ok || pid == os.Getpid() || unix.Kill(pid, 0) == nil {
			continue
		}
		out, err := exec.Command("ip", "netns", "pids", name).Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("jepsen: ip netns pids %s: %w", name, err))
			continue
		}
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if err := ip("netns", "del", name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runPID returns the process ID in a namespace name that a Net made:
// j<pid>-sw or j<pid>-<i>.
func runPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "j")
	if !ok {
		return 0, false
	}
	pid, suffix, ok := strings.Cut(rest, "-")
	if !ok || (suffix != "sw" && strings.Trim(suffix, "0123456789") != "") || suffix == "" {
		return 0, false
	}
	n, err := strconv.Atoi(pid)
	return n, err == nil && n > 0
}

// ip runs the ip command with args.
func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("jepsen: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// ipAll runs ip with each list of arguments in turn, up to the first error.
func ipAll(lists ...[]string) error {
	for _, args := range lists {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}
