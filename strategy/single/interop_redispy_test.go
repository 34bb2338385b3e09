package single_test

// Interoperability with redis-py's Lock (redis-py 3 and later), the lock of
// the Python services that share keys with Go ones: SET key token NX PX
// ttl, with a random token, and a compare-and-delete release. It runs the
// real library, from Debian's python3-redis or pip, through a small
// script that acquires and releases on the commands it reads. The tests of
// interoperability with bsm/redislock are in internal/bsminterop.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// redisPyScript holds one redis-py Lock of a key, and answers each command
// it reads (acquire, release) with True or False.
const redisPyScript = `
import sys, redis
host, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
l = redis.Redis(host=host, port=port).lock(key, timeout=30)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "acquire":
        ok = l.acquire(blocking=False)
    elif cmd == "release":
        try:
            l.release()
            ok = True
        except redis.exceptions.LockError:
            ok = False
    else:
        ok = None
    print(ok, flush=True)
`

// redisPy is a Python process that holds a redis-py Lock.
type redisPy struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

// pythonWithRedis returns a Python interpreter that can import redis, or
// "" if there is none. LOCKSMITH_REQUIRE_REDISPY=1 (set by .ci/run, which
// installs python3-redis) makes its absence a failure, not a skip.
func pythonWithRedis(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import redis").Run() == nil {
			return py
		}
	}
	if os.Getenv("LOCKSMITH_REQUIRE_REDISPY") == "1" {
		t.Fatal("no python3 with redis-py (Debian: apt-get install python3-redis), and LOCKSMITH_REQUIRE_REDISPY=1")
	}
	t.Skip("no python3 with redis-py: apt-get install python3-redis, or pip install redis")
	return ""
}

func startRedisPy(t *testing.T, py, addr, key string) *redisPy {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", redisPyScript, host, port, key)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	return &redisPy{in: in, out: bufio.NewScanner(out)}
}

// do sends cmd and returns the script's answer.
func (p *redisPy) do(t *testing.T, cmd string) bool {
	t.Helper()
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		t.Fatalf("redis-py %s: %v", cmd, err)
	}
	if !p.out.Scan() {
		t.Fatalf("redis-py %s: no answer (%v)", cmd, p.out.Err())
	}
	return strings.TrimSpace(p.out.Text()) == "True"
}

// TestInteropRedisPy: single and redis-py's Lock exclude each other, and
// neither releases the other's lock, over each driver, whether single's
// attempt starts with a bare SET (a first attempt) or runs its script (a
// retry).
func TestInteropRedisPy(t *testing.T) {
	py := pythonWithRedis(t)
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	for _, d := range redistest.InteropDrivers() {
		t.Run(d.Name, func(t *testing.T) {
			l, err := single.New(d.Conn(t, addr))
			if err != nil {
				t.Fatal(err)
			}
			obtains := map[string][]lock.Option{
				"one attempt": {lock.WithRetry(lock.NoRetry())},
				"retries":     {lock.WithRetry(lock.LimitAttempts(lock.Linear(time.Millisecond), 3)), lock.WithPolling()},
			}
			for name, opts := range obtains {
				t.Run("redis-py holds/"+name, func(t *testing.T) {
					key := conformance.Key(t)
					p := startRedisPy(t, py, addr, key)
					if !p.do(t, "acquire") {
						t.Fatal("redis-py acquire of a free key = False, want True")
					}
					if _, err := l.Obtain(ctx, key, time.Minute, opts...); !errors.Is(err, lock.ErrNotObtained) {
						t.Fatalf("Obtain of a key redis-py holds = %v, want ErrNotObtained", err)
					}
					if !p.do(t, "release") {
						t.Fatal("redis-py release of its lock = False, want True")
					}
					lk, err := l.Obtain(ctx, key, time.Minute, opts...)
					if err != nil {
						t.Fatalf("Obtain after redis-py released = %v, want a lock", err)
					}
					if err := lk.Release(ctx); err != nil {
						t.Errorf("Release = %v, want nil", err)
					}
				})
				t.Run("single holds/"+name, func(t *testing.T) {
					key := conformance.Key(t)
					p := startRedisPy(t, py, addr, key)
					lk, err := l.Obtain(ctx, key, time.Minute, opts...)
					if err != nil {
						t.Fatalf("Obtain of a free key = %v, want a lock", err)
					}
					if p.do(t, "acquire") {
						t.Fatal("redis-py acquire of a key single holds = True, want False")
					}
					if p.do(t, "release") {
						t.Fatal("redis-py release of single's lock = True, want False")
					}
					if err := lk.Release(ctx); err != nil {
						t.Fatalf("Release = %v, want nil (redis-py must not have released it)", err)
					}
					if !p.do(t, "acquire") {
						t.Error("redis-py acquire after single released = False, want True")
					}
					_ = p.do(t, "release")
				})
			}
		})
	}
}
