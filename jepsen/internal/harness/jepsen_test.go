package harness

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	runTime   = flag.Duration("jepsen.time", 3*time.Minute, "how long TestJepsen's runs take in all, shared among them")
	runOps    = flag.Int("jepsen.ops", 0, "end TestJepsen's runs once they obtained this many locks in all, shared among them (0: no limit; -jepsen.time still bounds them)")
	runDriver = flag.String("jepsen.driver", "", `the driver of TestJepsen's runs: one of `+strings.Join(Drivers, ", ")+`, "all" for each in turn, or "" for one by the seed`)
	runOnly   = flag.String("jepsen.run", "", "run only TestJepsen's runs whose name contains this")
	runOut    = flag.String("jepsen.out", "", "the directory for TestJepsen's histories and reports (default: a new one in the temporary directory)")
	runAll    = flag.Bool("jepsen.measure", false, "run also the configurations whose violations TestJepsen measures and does not judge, for docs/safety.md")
)

// envClient holds the configuration of a client process: the test binary,
// run again by TestJepsen in a node's namespace.
const envClient = "JEPSEN_CLIENT"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envClient); cfg != "" {
		os.Exit(clientMain(cfg))
	}
	os.Exit(m.Run())
}

// clientMain runs a client process: the ClientConfig in cfg, until SIGTERM.
func clientMain(cfg string) int {
	var c ClientConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %s=%s: %v\n", envClient, cfg, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := RunClient(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A jcase is a configuration of TestJepsen: a strategy over servers, the
// faults that hit them, and what its runs must find.
type jcase struct {
	name     string
	strategy string
	servers  int      // in namespaces n1, n2, ...
	clients  int      // processes, in namespaces c1, c2, ...
	fencing  bool     // lock.WithFencing
	faults   []string // the kinds the schedule draws from
	expect   expect
	skew     func(client int) time.Duration // setnx-getset: each client's clock
	margin   time.Duration                  // setnx-getset: the skew it allows for
	weight   int                            // its share of -jepsen.time; 0 is 1
	// sentinels, when not 0, makes servers[0] a master that as many
	// Sentinels monitor, the other servers its replicas; withReplicas is
	// single.WithReplicas's count.
	sentinels, withReplicas int
	args                    []string // more arguments for every server
}

// An expect is what a run must find.
type expect int

const (
	// isSafe: a configuration that the docs call safe under its faults. A
	// run finds no two holders within their validity, no fence issued
	// twice or out of order, no collision at the fenced register, and the
	// lock had again after every heal.
	isSafe expect = iota
	// isUnsafe: a configuration known to be unsafe under its faults; its
	// run must find a violation of exclusion, or, without fencing, updates
	// lost at the counter: a checker that finds none is broken.
	isUnsafe
	// isMeasured: a configuration whose violations are counted and reported,
	// for docs/safety.md, and not judged.
	isMeasured
)

// Fault kinds that every strategy's run draws from.
var (
	netFaults    = []string{"cut-server", "cut-client", "halves", "drop-replies", "drop-requests", "loss", "delay"}
	pauseFaults  = []string{"pause-client-hold", "pause-client-invoke"}
	serverFaults = []string{"pause-server"}
)

var jcases = []jcase{
	{name: "single", strategy: "single", servers: 1, clients: 3, fencing: true, expect: isSafe,
		faults: slices.Concat(netFaults, serverFaults, pauseFaults)},
	{name: "single-unfenced-pauses", strategy: "single", servers: 1, clients: 3, expect: isUnsafe,
		faults: []string{"pause-client-hold"}},
	{name: "single-restarts", strategy: "single", servers: 1, clients: 3, fencing: true, expect: isMeasured,
		faults: []string{"kill-restart-now", "kill-restart-after-ttl"}},
	{name: "single-clocks", strategy: "single", servers: 1, clients: 3, fencing: true, expect: isMeasured,
		faults: []string{"clock-jump", "clock-strobe"}},
	{name: "redlock", strategy: "redlock", servers: 5, clients: 3, expect: isSafe, weight: 2,
		faults: slices.Concat([]string{"cut-minority", "ring", "cut-client", "drop-replies", "drop-requests", "loss",
			"delay-below-timeout", "delay-over-timeout", "kill-restart-after-ttl"}, serverFaults, pauseFaults)},
	{name: "redlock-clocks", strategy: "redlock", servers: 5, clients: 3, expect: isMeasured,
		faults: []string{"clock-jump", "clock-strobe", "cut-minority"}},
	{name: "sentinel", strategy: "single", servers: 2, sentinels: 3, clients: 3, fencing: true, expect: isUnsafe, weight: 2,
		faults: []string{"failover"}},
	{name: "sentinel-replicas", strategy: "single", servers: 2, sentinels: 3, withReplicas: 1, clients: 3, fencing: true, expect: isSafe, weight: 3,
		faults: []string{"failover"}},
	{name: "sentinel-2-replicas", strategy: "single", servers: 3, sentinels: 3, withReplicas: 1, clients: 3, fencing: true, expect: isMeasured, weight: 3,
		faults: []string{"failover"}},
	{name: "sentinel-min-replicas", strategy: "single", servers: 3, sentinels: 3, clients: 3, fencing: true, expect: isMeasured, weight: 3,
		args: []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"}, faults: []string{"failover"}},
	{name: "setnx-getset", strategy: "setnx-getset", servers: 1, clients: 3, margin: 100 * time.Millisecond, expect: isSafe,
		skew:   func(c int) time.Duration { return time.Duration(c-1) * 40 * time.Millisecond },
		faults: slices.Concat(netFaults, serverFaults, pauseFaults)},
	{name: "setnx-getset-skewed", strategy: "setnx-getset", servers: 1, clients: 3, margin: 100 * time.Millisecond, expect: isUnsafe,
		skew:   func(c int) time.Duration { return time.Duration(c) * 3 * jepsenTTL / 2 },
		faults: []string{"delay"}},
}

// jepsenKeys are the keys that a run's clients lock.
var jepsenKeys = []string{"jepsen:a", "jepsen:b", "jepsen:c", "jepsen:d"}

const (
	jepsenTTL  = time.Second
	jepsenHold = 10 * time.Millisecond
	// liveBound is how soon after a heal the lock must be had again: a
	// TTL, for a holder cut off with it, the clients' retry interval, and
	// a second.
	liveBound = jepsenTTL + 10*time.Millisecond + time.Second
	// runCost is about what a run takes beyond its clients' time: to set
	// up, and to check for liveness and leaks at the end.
	runCost = 7 * time.Second
)

// TestJepsen runs each configuration of jcases under a seeded schedule of
// faults, and checks its history: no two holders within their validity at
// once, fencing tokens unique and in order, the lock had again soon after
// each heal, and no key left without an expiry or after the run. The runs
// of configurations known to be unsafe must find a violation. README.md
// says how to run it longer, or replay a seed.
func TestJepsen(t *testing.T) {
	requireFirewall(t) // and the network
	requireGCC(t)      // for the clock shim
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	out := *runOut
	if out == "" {
		var err error
		if out, err = os.MkdirTemp("", "jepsen-"); err != nil {
			t.Fatal(err)
		}
	}
	type planned struct {
		c   jcase
		drv string
	}
	var plan []planned
	for i, c := range jcases {
		if c.expect == isMeasured && !*runAll {
			continue
		}
		drvs := []string{Drivers[(int(s%3)+i)%len(Drivers)]}
		switch *runDriver {
		case "":
		case "all":
			drvs = Drivers
		default:
			drvs = []string{*runDriver}
		}
		for _, drv := range drvs {
			if c.sentinels > 0 && drv == "redigo" {
				drv = "goredis" // redigo has no Sentinel client
				if *runDriver != "" {
					continue
				}
			}
			if strings.Contains(c.name+"/"+drv, *runOnly) {
				plan = append(plan, planned{c, drv})
			}
		}
	}
	if len(plan) == 0 {
		t.Fatalf("no run matches -jepsen.run=%q -jepsen.driver=%q", *runOnly, *runDriver)
	}
	weights := 0
	for _, p := range plan {
		weights += max(p.c.weight, 1)
	}
	t.Logf("seed -jepsen.seed=%d; %d runs in %v; histories and reports in %s", s, len(plan), *runTime, out)
	for i, p := range plan {
		share := *runTime * time.Duration(max(p.c.weight, 1)) / time.Duration(weights)
		t.Run(p.c.name+"/"+p.drv, func(t *testing.T) {
			dir := filepath.Join(out, fmt.Sprintf("%d-%s-%s", i, p.c.name, p.drv))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			r := newTrial(t, p.c, p.drv, dir, s+uint64(i))
			r.run(share-runCost, *runOps*max(p.c.weight, 1)/weights)
		})
	}
}

// A trial is one run of a configuration: its network, servers, clients
// and schedule.
type trial struct {
	t       *testing.T
	c       jcase
	drv     string
	dir     string
	rng     *rand.Rand
	net     *Net
	servers []*Server
	clocks  []*Clock   // one per server
	delays  []*Delayer // one per server, which the clients dial
	clients []*Node
	sent    *Sentinels // with c.sentinels
	procs   []*clientProc
	ctl     *Control
	start   int64 // on Now's clock

	mu       sync.Mutex
	schedule []string
	heals    []int64 // of the faults that a heal ends, for liveness
	began    []int64 // when each fault began
}

func newTrial(t *testing.T, c jcase, drv, dir string, seed uint64) *trial {
	r := &trial{t: t, c: c, drv: drv, dir: dir, rng: rand.New(rand.NewPCG(seed, seed))}
	var names []string
	for i := range c.servers {
		names = append(names, fmt.Sprint("n", i+1))
	}
	for i := range c.clients {
		names = append(names, fmt.Sprint("c", i+1))
	}
	for i := range c.sentinels {
		names = append(names, fmt.Sprint("s", i+1))
	}
	r.net = newNet(t, names...)
	for i := range c.servers {
		clk := newClock(t, dir)
		s := NewServer(r.net.Node(names[i]), dir)
		s.Env, s.Args = clk.Env(), c.args
		if c.sentinels > 0 && i > 0 {
			s.Args = append(slices.Clip(s.Args), "--replicaof", r.servers[0].Node.IP, "6379")
		}
		started(t, s)
		d, err := NewDelayer(s.Node, 6380, s.Addr, r.rng.Uint64())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		r.servers, r.clocks, r.delays = append(r.servers, s), append(r.clocks, clk), append(r.delays, d)
	}
	if slices.ContainsFunc(c.faults, func(f string) bool { return strings.HasPrefix(f, "clock") }) {
		for i, s := range r.servers {
			if err := r.clocks[i].Check(s); err != nil {
				t.Skipf("clock faults: %v", err)
			}
		}
	}
	for i := range c.clients {
		r.clients = append(r.clients, r.net.Node(names[c.servers+i]))
	}
	if c.sentinels > 0 {
		var nodes []*Node
		for i := range c.sentinels {
			nodes = append(nodes, r.net.Node(fmt.Sprint("s", i+1)))
		}
		sent, err := StartSentinels(nodes, dir, "jepsen", r.servers[0], c.servers-1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sent.Close() })
		r.sent = sent
	}
	ctl, err := NewControl(filepath.Join(dir, "control.sock"))
	if err != nil {
		t.Fatal(err)
	}
	r.ctl = ctl
	t.Logf("seed %d: %s over %s, %d servers, %d client processes; in %s", seed, c.name, drv, c.servers, c.clients, dir)
	return r
}

// log records a line of the schedule, stamped with the run's time.
func (r *trial) log(format string, args ...any) {
	line := fmt.Sprintf("%7.3fs ", time.Duration(Now()-r.start).Seconds()) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.schedule = append(r.schedule, line)
	r.mu.Unlock()
}

// run runs the clients for d, or until they obtained ops locks, while the
// schedule's faults hit them; then checks the history.
func (r *trial) run(d time.Duration, ops int) {
	t := r.t
	r.start = Now()
	var addrs []string
	for _, d := range r.delays {
		addrs = append(addrs, d.Addr())
	}
	for i, node := range r.clients {
		cfg := ClientConfig{
			Name: node.Name, Control: r.ctl.Path(), Strategy: r.c.strategy, Driver: r.drv, Addrs: addrs,
			Keys: jepsenKeys, TTL: jepsenTTL, Hold: jepsenHold, Fencing: r.c.fencing,
			Seed: r.rng.Uint64(),
		}
		if r.c.skew != nil {
			cfg.Skew, cfg.Margin = r.c.skew(i), r.c.margin
		}
		if r.sent != nil {
			cfg.Addrs, cfg.Sentinels, cfg.Master, cfg.Replicas = nil, r.sent.Addrs(), "jepsen", r.c.withReplicas
		}
		r.startClient(node, cfg)
	}
	stop := make(chan struct{})
	faults := make(chan int, 1)
	go func() { faults <- r.faults(stop) }()
	leaks := make(chan []string, 1)
	go func() { leaks <- r.scan(stop) }()
	end := time.Now().Add(d)
	for n, _ := r.ctl.Obtained(); time.Now().Before(end) && (ops == 0 || n < ops); n, _ = r.ctl.Obtained() {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	nfaults := <-faults
	r.ctl.Disarm("")
	if err := r.net.HealAll(); err != nil {
		t.Error(err)
	}
	r.heal()
	// The liveness of the last heal: a hold after it, within 30 s.
	for healed, end := Now(), time.Now().Add(30*time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, last := r.ctl.Obtained(); last > healed {
			break
		}
	}
	r.stopClients()
	if err := r.ctl.Close(5 * time.Second); err != nil {
		t.Error(err)
	}
	noTTL := <-leaks
	left, clean := r.left()
	if len(left) == 0 {
		r.log("the servers held no lock key %v after the clients ended", clean.Round(time.Millisecond))
	}
	r.report(nfaults, noTTL, left)
}

// left scans the servers, once the clients have ended, until they hold no
// key but those that may be kept, for 10 s at most; and returns the keys
// left then, and how long it took. A key can come after the clients have
// ended, with the TTL it was sent with: the kernel delivers what a closed
// socket had sent, and retransmits it after a partition.
func (r *trial) left() ([]string, time.Duration) {
	start := time.Now()
	for {
		var left []string
		for _, s := range r.servers {
			admin := s.Admin()
			_, l, err := Leaks(context.Background(), admin)
			admin.Close()
			if err != nil {
				r.t.Errorf("%s: %v", s.Node.Name, err)
			}
			for _, k := range l {
				left = append(left, s.Node.Name+" "+k)
			}
		}
		if len(left) == 0 || time.Since(start) > 10*time.Second {
			return left, time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startClient starts a client process in node.
func (r *trial) startClient(node *Node, cfg ClientConfig) {
	t := r.t
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(r.dir, node.Name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	cmd := node.Command(exe)
	cmd.Env = append(os.Environ(), envClient+"="+string(b))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &clientProc{cmd: cmd}
	t.Cleanup(func() {
		if !p.reaped {
			// A process that was reaped may have its number reused by
			// another process's group (a test's redis-server): kill only
			// one that was not.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	r.ctl.Client(cfg.Name, cmd.Process.Pid)
	r.procs = append(r.procs, p)
}

// clientProc is a client process of a trial, and whether stopClients
// reaped it.
type clientProc struct {
	cmd    *exec.Cmd
	reaped bool
}

// stopClients ends the client processes (SIGTERM), within 5 s each, and
// fails t for those that failed.
func (r *trial) stopClients() {
	for _, p := range r.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, p := range r.procs {
		cmd := p.cmd
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			p.reaped = true
			if err != nil {
				out, _ := os.ReadFile(filepath.Join(r.dir, r.clients[i].Name+".log"))
				r.t.Errorf("client %s: %v: %s", r.clients[i].Name, err, out)
			}
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			r.t.Errorf("client %s: no exit 5 s after SIGTERM", r.clients[i].Name)
		}
	}
	r.procs = nil
}

// heal records a heal, for the liveness check.
func (r *trial) heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heals = append(r.heals, Now())
}

// faults injects faults, drawn from the case's kinds, one at a time, each
// for 1 to 3 TTLs with a gap of 0.5 to 1.5 TTLs between them, until stop
// is closed; it heals each, and returns how many it injected.
func (r *trial) faults(stop chan struct{}) int {
	n := 0
	wait := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-stop:
			return false
		}
	}
	for wait(jepsenTTL/2 + time.Duration(r.rng.Int64N(int64(jepsenTTL)))) {
		kind := r.c.faults[r.rng.IntN(len(r.c.faults))]
		d := jepsenTTL + time.Duration(r.rng.Int64N(int64(2*jepsenTTL)))
		r.mu.Lock()
		r.began = append(r.began, Now())
		r.mu.Unlock()
		heal, err := r.inject(kind, d)
		if err != nil {
			r.t.Errorf("fault %s: %v", kind, err)
			return n
		}
		n++
		wait(d)
		if err := errors.Join(heal(), r.net.HealAll()); err != nil {
			r.t.Errorf("healing %s: %v", kind, err)
			return n
		}
		r.log("healed")
		if !strings.HasPrefix(kind, "pause-client") { // a paused client goes on when its pause ends
			r.heal()
		}
	}
	return n
}

// inject starts a fault of kind, for d, and returns what heals it.
func (r *trial) inject(kind string, d time.Duration) (heal func() error, err error) {
	none := func() error { return nil }
	server := r.rng.IntN(len(r.servers))
	s, client := r.servers[server], r.clients[r.rng.IntN(len(r.clients))]
	switch kind {
	case "cut-server":
		r.log("%s %s", kind, s.Node.Name)
		return none, s.Node.Cut()
	case "cut-client":
		r.log("%s %s", kind, client.Name)
		return none, client.Cut()
	case "cut-minority": // Redlock: one or two of the nodes
		cut := r.rng.Perm(len(r.servers))[:1+r.rng.IntN(2)]
		var names []string
		for _, i := range cut {
			if err := r.servers[i].Node.Cut(); err != nil {
				return none, err
			}
			names = append(names, r.servers[i].Node.Name)
		}
		r.log("%s %v", kind, names)
		return none, nil
	case "halves": // a partition of the servers and clients into two halves
		var a, b []*Node
		for i, node := range r.nodes() {
			if (i+server)%2 == 0 {
				a = append(a, node)
			} else {
				b = append(b, node)
			}
		}
		r.log("%s %v | %v", kind, names(a), names(b))
		return none, r.net.Partition(a, b)
	case "ring": // Redlock: each server sees its two neighbours, a majority; each client a server and its neighbours
		n := len(r.servers)
		far := func(i, j int) bool { d := (i - j + n) % n; return d > 1 && d < n-1 }
		for i := range n {
			for j := range n {
				if far(i, j) {
					if err := r.net.Block(r.servers[i].Node, r.servers[j].Node); err != nil {
						return none, err
					}
				}
			}
		}
		for c, node := range r.clients {
			for j := range n {
				if far(c%n, j) {
					if err := r.net.Partition([]*Node{node}, []*Node{r.servers[j].Node}); err != nil {
						return none, err
					}
				}
			}
		}
		r.log("%s of %d servers", kind, n)
		return none, nil
	case "drop-replies", "drop-requests": // one way: a client's requests arrive and the replies do not, or the reverse
		from, to := s.Node, client
		if kind == "drop-requests" {
			from, to = to, from
		}
		r.log("%s %s → %s", kind, from.Name, to.Name)
		return none, r.net.Block(from, to)
	case "loss":
		r.log("%s 20%% at %s", kind, s.Node.Name)
		return none, s.Node.Loss(0.2)
	case "delay", "delay-below-timeout", "delay-over-timeout":
		mean, jitter, on := 50*time.Millisecond, 10*time.Millisecond, r.delays
		switch kind {
		case "delay-below-timeout": // Redlock's node timeout is 100 ms
			mean, jitter = 20*time.Millisecond, 5*time.Millisecond
		case "delay-over-timeout": // two of Redlock's nodes
			mean = 80 * time.Millisecond
			on = []*Delayer{r.delays[server], r.delays[(server+1)%len(r.delays)]}
		}
		for _, dl := range on {
			dl.Set(mean, jitter)
		}
		r.log("%s %v ± %v each way at %d servers", kind, mean, jitter, len(on))
		return func() error {
			for _, dl := range on {
				dl.Set(0, 0)
			}
			return nil
		}, nil
	case "pause-server":
		r.log("%s %s", kind, s.Node.Name)
		return s.Resume, s.Pause()
	case "kill-restart-now", "kill-restart-after-ttl":
		r.log("%s %s", kind, s.Node.Name)
		if err := s.Kill(); err != nil {
			return none, err
		}
		if kind == "kill-restart-now" {
			return none, s.Start()
		}
		return s.Start, nil
	case "clock-jump":
		off := time.Duration(r.rng.Int64N(int64(4*jepsenTTL))) - 2*jepsenTTL
		r.log("%s %s by %v", kind, s.Node.Name, off.Round(time.Millisecond))
		return func() error { return r.clocks[server].Set(0) }, r.clocks[server].Set(off)
	case "clock-strobe":
		delta := time.Duration(r.rng.Int64N(int64(jepsenTTL)))
		period := time.Duration(1+r.rng.IntN(100)) * time.Millisecond
		r.log("%s %s by %v every %v", kind, s.Node.Name, delta.Round(time.Millisecond), period)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.clocks[server].Strobe(ctx, delta, period) }()
		return func() error { cancel(); return <-done }, nil
	case "failover": // the master cut off with a client until the Sentinels promote a replica
		return none, r.failover(client)
	case "pause-client-hold", "pause-client-invoke":
		on := map[string]string{"pause-client-hold": "commit", "pause-client-invoke": "invoke"}[kind]
		p := time.Duration(float64(jepsenTTL) * (1.1 + 1.9*r.rng.Float64()))
		r.log("%s %s for %v", kind, client.Name, p.Round(time.Millisecond))
		r.ctl.ArmPause(client.Name, on, p)
		return func() error { r.ctl.Disarm(client.Name); return nil }, nil
	}
	return none, fmt.Errorf("no fault %q", kind)
}

// failover cuts off the master, with client, from the other nodes, and
// returns once the Sentinels name another master, within 30 s. It first
// waits, as long, for the master to have its replicas online: the
// Sentinels promote none that is not.
func (r *trial) failover(client *Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old, err := r.sent.Master(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(r.servers, func(s *Server) bool { return s.Addr == old })
	if i < 0 {
		return fmt.Errorf("the Sentinels name %s, none of the servers", old)
	}
	master := r.servers[i]
	if err := waitReplicas(ctx, master, len(r.servers)-1); err != nil {
		return err
	}
	cut := []*Node{master.Node, client}
	var rest []*Node
	for _, node := range r.net.nodes[1:] {
		if !slices.Contains(cut, node) {
			rest = append(rest, node)
		}
	}
	r.log("failover: %v cut off from %v", names(cut), names(rest))
	r.mu.Lock()
	r.began[len(r.began)-1] = Now() // the fault begins now, not when the wait for the replicas did
	r.mu.Unlock()
	if err := r.net.Partition(cut, rest); err != nil {
		return err
	}
	start := time.Now()
	now, err := r.sent.WaitMaster(ctx, old)
	if err != nil {
		return err
	}
	r.log("failover: %s promoted after %v", now, time.Since(start).Round(time.Millisecond))
	return nil
}

// waitReplicas waits within ctx until master counts n replicas online.
func waitReplicas(ctx context.Context, master *Server, n int) error {
	admin := master.Admin()
	defer admin.Close()
	for {
		info, err := admin.Info(ctx, "replication").Result()
		if err == nil && strings.Count(info, "state=online") >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %d replicas online: %w (%v)", master.Node.Name, n, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// nodes returns the run's servers' nodes and clients.
func (r *trial) nodes() []*Node {
	var nodes []*Node
	for _, s := range r.servers {
		nodes = append(nodes, s.Node)
	}
	return append(nodes, r.clients...)
}

// names returns the names of nodes.
func names(nodes []*Node) []string {
	var ns []string
	for _, n := range nodes {
		ns = append(ns, n.Name)
	}
	return ns
}

// scan looks for keys without an expiry on every server, every half TTL,
// until stop is closed, and returns those it found. A server that does
// not answer, paused or cut off, is skipped.
func (r *trial) scan(stop chan struct{}) []string {
	found := map[string]bool{}
	for {
		select {
		case <-stop:
			var keys []string
			for k := range found {
				keys = append(keys, k)
			}
			return keys
		case <-time.After(jepsenTTL / 2):
		}
		for _, s := range r.servers {
			admin := s.Admin()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			noTTL, _, err := Leaks(ctx, admin)
			cancel()
			admin.Close()
			if err == nil {
				for _, k := range noTTL {
					found[s.Node.Name+" "+k] = true
				}
			}
		}
	}
}

// report checks the run's history and writes it, with the schedule and the
// report, to the run's directory.
func (r *trial) report(nfaults int, noTTL, left []string) {
	t := r.t
	holds := r.ctl.Holds()
	rep := Check(holds)
	fenced, lost, overwrites := r.ctl.Resources()
	live := Live(holds, r.heals, r.began)
	pauses := r.ctl.Pauses()
	lines := []string{
		fmt.Sprintf("%s over %s: %d faults, %d client pauses, %d events", r.c.name, r.drv, nfaults, len(pauses), r.ctl.Events()),
		rep.String(),
		fmt.Sprintf("fenced register: %d accepted, %d stale refused, %d collisions; counter: %d updates lost; value register: %d stale overwrites",
			fenced.Accepted, fenced.Stale, fenced.Collisions, lost, overwrites),
		fmt.Sprintf("Obtains and Releases failed: %v", r.ctl.Fails()),
		fmt.Sprintf("liveness: %v; %d over %v", live, live.Over(liveBound), liveBound),
		fmt.Sprintf("keys without an expiry: %d %q; left after the run: %d %q", len(noTTL), noTTL, len(left), left),
	}
	for _, ex := range rep.Examples {
		lines = append(lines, fmt.Sprintf("example: %+v then %+v", ex.First, ex.Second))
	}
	t.Logf("schedule:\n%s", strings.Join(r.schedule, "\n"))
	for _, l := range lines {
		t.Log(l)
	}
	r.write("schedule.txt", strings.Join(r.schedule, "\n")+"\n")
	r.write("report.txt", strings.Join(lines, "\n")+"\n")
	r.history(holds)
	t.Logf("schedule, report and history (holds.jsonl.gz) in %s", r.dir)

	if len(holds) == 0 {
		t.Fatalf("holds: got 0, want some")
	}
	if len(noTTL) != 0 || len(left) != 0 {
		t.Errorf("leaks: got %d keys without an expiry and %d left after the run, want none", len(noTTL), len(left))
	}
	switch r.c.expect {
	case isMeasured:
		return
	case isUnsafe:
		if rep.ValidityOverlaps == 0 && rep.FencesIssuedTwice == 0 && fenced.Collisions == 0 && (r.c.fencing || lost == 0) {
			t.Errorf("got %v, %d collisions, %d updates lost; want a violation: the configuration is known to be unsafe under these faults, and a checker that finds none is broken",
				rep, fenced.Collisions, lost)
		}
		return
	}
	if rep.ValidityOverlaps != 0 || rep.FencesIssuedTwice != 0 || rep.FencesOutOfOrder != 0 || fenced.Collisions != 0 {
		t.Errorf("got %v and %d collisions, want no validity overlap, every fence once and in order, no collision", rep, fenced.Collisions)
	}
	if live.Never != 0 {
		t.Errorf("liveness: %d heals with no hold after them, want none", live.Never)
	}
}

func (r *trial) write(name, s string) {
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(s), 0o644); err != nil {
		r.t.Error(err)
	}
}

// history writes holds to holds.jsonl.gz in the run's directory, one JSON
// object a line.
func (r *trial) history(holds []Hold) {
	f, err := os.Create(filepath.Join(r.dir, "holds.jsonl.gz"))
	if err != nil {
		r.t.Error(err)
		return
	}
	defer f.Close()
	z := gzip.NewWriter(f)
	enc := json.NewEncoder(z)
	for _, h := range holds {
		if err := enc.Encode(h); err != nil {
			r.t.Error(err)
			return
		}
	}
	if err := z.Close(); err != nil {
		r.t.Error(err)
	}
}
