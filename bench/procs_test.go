package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The contention workload in OS processes: BenchmarkContention runs this
// test binary again, once per contender, with envChild set to the child's
// assignment; in the child, TestContentionChild takes its turns and writes
// them to its standard output as JSON lines, which the parent reads.

// envChild names the role of a test binary run again by
// BenchmarkContention: a contender process. Its value is the assignment,
// in JSON.
const envChild = "LOCKSMITH_BENCH_CONTENDER"

// assignment is what a contender process is asked to do.
type assignment struct {
	Driver, Name string   // the contender
	Addrs        []string // its servers
	Key          string   // the lock's key
	Counter      string   // the key that counts the turns taken, by INCR
	N            int      // how many turns to take, across the processes
}

// childLine is one line that a contender process writes: that it is ready
// (it waits for its standard input to close before it starts), a turn
// (wall-clock times in Unix nanoseconds), or, last, what its clients
// counted.
type childLine struct {
	Ready bool      `json:",omitempty"`
	Turn  *[3]int64 `json:",omitempty"` // asked, got, letGo
	Tally *tally    `json:",omitempty"`
}

// TestContentionChild is not a test: it is a contender process of the
// contention workload (BenchmarkContention's 8-procs shape), and skips
// unless envChild is set. It takes turns until a counter on a key of its
// own, incremented by a client that is not counted, says that the
// processes took N in all.
func TestContentionChild(t *testing.T) {
	spec := os.Getenv(envChild)
	if spec == "" {
		t.Skip("only a contender process of BenchmarkContention runs it")
	}
	var a assignment
	if err := json.Unmarshal([]byte(spec), &a); err != nil {
		t.Fatalf("%s: %v", envChild, err)
	}
	cs := contenders()
	i := slices.IndexFunc(cs, func(c contender) bool { return c.driver == a.Driver && c.name == a.Name })
	if i < 0 {
		t.Fatalf("no contender %s/%s", a.Driver, a.Name)
	}
	counts := &counters{}
	m := cs[i].new(t, a.Addrs, counts)
	counter := goRedis(t, a.Addrs[0], nil)
	out := json.NewEncoder(os.Stdout)
	emit := func(l childLine) {
		if err := out.Encode(l); err != nil {
			t.Fatal(err)
		}
	}
	emit(childLine{Ready: true})
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil { // the start signal: EOF
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := take(ctx, m, a.Key, func() bool {
		n, err := counter.Incr(ctx, a.Counter).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n <= int64(a.N)
	}, func(tn turn) {
		emit(childLine{Turn: &[3]int64{tn.asked.UnixNano(), tn.got.UnixNano(), tn.letGo.UnixNano()}})
	})
	if err != nil {
		t.Fatal(err)
	}
	tl := counts.tally()
	emit(childLine{Tally: &tl})
}

// contendProcs runs the workload with k contender processes of c, until
// they took key n times.
func contendProcs(b *testing.B, c contender, addrs []string, key string, k, n int) contention {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	counter := key + ":turns"
	if err := goRedis(b, addrs[0], nil).Del(context.Background(), counter).Err(); err != nil {
		b.Fatal(err)
	}
	spec, err := json.Marshal(assignment{Driver: c.driver, Name: c.name, Addrs: addrs, Key: key, Counter: counter, N: n})
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu    sync.Mutex
		r     contention
		end   time.Time // when the last child reported its tally
		ready = make(chan error, k)
		wg    sync.WaitGroup
		cmds  []*exec.Cmd
		gos   []io.Closer
	)
	for g := range k {
		cmd := exec.Command(exe, "-test.run=^TestContentionChild$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), envChild+"="+string(spec))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds, gos = append(cmds, cmd), append(gos, stdin)
		wg.Add(1)
		go func() {
			defer wg.Done()
			wasReady := false
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var l childLine
				if !strings.HasPrefix(sc.Text(), "{") || json.Unmarshal(sc.Bytes(), &l) != nil {
					if sc.Text() != "PASS" { // the test binary's own output: a failure, say
						fmt.Fprintf(os.Stderr, "contender process %d: %s\n", g, sc.Text())
					}
					continue
				}
				mu.Lock()
				switch {
				case l.Ready:
					wasReady = true
					ready <- nil
				case l.Turn != nil:
					r.turns = append(r.turns, turn{g: g, asked: time.Unix(0, l.Turn[0]), got: time.Unix(0, l.Turn[1]), letGo: time.Unix(0, l.Turn[2])})
				case l.Tally != nil:
					r.tally.add(*l.Tally)
					end = time.Now()
				}
				mu.Unlock()
			}
			_, _ = io.Copy(io.Discard, stdout)
			if !wasReady {
				ready <- fmt.Errorf("contender process %d ended before it was ready", g)
			}
		}()
	}
	for range k {
		if err := <-ready; err != nil {
			b.Error(err)
		}
	}
	start := time.Now()
	for _, stdin := range gos {
		_ = stdin.Close()
	}
	wg.Wait()
	for g, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			b.Errorf("contender process %d: %v", g, err)
		}
	}
	r.elapsed = end.Sub(start)
	return r
}
