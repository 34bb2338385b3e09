package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// SentinelPort is the port a Sentinel of [StartSentinels] listens on, on
// its node's address.
const SentinelPort = "26379"

// FailoverTimeout is the failover-timeout of the Sentinels of
// [StartSentinels]: a Sentinel aborts a failover that has not promoted its
// replica within it, and tries again for the same master only after
// twice it.
const FailoverTimeout = 3 * time.Second

// Sentinels are Redis Sentinels, one in each of a set of nodes, that
// monitor one master. Each listens on its node's address, port
// [SentinelPort], for the run's clients, and on a Unix socket in the run's
// directory, for the harness's own questions: a Unix socket reaches it from
// any namespace, and no network fault touches it.
type Sentinels struct {
	name  string
	procs []*sentinel
}

// sentinel is one Sentinel process of a Sentinels.
type sentinel struct {
	node         *Node
	addr, socket string
	log          string
	cmd          *exec.Cmd
	done         chan struct{} // closed when cmd has ended
}

// StartSentinels starts a Sentinel in each of nodes, with its files in dir
// (its configuration, which it rewrites, its log and its socket, each named
// after its node), monitoring the master named name at master.Addr, with a
// quorum of a majority of nodes (2 of 3), down-after-milliseconds of
// downAfter and a failover-timeout of [FailoverTimeout]. It returns once
// master counts replicas online replicas, and every Sentinel lists them,
// in good standing, and knows every other Sentinel, within 30 s: a failover
// before the Sentinels list the replicas would abort
// (-failover-abort-no-good-slave). The binary is that of [Server.Start],
// with --sentinel. Close kills them.
//
// The nodes must be distinct and of master's Net, the name a single word,
// replicas not negative, and downAfter a millisecond at least.
func StartSentinels(nodes []*Node, dir, name string, master *Server, replicas int, downAfter time.Duration) (*Sentinels, error) {
	switch {
	case len(nodes) == 0:
		return nil, errors.New("jepsen: StartSentinels of no node, want one or more")
	case master == nil || master.Node == nil:
		return nil, errors.New("jepsen: StartSentinels of a nil master")
	case name == "" || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == '"' || r == '\'' }):
		return nil, fmt.Errorf("jepsen: StartSentinels: master name %q, want one word", name)
	case replicas < 0:
		return nil, fmt.Errorf("jepsen: StartSentinels of %d replicas, want 0 or more", replicas)
	case downAfter < time.Millisecond:
		return nil, fmt.Errorf("jepsen: StartSentinels: down-after %v, want a millisecond or more", downAfter)
	}
	for i, node := range nodes {
		switch {
		case node == nil:
			return nil, errors.New("jepsen: StartSentinels in a nil node")
		case node.net != master.Node.net:
			return nil, fmt.Errorf("jepsen: StartSentinels: node %q is not of the master's Net", node.Name)
		case slices.Contains(nodes[:i], node):
			return nil, fmt.Errorf("jepsen: StartSentinels: node %q twice, want each node once", node.Name)
		}
	}
	host, port, err := net.SplitHostPort(master.Addr)
	if err != nil {
		return nil, fmt.Errorf("jepsen: StartSentinels: master address: %w", err)
	}
	if err := waitFor(30*time.Second, func(ctx context.Context) (bool, error) {
		info, err := admin(master, func(c *redis.Client) (string, error) { return c.Info(ctx, "replication").Result() })
		return err == nil && strings.Count(info, "state=online") == replicas, err
	}); err != nil {
		return nil, fmt.Errorf("jepsen: StartSentinels: the master does not count %d online replicas: %w", replicas, err)
	}
	bin, err := redistest.Binary()
	if err != nil {
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	s := &Sentinels{name: name}
	quorum := len(nodes)/2 + 1
	for _, node := range nodes {
		p := &sentinel{
			node:   node,
			addr:   net.JoinHostPort(node.IP, SentinelPort),
			socket: filepath.Join(dir, node.Name+".sentinel.sock"),
			log:    filepath.Join(dir, node.Name+".sentinel.log"),
		}
		s.procs = append(s.procs, p)
		conf := filepath.Join(dir, node.Name+".sentinel.conf")
		text := fmt.Sprintf("port %s\nbind %s\nunixsocket %s\nunixsocketperm 700\nprotected-mode no\ndir %s\nlogfile %s\n",
			SentinelPort, node.IP, p.socket, dir, p.log) +
			fmt.Sprintf("sentinel monitor %s %s %s %d\n", name, host, port, quorum) +
			fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", name, downAfter.Milliseconds()) +
			fmt.Sprintf("sentinel failover-timeout %s %d\n", name, FailoverTimeout.Milliseconds())
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, errors.Join(fmt.Errorf("jepsen: %w", err), s.Close())
		}
		p.cmd = node.Command(bin, conf, "--sentinel")
		if err := p.cmd.Start(); err != nil {
			p.cmd = nil
			return nil, errors.Join(fmt.Errorf("jepsen: starting a Sentinel in %s: %w", node.Name, err), s.Close())
		}
		p.done = make(chan struct{})
		go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(p.cmd, p.done)
	}
	for _, p := range s.procs {
		err := waitFor(10*time.Second, func(ctx context.Context) (bool, error) {
			select {
			case <-p.done:
				return false, fmt.Errorf("it ended (see %s)", p.log)
			default:
			}
			_, err := p.ask(func(c *redis.SentinelClient) (string, error) { return c.Ping(ctx).Result() })
			return err == nil, err
		})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("jepsen: the Sentinel in %s does not answer PING on its socket: %w", p.node.Name, err), s.Close())
		}
	}
	for _, p := range s.procs {
		err := waitFor(30*time.Second, func(ctx context.Context) (bool, error) {
			others, err := p.list(ctx, (*redis.SentinelClient).Sentinels, name)
			if err != nil || others != len(nodes)-1 {
				return false, fmt.Errorf("%d other Sentinels, want %d (%w)", others, len(nodes)-1, err)
			}
			reps, err := p.list(ctx, (*redis.SentinelClient).Replicas, name)
			if err != nil || reps != replicas {
				return false, fmt.Errorf("%d replicas in good standing, want %d (%w)", reps, replicas, err)
			}
			return true, nil
		})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("jepsen: the Sentinel in %s: %w (see %s)", p.node.Name, err, p.log), s.Close())
		}
	}
	return s, nil
}

