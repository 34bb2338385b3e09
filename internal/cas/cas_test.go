package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver"
)

// replies is a driver.Conn whose scripts fail with its errors, one per
// call, and then reply 1.
type replies struct {
	driver.Conn // nil: only SetNX and the script methods are called
	errs        []error
	calls       int
}

func (r *replies) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	r.calls++
	if len(r.errs) == 0 {
		return int64(1), nil
	}
	err := r.errs[0]
	r.errs = r.errs[1:]
	return nil, err
}

// SetNX fails like the scripts, and then is refused, as on a key that
// exists, so that the acquire script runs.
func (r *replies) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	_, err := r.EvalSha(ctx, "", nil)
	return false, err
}

func (r *replies) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	return r.EvalSha(ctx, "", keys, args...)
}

// timeoutErr is what a driver returns when a read deadline passes.
type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func opErr(err error) error {
	return &net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: err}}
}

// TestDeadConnectionRetried: every compare-and-act call that fails because
// its connection was dead is sent once more; other failures are not.
func TestDeadConnectionRetried(t *testing.T) {
	calls := map[string]Call{
		"Acquire":            Acquire(Lock{Key: "k", Value: "v", TTL: time.Second, Start: ByScript}),
		"Acquire, SET first": Acquire(Lock{Key: "k", Value: "v", TTL: time.Second, Start: BySet}),
		"Acquire, SET alone": Acquire(Lock{Key: "k", Value: "v", TTL: time.Second, Start: BySetOnly}),
		"Acquire, fenced":    Acquire(Lock{Key: "k", Value: "v", TTL: time.Second, Fences: []string{"f"}}),
		"Acquire, guarded":   Acquire(Lock{Key: "k", Value: "v", TTL: time.Second, GuardKey: "g", Quarantine: time.Second}),
		"Delete":             Delete(Lock{Key: "k", Value: "v"}),
		"PExpire":            PExpire(Lock{Key: "k", Value: "v", TTL: time.Second}),
		"PTTL":               PTTL(Lock{Key: "k", Value: "v"}),
		"Set":                Set(Lock{Key: "k", Value: "v", TTL: time.Second}, "w"),
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			for _, dead := range []error{io.EOF, io.ErrUnexpectedEOF, opErr(syscall.ECONNRESET), opErr(syscall.EPIPE),
				fmt.Errorf("use of closed connection: %w", net.ErrClosed)} {
				c := &replies{errs: []error{dead}}
				if _, err := call.run(context.Background(), c); err != nil || c.calls != 2 {
					t.Errorf("after %v: %s = %v in %d calls, want nil in 2", dead, name, err, c.calls)
				}
			}
		})
	}
}

func TestRetriedOnlyOnce(t *testing.T) {
	c := &replies{errs: []error{io.EOF, io.EOF}}
	if err := del(context.Background(), c); !errors.Is(err, io.EOF) || c.calls != 2 {
		t.Errorf("Delete after two dead connections = %v in %d calls, want EOF in 2", err, c.calls)
	}
}

func TestNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"a timeout", timeoutErr{}},
		{"a timeout on a socket", opErr(timeoutErr{})},
		{"the context's deadline", context.DeadlineExceeded},
		{"a refused dial", opErr(syscall.ECONNREFUSED)},
		{"a server error", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &replies{errs: []error{tc.err}}
			if err := del(context.Background(), c); !errors.Is(err, tc.err) || c.calls != 1 {
				t.Errorf("Delete = %v in %d calls, want %v in 1", err, c.calls, tc.err)
			}
		})
	}
	t.Run("a dead connection once the context ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c := &replies{errs: []error{io.EOF}}
		if err := del(ctx, c); !errors.Is(err, io.EOF) || c.calls != 1 {
			t.Errorf("Delete = %v in %d calls, want EOF in 1", err, c.calls)
		}
	})
}

// del runs the Delete of "k" holding "v" over c.
func del(ctx context.Context, c driver.Conn) error {
	_, err := Delete(Lock{Key: "k", Value: "v"}).run(ctx, c)
	return err
}
