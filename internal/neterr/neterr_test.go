package neterr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name             string
		err              error
		dead, unanswered bool
	}{
		{"EOF", io.EOF, true, true},
		{"wrapped reset", fmt.Errorf("read: %w", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true, true},
		{"broken pipe", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, true, true},
		{"closed connection", net.ErrClosed, true, true},
		{"network timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, false, true},
		{"context deadline", fmt.Errorf("redis: %w", context.DeadlineExceeded), false, true},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, false, false},
		{"error reply", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), false, false},
		{"cancelled", context.Canceled, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Dead(c.err); got != c.dead {
				t.Errorf("Dead(%v) = %v, want %v", c.err, got, c.dead)
			}
			if got := Unanswered(c.err); got != c.unanswered {
				t.Errorf("Unanswered(%v) = %v, want %v", c.err, got, c.unanswered)
			}
		})
	}
}

// reply is an error reply as a client returns it: its text is the reply's.
type reply string

func (r reply) Error() string { return string(r) }

func TestFinal(t *testing.T) {
	noPerm := reply("NOPERM this user has no permissions to run the 'evalsha' command")
	timeout := &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name  string
		err   error
		final bool
	}{
		{"NOPERM", noPerm, true},
		{"WRONGTYPE", reply("WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{"a script's error", reply("ERR user_script:1: Script attempted to access nonexistent global variable 'x'"), true},
		{"OOM", reply("OOM command not allowed when used memory > 'maxmemory'."), true},
		{"wrapped", fmt.Errorf("lock: refresh %q: %w", "k", noPerm), true},
		{"joined, every node refused", errors.Join(noPerm, noPerm), true},
		{"joined with a timeout", errors.Join(noPerm, timeout), false},
		{"joined with a refused connection", errors.Join(noPerm, refused), false},
		{"joined with LOADING", errors.Join(noPerm, reply("LOADING Redis is loading the dataset in memory")), false},
		{"LOADING", reply("LOADING Redis is loading the dataset in memory"), false},
		{"BUSY", reply("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), false},
		{"READONLY", reply("READONLY You can't write against a read only replica."), false},
		{"TRYAGAIN", reply("TRYAGAIN Multiple keys request during rehashing of slot"), false},
		{"MASTERDOWN", reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), false},
		{"CLUSTERDOWN", reply("CLUSTERDOWN The cluster is down"), false},
		{"MOVED", reply("MOVED 3999 127.0.0.1:6381"), false},
		{"max clients", reply("ERR max number of clients reached"), false},
		{"EOF", io.EOF, false},
		{"a timeout", timeout, false},
		{"a closed client", errors.New("redis: client is closed"), false},
		{"nil", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Final(c.err); got != c.final {
				t.Errorf("Final(%v) = %v, want %v", c.err, got, c.final)
			}
		})
	}
}

// rueidisError has the methods of rueidis's RedisError, whose text leaves
// out the generic code ERR.
type rueidisError struct {
	msg string
	nil bool
}

func (e *rueidisError) Error() string    { return e.msg }
func (e *rueidisError) IsNil() bool      { return e.nil }
func (e *rueidisError) IsNoScript() bool { return false }

func TestFinalRueidis(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   error
		final bool
	}{
		{"an ERR reply, without its code", &rueidisError{msg: "The user executing the script can't run this command or subcommand"}, true},
		{"a reply with its code", &rueidisError{msg: "NOPERM this user has no permissions to run the 'evalsha' command"}, true},
		{"max clients, without ERR", &rueidisError{msg: "max number of clients reached"}, false},
		{"LOADING", &rueidisError{msg: "LOADING Redis is loading the dataset in memory"}, false},
		{"the nil reply", &rueidisError{msg: "redis nil message", nil: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Final(c.err); got != c.final {
				t.Errorf("Final(%v) = %v, want %v", c.err, got, c.final)
			}
		})
	}
}