// Addrs returns the Sentinels' addresses on their nodes, for the run's
// clients.
func (s *Sentinels) Addrs() []string {
	addrs := make([]string, len(s.procs))
	for i, p := range s.procs {
		addrs[i] = p.addr
	}
	return addrs
}

// Master returns the master's address as a majority of the Sentinels name
// it, asked on their sockets, outside every fault: the master that the
// run's clients are sent to, when they reach those Sentinels. It fails if
// no majority names one address.
func (s *Sentinels) Master(ctx context.Context) (string, error) {
	votes := map[string]int{}
	var said []string
	for _, p := range s.procs {
		addr, err := p.ask(func(c *redis.SentinelClient) (string, error) {
			hp, err := c.GetMasterAddrByName(ctx, s.name).Result()
			if err != nil {
				return "", err
			}
			if len(hp) != 2 {
				return "", fmt.Errorf("GET-MASTER-ADDR-BY-NAME = %q, want a host and a port", hp)
			}
			return net.JoinHostPort(hp[0], hp[1]), nil
		})
		if err != nil {
			said = append(said, fmt.Sprintf("%s: %v", p.node.Name, err))
			continue
		}
		votes[addr]++
		said = append(said, fmt.Sprintf("%s: %s", p.node.Name, addr))
		if votes[addr] > len(s.procs)/2 {
			return addr, nil
		}
	}
	return "", fmt.Errorf("jepsen: no majority of the Sentinels names a master of %s (%s)", s.name, strings.Join(said, "; "))
}

// WaitMaster waits until a majority of the Sentinels name a master other
// than old ([Sentinels.Master]), asking every 50 ms, within ctx and a minute
// at most, and returns it.
func (s *Sentinels) WaitMaster(ctx context.Context, old string) (string, error) {
	var addr string
	err := waitForCtx(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		addr, err = s.Master(ctx)
		if err == nil && addr == old {
			err = fmt.Errorf("the Sentinels name %s still", old)
		}
		return err == nil, err
	})
	if err != nil {
		return "", fmt.Errorf("jepsen: waiting for the Sentinels to name a master other than %s: %w", old, err)
	}
	return addr, nil
}

// Close kills the Sentinels (SIGKILL to each one's process group) and
// waits for them to end. It may be called more than once.
func (s *Sentinels) Close() error {
	var errs []error
	for _, p := range s.procs {
		if p.cmd == nil {
			continue
		}
		select {
		case <-p.done: // reaped: its number may be another process's now
			p.cmd = nil
			continue
		default:
		}
		if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("jepsen: killing the Sentinel in %s: %w", p.node.Name, err))
		}
		<-p.done
		p.cmd = nil
	}
	return errors.Join(errs...)
}

