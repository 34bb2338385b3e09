package dashboards_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.yaml.in/yaml/v2"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy/single"
)

// svgPath is where TestDashboard draws the wait p99 by group over its run:
//
//	go test ./otel/dashboards -run TestDashboard -args -svg ../../docs/dashboard.svg
var svgPath = flag.String("svg", "", "draw the wait p99 by group over the run as an SVG image to this file")

// EnvRequire set to 1, as LOCKSMITH_FULL=1 does, makes a missing
// prometheus or promtool fail the test rather than skip it.
const EnvRequire = "LOCKSMITH_REQUIRE_PROMETHEUS"

// tool returns the path of the command name, or skips the test (fails it
// when Prometheus is required).
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv(EnvRequire) == "1" || redistest.Full() {
		t.Fatalf("%s is required (%s=1 or %s=1) but not found: %v", name, EnvRequire, redistest.EnvFull, err)
	}
	t.Skipf("%s not found (%v): install Debian's prometheus package; skipping", name, err)
	return ""
}

// TestRules: promtool accepts the alerting rules.
func TestRules(t *testing.T) {
	out, err := exec.Command(tool(t, "promtool"), "check", "rules", "alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules alerts.yml: %v\n%s", err, out)
	}
}

// TestDashboard runs a Prometheus server that scrapes this process while
// its workers contend for locks, lose one, and find a server that does not
// answer; then every query of the dashboard, and every rule's expression,
// returns data.
func TestDashboard(t *testing.T) {
	bin := tool(t, "prometheus")
	target, mp := serveMetrics(t)
	prom := startPrometheus(t, bin, target)
	start := time.Now()
	work(t, mp)

	queries := dashboardQueries(t)
	queries = append(queries, ruleExprs(t)...)
	deadline := time.Now().Add(20 * time.Second) // a few scrapes more, with the last samples of the work
	for _, q := range queries {
		t.Run(q.name, func(t *testing.T) {
			for {
				n, err := prom.count(q.expr)
				if err != nil {
					t.Fatalf("query %s: %v", q.expr, err)
				}
				if n > 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("query %s returned %d series, want some", q.expr, n)
				}
				time.Sleep(500 * time.Millisecond) // the next scrape
			}
		})
	}
	t.Run("no series carries a key", func(t *testing.T) {
		resp, err := http.Get("http://" + target)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range keys {
			if strings.Contains(string(body), key) {
				t.Errorf("the metrics served carry the key %q, want none", key)
			}
		}
	})
	if *svgPath != "" {
		drawWaitP99(t, prom, start, time.Now())
	}
}

// query is one PromQL expression to check, and where it comes from.
type query struct{ name, expr string }

// dashboardQueries returns the expressions of the dashboard's panels and
// of its job variable, with Grafana's variables replaced as Grafana would
// for every job.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	var d struct {
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	readJSON(t, "locksmith.json", &d)
	grafana := strings.NewReplacer(`$job`, `.*`, `$__rate_interval`, `1m`)
	var out []query
	labelValues := regexp.MustCompile(`^label_values\((\w+), *(\w+)\)$`)
	for _, v := range d.Templating.List {
		var q struct{ Query string }
		if json.Unmarshal(v.Query, &q) != nil || q.Query == "" {
			continue // the data source variable: no query
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: query %q, want label_values(metric, label)", v.Name, q.Query)
		}
		out = append(out, query{"variable " + v.Name, fmt.Sprintf("count by (%s) (%s)", m[2], m[1])})
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, query{"panel " + p.Title + " " + tg.RefID, grafana.Replace(tg.Expr)})
		}
	}
	if len(out) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return out
}

// ruleExprs returns the expressions of the alerting rules.
func ruleExprs(t *testing.T) []query {
	t.Helper()
	text, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(text, &file); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	var rules []query
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			rules = append(rules, query{"rule " + r.Alert, strings.TrimSpace(r.Expr)})
		}
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return rules
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// serveMetrics returns a MeterProvider whose metrics it serves, through
// the OpenTelemetry Prometheus exporter, on a loopback port, and the
// port's address.
func serveMetrics(t *testing.T) (string, *sdkmetric.MeterProvider) {
	t.Helper()
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), mp
}

// server is a Prometheus server of the test's.
type server struct{ url string }

