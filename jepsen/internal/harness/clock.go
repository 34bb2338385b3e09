package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// clockShim is the source of the LD_PRELOAD library that moves a process's
// wall clock; NewClock builds it with gcc.
//
//go:embed clockshim/clockshim.c
var clockShim []byte

// clockFileEnv names the offset file for the shim.
const clockFileEnv = "LOCKSMITH_CLOCK_FILE"

// A Clock shifts the wall clock of the processes started with its Env by
// an offset that it sets at any moment. Under it, gettimeofday, time and
// clock_gettime of CLOCK_REALTIME and CLOCK_REALTIME_COARSE return the real
// time plus the offset; CLOCK_MONOTONIC and the other clocks are the
// kernel's. It reaches the processes that call those functions through
// the C library, dynamically linked, as redis-server does; not Go
// programs, which read the clock without it. Its methods may be called
// from several goroutines.
type Clock struct {
	lib  string // the shim, built into the Clock's dir
	file string // the offset file: an int64 of nanoseconds

	mu     sync.Mutex
	mem    []byte // the offset file, mapped shared; nil once closed
	offset time.Duration
}

// NewClock builds the shim into dir, unless a build of the same source is
// there already, and makes an offset file of its own there, at 0. It needs
// gcc on PATH. Clocks may share a dir: each has its own offset file.
func NewClock(dir string) (*Clock, error) {
	lib, err := buildShim(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "clock-*.offset")
	if err != nil {
		return nil, fmt.Errorf("jepsen: clock offset file: %w", err)
	}
	defer f.Close()
	c := &Clock{lib: lib, file: f.Name()}
	if err := f.Truncate(8); err != nil {
		os.Remove(c.file)
		return nil, fmt.Errorf("jepsen: clock offset file: %w", err)
	}
	c.mem, err = unix.Mmap(int(f.Fd()), 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Remove(c.file)
		return nil, fmt.Errorf("jepsen: mapping the clock offset file %s: %w", c.file, err)
	}
	return c, nil
}

// buildShim compiles clockShim into dir, as clockshim-<hash of the
// source>.so, and returns its path; a build already there is taken as it
// is. The build goes to a temporary name first, so that a reader never
// finds half a library.
func buildShim(dir string) (string, error) {
	sum := sha256.Sum256(clockShim)
	lib, err := filepath.Abs(filepath.Join(dir, fmt.Sprintf("clockshim-%x.so", sum[:8])))
	if err != nil {
		return "", fmt.Errorf("jepsen: clock shim: %w", err)
	}
	if strings.ContainsAny(lib, " :") {
		return "", fmt.Errorf("jepsen: clock shim path %q: LD_PRELOAD takes no space or colon in a path", lib)
	}
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", fmt.Errorf("jepsen: building the clock shim needs gcc: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "clockshim-*.tmp")
	if err != nil {
		return "", fmt.Errorf("jepsen: clock shim: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	var out bytes.Buffer
	cmd := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", tmp.Name(), "-x", "c", "-")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(clockShim), &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("jepsen: building the clock shim: %s: %w: %s", gcc, err, strings.TrimSpace(out.String()))
	}
	if err := os.Rename(tmp.Name(), lib); err != nil {
		return "", fmt.Errorf("jepsen: clock shim: %w", err)
	}
	return lib, nil
}

// Env is the environment that puts a process under the clock: LD_PRELOAD,
// which it replaces, and the offset file's path. Append it to the
// process's environment, as a Server's Env.
func (c *Clock) Env() []string {
	return []string{"LD_PRELOAD=" + c.lib, clockFileEnv + "=" + c.file}
}

// Set moves the clock to real time + offset, for every process under it,
// at once: one atomic store of 64 bits in the mapping they share.
func (c *Clock) Set(offset time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem == nil {
		return errors.New("jepsen: Set on a closed Clock")
	}
	atomic.StoreInt64((*int64)(unsafe.Pointer(&c.mem[0])), int64(offset))
	c.offset = offset
	return nil
}

// Offset returns the offset that Set set last, 0 at first.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Strobe flips the clock between real time and real time + delta, each
// held for period, starting with delta, until ctx ends; then it sets the
// offset back to 0 and returns. Its error is Set's, on a closed Clock.
func (c *Clock) Strobe(ctx context.Context, delta, period time.Duration) error {
	t := time.NewTicker(period)
	defer t.Stop()
	for on := true; ; on = !on {
		offset := time.Duration(0)
		if on {
			offset = delta
		}
		if err := c.Set(offset); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return c.Set(0)
		case <-t.C:
		}
	}
}

// Check verifies that the clock moves the expiries of s, a server started
// under it (its Env holds the clock's): it sets a key for 60 s, moves the
// clock 30 s on, and wants the key's PTTL at 30 s or less, and above 0;
// then it sets the offset back and deletes the key. Its error names the
// server's binary, so that a run skips its clock faults by name. It moves
// the clock: call it before the run starts.
func (c *Clock) Check(s *Server) error {
	bin, err := redistest.Binary()
	if err != nil {
		return fmt.Errorf("jepsen: clock check: %w", err)
	}
	for _, kv := range c.Env() {
		if !slices.Contains(s.Env, kv) {
			return fmt.Errorf("jepsen: clock check of %s in %s: the server's Env lacks %s: it is not under this clock", bin, s.Node.Name, kv)
		}
	}
	const key = "locksmith-jepsen:clock-check"
	ctx := context.Background()
	admin := s.Admin()
	defer admin.Close()
	before := c.Offset()
	if err := admin.Set(ctx, key, "1", 60*time.Second).Err(); err != nil {
		return fmt.Errorf("jepsen: clock check of %s in %s: SET: %w", bin, s.Node.Name, err)
	}
	if err := c.Set(before + 30*time.Second); err != nil {
		return err
	}
	pttl, err := admin.PTTL(ctx, key).Result()
	err = errors.Join(err, c.Set(before), admin.Del(ctx, key).Err())
	switch {
	case err != nil:
		return fmt.Errorf("jepsen: clock check of %s in %s: %w", bin, s.Node.Name, err)
	case pttl > 30*time.Second:
		return fmt.Errorf("jepsen: clock check: %s does not follow the clock shim: a key set for 60 s has a PTTL of %v with the clock moved 30 s on, want 30 s or less (a static binary, or one that reads the time without the C library, is out of reach of LD_PRELOAD)", bin, pttl)
	case pttl <= 0:
		return fmt.Errorf("jepsen: clock check of %s in %s: a key set for 60 s has a PTTL of %v with the clock moved 30 s on, want above 0", bin, s.Node.Name, pttl)
	}
	return nil
}

// Close sets the offset back to 0, so that the processes still under the
// clock go back to real time, and removes the offset file: a process
// started with Env then runs at real time. The shim stays in its dir, for
// the other Clocks there.
func (c *Clock) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem == nil {
		return nil
	}
	atomic.StoreInt64((*int64)(unsafe.Pointer(&c.mem[0])), 0)
	c.offset = 0
	err := unix.Munmap(c.mem)
	c.mem = nil
	return errors.Join(err, os.Remove(c.file))
}