// ask opens a client of the Sentinel's socket, with timeouts of a second,
// and returns what do returns with it.
func (p *sentinel) ask(do func(*redis.SentinelClient) (string, error)) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Network: "unix", Addr: p.socket, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer c.Close()
	return do(c)
}

// list returns how many entries of what the Sentinel lists of name with
// cmd (SENTINEL SENTINELS, SENTINEL REPLICAS) are in good standing: their
// flags say nothing but what they are, not down nor disconnected.
func (p *sentinel) list(ctx context.Context, cmd func(*redis.SentinelClient, context.Context, string) *redis.MapStringStringSliceCmd, name string) (int, error) {
	n, err := p.ask(func(c *redis.SentinelClient) (string, error) {
		entries, err := cmd(c, ctx, name).Result()
		good := 0
		for _, e := range entries {
			if e["flags"] == "sentinel" || e["flags"] == "slave" {
				good++
			}
		}
		return strconv.Itoa(good), err
	})
	good, _ := strconv.Atoi(n)
	return good, err
}

// admin returns what do returns with a client of s's socket.
func admin(s *Server, do func(*redis.Client) (string, error)) (string, error) {
	c := s.Admin()
	defer c.Close()
	return do(c)
}

// waitFor calls ok every 50 ms, each call within a second, until it
// reports true, for d at most; it then returns the last call's error.
func waitFor(d time.Duration, ok func(ctx context.Context) (bool, error)) error {
	return waitForCtx(context.Background(), d, ok)
}

// waitForCtx is waitFor within ctx too.
func waitForCtx(ctx context.Context, d time.Duration, ok func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var err error
	for {
		call, cancel := context.WithTimeout(ctx, time.Second)
		var done bool
		done, err = ok(call)
		cancel()
		if done {
			return nil
		}
		if err == nil {
			err = errors.New("not yet")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w after %v: %w", ctx.Err(), d, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SentinelTimeout is the dial, read and write timeout of the clients of
// [SentinelConn]: short, so that a fault shows as no answer soon.
const SentinelTimeout = timeout

// SentinelConn returns a locksmith driver of the master named name, as the
// Sentinels at addrs name it, dialing the Sentinels and the master with
// dial (a node's DialContext, or a client process's own dialer), with
// timeouts of [SentinelTimeout]; and the client under it, for the caller
// to close. drv is "goredis" (redis.NewFailoverClient, with dial as its
// Dialer, one dial attempt and no retry) or "rueidis" (driver/rueidis's
// NewClient with Sentinel.MasterSet, dial as its DialCtxFn, and no
// client-side cache). A rueidis client
// asks the Sentinels as it opens, so SentinelConn fails if none answers
// then; a go-redis client asks on its first dial. redigo has no Sentinel
// client: "redigo" is an error, as is any other drv.
func SentinelConn(drv string, dial DialFunc, addrs []string, name string) (driver.Conn, io.Closer, error) {
	if dial == nil {
		return nil, nil, errors.New("jepsen: SentinelConn with a nil dial")
	}
	if len(addrs) == 0 || name == "" {
		return nil, nil, fmt.Errorf("jepsen: SentinelConn of master %q through %d Sentinels, want a name and one or more", name, len(addrs))
	}
	switch drv {
	case "goredis":
		c := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: name, SentinelAddrs: addrs, Dialer: dial,
			MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true,
			DialTimeout: SentinelTimeout, ReadTimeout: SentinelTimeout, WriteTimeout: SentinelTimeout,
		})
		return goredis.New(c), c, nil
	case "rueidis":
		c, cl, err := rueidisConn(rueidis.ClientOption{InitAddress: addrs,
			Sentinel: rueidis.SentinelOption{MasterSet: name, Dialer: net.Dialer{Timeout: SentinelTimeout}}}, dial)
		if err != nil {
			return nil, nil, fmt.Errorf("jepsen: a rueidis Sentinel client of %s: %w", name, err)
		}
		return c, cl, nil
	case "redigo":
		return nil, nil, errors.New("jepsen: SentinelConn over redigo: redigo has no Sentinel client")
	}
	return nil, nil, fmt.Errorf("jepsen: SentinelConn over %q: no such driver, want goredis or rueidis", drv)
}
