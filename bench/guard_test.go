package bench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// BenchmarkGuard's keys: the lock's, and the one its cases write, which
// shares the lock key's hash tag.
const (
	guardKey  = "{bench:guard}"
	guardData = "{bench:guard}:data"
)

// guardScript is the Lua body of BenchmarkGuard's guard case.
const guardScript = `return redis.call('SET', KEYS[1], ARGV[1])`

// A guardCase is one of BenchmarkGuard's ways of writing guardData.
type guardCase struct {
	name  string
	write func(ctx context.Context) error
}

// guardCases returns BenchmarkGuard's cases, which write guardData while
// lk is held, through client, lk's Locker's client.
func guardCases(lk *lock.Lock, client *redis.Client) []guardCase {
	set := func(ctx context.Context) error { return client.Set(ctx, guardData, "v", 0).Err() }
	return []guardCase{
		{"guard", func(ctx context.Context) error {
			_, err := lk.Guard(ctx, guardScript, []string{guardData}, "v")
			return err
		}},
		{"guard-commands", func(ctx context.Context) error {
			_, err := lk.GuardCommands(ctx, []string{guardData}, []any{"SET", guardData, "v"})
			return err
		}},
		// The unguarded pattern: the lock may be lost between the check and
		// the write, which then lands anyway.
		{"check-then-write", func(ctx context.Context) error {
			if _, err := lk.TTL(ctx); err != nil {
				return err
			}
			return set(ctx)
		}},
		{"write", set},
	}
}

// BenchmarkGuard measures a write made while a lock is held, over go-redis
// (RESP3) on a server of its own, by one Locker of `single` holding one
// lock, obtained for a minute (a -benchtime past some 50 s fails, the lock
// lapsed). Each iteration runs every case once, in a random order, as
// BenchmarkInterleaved does, each case a `SET {bench:guard}:data v`:
//
//   - guard: lk.Guard with a script of the SET, which the server runs in
//     one script with the check that the lock's key holds the lock's value.
//   - guard-commands: lk.GuardCommands with the SET, without Lua: WATCH of
//     the keys and GET of the lock's key, then MULTI, SET, EXEC.
//   - check-then-write: lk.TTL (a script that checks the lock), then the
//     SET: what a user writes without Guard. It is not safe: the lock can
//     be lost between the check and the write, and the write lands anyway.
//   - write: the SET alone, the floor, with no check.
//
// It reports, per case, <case>-ns/op; <case>-cmds/op and <case>-trips/op,
// the commands the client sent and its round trips (a command, or a
// pipeline of several), counted by the client's hooks; and
// <case>-server-cmds/op, the commands the server ran (INFO commandstats,
// the scripts' own included, INFO's and handshakes left out) for one
// operation of the case before the timing, which it also logs command by
// command. ns/op is 0: an iteration runs every case.
//
//	go test -run '^$' -bench '^BenchmarkGuard$' -benchtime 300ms -v
func BenchmarkGuard(b *testing.B) {
	addr := redistest.Start(b, 1)[0].Addr
	var sent, trips atomic.Int64
	client := goRedis(b, addr, nil)
	client.AddHook(hook{&sent})
	client.AddHook(tripHook{&trips})
	probe := goRedis(b, addr, nil) // for INFO commandstats
	l, err := single.New(goredis.New(client))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	lk, err := l.Obtain(ctx, guardKey, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lk.Release(context.Background()) })
	cases := guardCases(lk, client)

	// Once before the timing, so that what the first one sets up (the
	// script's loading, the pinned connection) is not counted; then once
	// more between two INFOs, to show what the server runs.
	server := make([]int64, len(cases))
	for k, c := range cases {
		if err := c.write(ctx); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		before := commandStats(b, probe)
		if err := c.write(ctx); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		ran := delta(before, commandStats(b, probe))
		for _, n := range ran {
			server[k] += n
		}
		b.Logf("%s: the server ran %s", c.name, describeCalls(ran))
	}

	spent := make([]time.Duration, len(cases))
	cmds := make([]int64, len(cases))
	rts := make([]int64, len(cases))
	ops := 0
	for b.Loop() {
		for _, k := range rand.Perm(len(cases)) {
			s, t := sent.Load(), trips.Load()
			start := time.Now()
			if err := cases[k].write(ctx); err != nil {
				b.Fatalf("%s: %v", cases[k].name, err)
			}
			spent[k] += time.Since(start)
			cmds[k] += sent.Load() - s
			rts[k] += trips.Load() - t
		}
		ops++
	}
	b.ReportMetric(0, "ns/op") // an iteration runs every case
	for k, c := range cases {
		b.ReportMetric(float64(spent[k].Nanoseconds())/float64(ops), c.name+"-ns/op")
		b.ReportMetric(float64(cmds[k])/float64(ops), c.name+"-cmds/op")
		b.ReportMetric(float64(rts[k])/float64(ops), c.name+"-trips/op")
		b.ReportMetric(float64(server[k]), c.name+"-server-cmds/op")
	}
}

// delta returns the calls of each command in after less those in before,
// leaving out the commands that did not run between.
func delta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for cmd, n := range after {
		if n > before[cmd] {
			d[cmd] = n - before[cmd]
		}
	}
	return d
}

// describeCalls writes calls, by command, as "evalsha 1, get 1, set 1".
func describeCalls(calls map[string]int64) string {
	var parts []string
	for _, cmd := range slices.Sorted(maps.Keys(calls)) {
		parts = append(parts, fmt.Sprintf("%s %d", cmd, calls[cmd]))
	}
	return strings.Join(parts, ", ")
}
