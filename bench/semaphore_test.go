package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/strategy/single"
)

// The semaphore that BenchmarkSemaphore and BenchmarkSemaphoreContention
// measure (lock.WithPermits), and how many contenders the latter runs.
const (
	permits             = 3
	semaphoreContenders = 16
)

// The names of the semaphore's cases, which say its permits (and, for
// BenchmarkSemaphore's, how many others hold one). They end in a word, as
// "2-keys" do, so that cmd/report never takes their number for a
// GOMAXPROCS suffix.
const (
	semaphoreName        = "3-permits"
	semaphorePollingName = "3-permits-poll"
)

// BenchmarkSemaphore measures an uncontended acquire and release of one
// permit of a semaphore of permits (<driver>/3-permits), beside a plain
// lock's (<driver>/plain), both by single over each driver, from one
// goroutine; and the same while others hold every permit but one
// (<driver>/3-permits-2-held, <driver>/1000-permits-999-held), which
// another Locker obtained before the timed loop. Besides ns/op, B/op and
// allocs/op, it reports the CPU time per operation of this process and of
// the server (as BenchmarkLock does); cmds/op, the commands the client
// sent per acquire and release, counted as BenchmarkContention counts them
// (a script is one command; not on rueidis, which has no hooks);
// server-calls/op, the commands the server ran by its INFO commandstats,
// those that the scripts ran included; and script-us/op, the time the
// server spent running the scripts, by the same INFO: unlike the server's
// CPU time, it leaves out reading and answering the client, and so varies
// less with the machine's load.
//
//	go test -run '^$' -bench 'Semaphore$' -benchtime 300ms
func BenchmarkSemaphore(b *testing.B) {
	addrs := servers(b)
	probe := goRedis(b, addrs[0], nil) // for INFO CPU and INFO commandstats
	ctx := context.Background()
	ways := []struct {
		name string
		held int // permits that others hold
		opts []lock.Option
	}{
		{"plain", 0, nil},
		{semaphoreName, 0, []lock.Option{lock.WithPermits(permits)}},
		// The cost of a permit does not grow with the holders (it did while a
		// permit's search read every holder).
		{"3-permits-2-held", 2, []lock.Option{lock.WithPermits(3)}},
		{"1000-permits-999-held", 999, []lock.Option{lock.WithPermits(1000)}},
	}
	for _, d := range drivers {
		for _, w := range ways {
			b.Run(d+"/"+w.name, func(b *testing.B) {
				cs := &counters{}
				l, err := single.New(conn(b, d, addrs[0], cs))
				if err != nil {
					b.Fatal(err)
				}
				key := "semaphore:" + d + "/" + w.name
				holdPermits(b, addrs[0], key, w.held, w.opts...)
				cycle := func() {
					lk, err := l.Obtain(ctx, key, ttl, w.opts...)
					if err != nil {
						b.Fatal(err)
					}
					if err := lk.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
				cycle() // loads the scripts, which the counts leave out
				cs.sent.Store(0)
				b.ReportAllocs()
				cpu := meterCPU([]*redis.Client{probe})
				calls, scripts := serverCalls(b, probe), scriptTime(b, probe)
				for b.Loop() {
					cycle()
				}
				calls, scripts = serverCalls(b, probe)-calls, scriptTime(b, probe)-scripts
				cpu.report(b)
				b.ReportMetric(float64(calls)/float64(b.N), "server-calls/op")
				b.ReportMetric(micros(scripts)/float64(b.N), "script-us/op")
				if d != rueidisDriver {
					b.ReportMetric(float64(cs.sent.Load())/float64(b.N), "cmds/op")
				}
			})
		}
	}
}

// holdPermits has a Locker of its own obtain n permits of key with opts,
// for ttl, as the timed loop obtains its own: each acquisition of the loop
// ends the last lease, and extends the keys' expiry. They are released when
// b ends; a case that ran past ttl fails, having measured a semaphore whose
// holders left.
func holdPermits(b *testing.B, addr, key string, n int, opts ...lock.Option) {
	if n == 0 {
		return
	}
	l, err := single.New(goredis.New(goRedis(b, addr, nil)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range n {
		lk, err := l.Obtain(ctx, key, ttl, opts...)
		if err != nil {
			b.Fatalf("Obtain of one of the %d permits held: %v", n, err)
		}
		b.Cleanup(func() {
			if err := lk.Release(ctx); err != nil {
				b.Errorf("Release of a permit held while the case ran = %v, want nil: run the case for less than %v", err, ttl)
			}
		})
	}
}

// BenchmarkSemaphoreContention has semaphoreContenders contenders take
// permits of a semaphore of permits on one key, each holding a permit for
// hold, until acquisitions permits were taken in all (shortAcquisitions
// with -short), as BenchmarkContention's 8-lockers shape does for a lock:
// each contender is a Locker of single over a client of its own, run by a
// goroutine. The locks (BenchmarkSemaphoreContention/<driver>/<lock>):
//
//   - 3-permits: the semaphore, waiting by notification with the retry
//     policy lock.Linear(notifyTimer), as BenchmarkContention's single;
//   - 3-permits-poll: the semaphore, polling every retryEvery, as its
//     single-poll;
//   - plain: a plain lock of single, waiting by notification, for
//     reference: the same contenders, one holder at a time.
//
// It reports BenchmarkContention's figures, a handoff being from the
// release of a permit to its next acquisition, the fair ideal
// (contenders ÷ permits − 1) × (hold + the median handoff) (see
// contention.report), and server-calls/acq: the commands the server ran
// per acquisition by its INFO commandstats, those that the scripts ran
// included. Over rueidis, whose commands are not counted, it does not run.
//
//	go test -run '^$' -bench SemaphoreContention -benchtime 1x
func BenchmarkSemaphoreContention(b *testing.B) {
	addrs := servers(b)
	probe := goRedis(b, addrs[0], nil) // for INFO commandstats
	n := acquisitions
	if testing.Short() {
		n = shortAcquisitions
	}
	notified := lock.WithRetry(lock.Linear(notifyTimer))
	polling := []lock.Option{lock.WithPolling(), lock.WithRetry(lock.Linear(retryEvery))}
	ways := []struct {
		name     string
		limit    int // holders at once
		notifies bool
		wait     []lock.Option
	}{
		{semaphoreName, permits, true, []lock.Option{lock.WithPermits(permits), notified}},
		{semaphorePollingName, permits, false, append([]lock.Option{lock.WithPermits(permits)}, polling...)},
		{"plain", 1, true, []lock.Option{notified}},
	}
	for _, d := range []string{goredisDriver, redigoDriver} {
		for _, w := range ways {
			b.Run(d+"/"+w.name, func(b *testing.B) {
				if w.notifies && !subscribes(b, d, addrs[0]) {
					b.Skipf("the %s driver cannot subscribe: its waiters would poll every %v", d, notifyTimer)
				}
				c := contender{driver: d, name: w.name, nodes: 1, new: func(tb testing.TB, addrs []string, cs *counters) mutex {
					l, err := single.New(conn(tb, d, addrs[0], cs))
					return locksmith(tb, l, err, cs, w.wait...)
				}}
				key := "semaphore-contend:" + d + "/" + w.name
				var r contention
				var calls int64
				for b.Loop() {
					before := serverCalls(b, probe)
					r = contend(b, c, addrs[:1], key, semaphoreContenders, n)
					calls = serverCalls(b, probe) - before
				}
				r.report(b, semaphoreContenders, w.limit)
				b.ReportMetric(float64(calls)/float64(len(r.turns)), "server-calls/acq")
			})
		}
	}
}

// serverCalls returns how many commands the server of probe has run, by its
// INFO commandstats: those of clients and those that scripts ran, but for
// INFO itself and connection handshakes.
func serverCalls(tb testing.TB, probe *redis.Client) int64 {
	var total int64
	for _, v := range commandStats(tb, probe) {
		total += v
	}
	return total
}

// commandStats returns how many times the server of probe has run each
// command, by its INFO commandstats (lower-case names; a subcommand counts
// for its command), those of clients and those that scripts ran, but for
// INFO itself and connection handshakes.
func commandStats(tb testing.TB, probe *redis.Client) map[string]int64 {
	return commandField(tb, probe, "calls")
}

// scriptTime returns how long the server of probe has spent running
// scripts, by the usec of EVALSHA and EVAL in its INFO commandstats: the
// time of the commands the scripts ran included, that of reading and
// answering the clients left out.
func scriptTime(tb testing.TB, probe *redis.Client) time.Duration {
	usec := commandField(tb, probe, "usec")
	return time.Duration(usec["evalsha"]+usec["eval"]) * time.Microsecond
}

// commandField returns field (calls, usec) of each command in the INFO
// commandstats of the server of probe, as commandStats does.
func commandField(tb testing.TB, probe *redis.Client, field string) map[string]int64 {
	info, err := probe.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	stats := map[string]int64{}
	for line := range strings.Lines(info) {
		// cmdstat_evalsha:calls=12,usec=345,...; a subcommand is
		// cmdstat_client|setname.
		name, values, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat {
			continue
		}
		cmd, _, _ := strings.Cut(name, "|")
		if cmd == "info" || handshake(cmd) {
			continue
		}
		for kv := range strings.SplitSeq(values, ",") {
			if k, n, _ := strings.Cut(kv, "="); k == field {
				v, err := strconv.ParseInt(n, 10, 64)
				if err != nil {
					tb.Fatalf("INFO commandstats: %q: %v", line, err)
				}
				stats[strings.ToLower(cmd)] += v
			}
		}
	}
	return stats
}
