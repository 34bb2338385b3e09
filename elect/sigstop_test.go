package elect_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/elect"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// envChild tells TestStoppedLeaderChild what to campaign on.
const envChild = "LOCKSMITH_ELECT_CHILD"

// childLease is the child's lease, and its stop grace a quarter of it.
const childLease = time.Second

// TestStoppedLeaderChild is the child of TestStoppedLeader, which runs
// this test binary with envChild set to "addr driver key": it campaigns
// on that server and key, over that driver, and while it leads, writes
// "work TERM NANOS" every 2ms, after IsLeader said it leads, then
// "stopped TERM CAUSE" when IsLeader says it no longer does. It campaigns
// again until its stdin closes.
func TestStoppedLeaderChild(t *testing.T) {
	f := strings.Fields(os.Getenv(envChild))
	if len(f) != 3 {
		t.Skip("runs only as the child of TestStoppedLeader")
	}
	var d redistest.Driver
	for _, dd := range redistest.Drivers() {
		if dd.Name == f[1] {
			d = dd
		}
	}
	l, err := single.New(d.Conn(t, f[0]))
	if err != nil {
		fmt.Println("error", err)
		t.Fatal(err)
	}
	e, err := elect.New(l, f[2], elect.WithLease(childLease), elect.WithStopGrace(childLease/4), elect.WithInterval(10*time.Millisecond))
	if err != nil {
		fmt.Println("error", err)
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = os.Stdin.Read(make([]byte, 1))
		cancel()
	}()
	err = e.Run(ctx, func(ctx context.Context, term *elect.Term) error {
		fmt.Println("elected", term.Number())
		for {
			if err := e.IsLeader(ctx); err != nil {
				fmt.Println("stopped", term.Number(), strings.ReplaceAll(term.Err().Error(), " ", "_"))
				return nil
			}
			fmt.Println("work", term.Number(), time.Now().UnixNano())
			time.Sleep(2 * time.Millisecond)
		}
	})
	if !errors.Is(err, context.Canceled) {
		fmt.Println("error", err)
	}
}

// TestStoppedLeader: a leader stopped with SIGSTOP past its lease does no
// work once resumed, after the next leader was elected: its IsLeader,
// which reads its monotonic clock, says at once that it stepped down.
func TestStoppedLeader(t *testing.T) {
	redistest.RequireBinary(t)
	srv := redistest.Start(t, 1)[0]
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			key := conformance.Key(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestStoppedLeaderChild$")
			cmd.Env = append(os.Environ(), envChild+"="+srv.Addr+" "+d.Name+" "+key)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGCONT)
				_ = stdin.Close()
				_ = cmd.Wait()
			}()
			lines := make(chan string, 1024)
			go func() {
				defer close(lines)
				s := bufio.NewScanner(out)
				for s.Scan() {
					lines <- s.Text()
				}
			}()
			next := func(prefix string) []string {
				for {
					select {
					case line, ok := <-lines:
						if !ok {
							t.Fatalf("the child exited before %q", prefix)
						}
						if f := strings.Fields(line); f[0] == prefix {
							return f
						} else if f[0] == "error" {
							t.Fatalf("the child: %s", line)
						}
					case <-ctx.Done():
						t.Fatalf("no %q from the child", prefix)
					}
				}
			}
			first := next("elected")
			next("work")
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			l, err := single.New(d.Conn(t, srv.Addr))
			if err != nil {
				t.Fatal(err)
			}
			e, err := elect.New(l, key, elect.WithLease(time.Minute), elect.WithInterval(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			term, err := e.Campaign(ctx)
			if err != nil {
				t.Fatalf("Campaign while the leader is stopped = %v, want a term", err)
			}
			elected := time.Now().UnixNano()
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			var works int
			for {
				line := <-lines
				f := strings.Fields(line)
				if f[0] == "stopped" {
					if f[1] != first[1] || !strings.Contains(f[2], "stepped_down") {
						t.Errorf("the child: %q, want term %s stepped down", line, first[1])
					}
					break
				}
				if f[0] == "work" {
					works++
					if at, _ := strconv.ParseInt(f[2], 10, 64); at > elected {
						t.Errorf("the stopped leader worked %v after the next leader was elected, want no work once resumed",
							time.Duration(at-elected))
					}
				}
			}
			if n, _ := strconv.ParseInt(first[1], 10, 64); term.Number() <= n {
				t.Errorf("the next term = %d, want more than the stopped leader's %d", term.Number(), n)
			}
			t.Logf("work lines read after SIGSTOP: %d, all written before the next election", works)
			if err := term.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