// startPrometheus starts a Prometheus server, a child of the test on a
// free loopback port with its storage in a temporary directory, that
// scrapes target every second, and waits until it has scraped it once.
func startPrometheus(t *testing.T, bin, target string) *server {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: locksmith\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // Prometheus takes the port: a race with another process, which would fail the start below
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("prometheus's log:\n%s", logs.String())
		}
	})
	// Ready, it discovers its target within seconds, and scrapes it.
	s := &server{url: "http://" + addr}
	for deadline := time.Now().Add(30 * time.Second); ; {
		n, err := s.count(`up{job="locksmith"} == 1`)
		if n > 0 {
			return s
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited before it scraped:\n%s", logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus has not scraped the test after 30s: %v\n%s", err, logs.String())
		}
	}
}

// series is one series of a query's answer.
type series struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`  // an instant query's [time, "value"]
	Values [][]any           `json:"values"` // a range query's
}

// api calls one of Prometheus's query endpoints, and returns its series.
func (s *server) api(path string, params url.Values) ([]series, error) {
	resp, err := http.PostForm(s.url+path, params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []series `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", path, err, body)
	}
	if r.Status != "success" {
		return nil, errors.New(r.Error)
	}
	return r.Data.Result, nil
}

// count returns how many series the instant query expr returns now, those
// whose value is NaN (a quantile of no observations) left out.
func (s *server) count(expr string) (int, error) {
	res, err := s.api("/api/v1/query", url.Values{"query": {expr}})
	n := 0
	for _, r := range res {
		if len(r.Value) == 2 && r.Value[1] != "NaN" {
			n++
		}
	}
	return n, err
}

// keys are the locks of work, whose groups are report, invoice, export and
// ledger.
var keys = []string{"report:daily", "invoice:1", "invoice:2", "export{eu}", "export:late", "ledger:mute"}

// work has workers contend for the locks of three groups, a holder lose
// its lock, and callers find a server that does not answer: for twelve
// seconds, so that Prometheus scrapes each stage several times.
func work(t *testing.T, mp *sdkmetric.MeterProvider) {
	t.Helper()
	addr, _ := redistest.Addr(t)
	bare, err := single.New(goredis.New(redistest.GoRedis(t, addr, 3)))
	if err != nil {
		t.Fatal(err)
	}
	locker := lockotel.NewLocker(bare, lockotel.WithMeterProvider(mp))
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	// Twelve workers for one report, one more every 400ms, which queue up
	// to eleven deep and wait over a second; four for each of two
	// invoices; two exports.
	for _, g := range []struct {
		key     string
		workers int
		hold    time.Duration
		every   time.Duration // between the workers' starts
	}{
		{keys[0], 12, 100 * time.Millisecond, 400 * time.Millisecond},
		{keys[1], 4, 20 * time.Millisecond, 0}, {keys[2], 4, 20 * time.Millisecond, 0},
		{keys[3], 2, 50 * time.Millisecond, 0},
	} {
		for i := range g.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wait(ctx, time.Duration(i)*g.every)
				for ctx.Err() == nil {
					lk, err := locker.Obtain(ctx, g.key, time.Minute, lock.WithRetry(lock.Linear(200*time.Millisecond)))
					if err != nil {
						continue // the run's end
					}
					time.Sleep(g.hold) // the work
					_ = lk.Release(context.Background())
				}
			}()
		}
	}
	// A holder whose work outlasts its TTL, every second: Release finds
	// the lock gone.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			lk, err := locker.Obtain(ctx, keys[4], 100*time.Millisecond)
			if err == nil {
				time.Sleep(300 * time.Millisecond) // the work, longer than the TTL
				_ = lk.Release(context.Background())
			}
			wait(ctx, 700*time.Millisecond)
		}
	}()
	// Obtains from a server that hangs up without an answer, which end in
	// lock.ErrNoAnswer (after 5s here), from callers that start a second
	// apart, so that their counter grows from one scrape to the next.
	mute := hangUpServer(t)
	client := redis.NewClient(&redis.Options{Addr: mute, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	l, err := single.New(goredis.New(client))
	if err != nil {
		t.Fatal(err)
	}
	l = lockotel.NewLocker(l, lockotel.WithMeterProvider(mp))
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait(ctx, time.Duration(i)*time.Second)
			for ctx.Err() == nil {
				_, _ = l.Obtain(ctx, keys[5], time.Minute, lock.WithRetry(lock.NoRetry()))
				wait(ctx, 200*time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

// wait waits for d, or until ctx ends.
func wait(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// hangUpServer returns the address of a server that accepts connections,
// reads a command, and closes the connection without an answer.
func hangUpServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = c.Read(make([]byte, 512)); c.Close() }()
		}
	}()
	return ln.Addr().String()
}
