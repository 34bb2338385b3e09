package cas

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestDenied: denied recognises the refusals by ACL that reach it (a
// declared key's NOPERM, the NOPERM that aclLib's call raises, and the
// wording of a server without redis.acl_check_cmd), and nothing else.
func TestDenied(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"a declared key, on every server", errors.New("NOPERM this user has no permissions to access one of the keys used as arguments"), true},
		{"a command, raised by call", errors.New("NOPERM this user has no permissions to run the time command in a script script: 3f2a, on @user_script:5."), true},
		{"a command, before Redis 7.0", errors.New("ERR Error running script (call to f_3f2a): @user_script:5: @user_script: 5: The user executing the script can't run this command or subcommand"), true},
		{"a key, before Redis 7.0", errors.New("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: 3f2a, on @user_script:5."), true},
		{"a key of another type", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"a missed deadline", context.DeadlineExceeded, false},
		{"no error", nil, false},
		{"the script itself: the caller's (see refusal)", errors.New("NOPERM this user has no permissions to run the 'evalsha' command"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := denied(c.err); got != c.want {
				t.Errorf("denied(%v): got %v, want %v", c.err, got, c.want)
			}
		})
	}
}

// TestRefusal: refusal recognises a server's refusal of scripts
// themselves, in the words of Redis 7.0, Redis 7.2 and later, Valkey 8 and
// a server without the commands, over every driver (rueidis drops "ERR "),
// and returns words without the command's arguments; and nothing else.
func TestRefusal(t *testing.T) {
	for _, c := range []struct {
		name, err, want string
	}{
		{"an ACL, Redis 7.0", "NOPERM this user has no permissions to run the 'evalsha' command", "NOPERM this user has no permissions to run the 'evalsha' command"},
		{"an ACL, Redis 7.2 and Valkey 8", "NOPERM User u has no permissions to run the 'eval' command", "NOPERM User u has no permissions to run the 'eval' command"},
		{"an unknown command", "ERR unknown command 'EVALSHA', with args beginning with: 'sha' '1' 'k' 'secret-token' ", "unknown command 'evalsha'"},
		{"an unknown command, over rueidis", "unknown command 'EVAL', with args beginning with: 'return 1' '1' 'k' 'secret-token' ", "unknown command 'eval'"},
		{"an unknown command, unquoted", "ERR unknown command EVALSHA", "unknown command 'evalsha'"},
		{"a key the ACL denies", "NOPERM this user has no permissions to access one of the keys used as arguments", ""},
		{"a command the script calls", "ERR ACL failure in script: User w has no permissions to run the 'pexpire' command script: 6aee, on @user_script:1.", ""},
		{"another unknown command", "ERR unknown command 'DELEX', with args beginning with: 'k' 'IFEQ' 'secret-token' ", ""},
		{"a script's error", "ERR user_script:1: Script attempted to access nonexistent global variable 'evalsha' script: 6aee, on @user_script:1.", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := refusal(errors.New(c.err)); got != c.want {
				t.Errorf("refusal(%q): got %q, want %q", c.err, got, c.want)
			}
		})
	}
	if got := refusal(nil); got != "" {
		t.Errorf("refusal(nil): got %q, want \"\"", got)
	}
}

// TestCall: aclLib's call raises NOPERM for a command the user's ACL
// denies, on a real server whatever its own wording (Redis 7.0: "The user
// executing the script can't run this command"; Redis 7.2 and Valkey 8:
// "ACL failure in script"), without the command's arguments; and it is
// redis.call otherwise.
func TestCall(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srv.Command(ctx, "ACL", "SETUSER", "base", "on", ">secret", "~k*", "+evalsha", "+eval", "+get"); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	if _, err := srv.Command(ctx, "HSET", "k:hash", "f", "v"); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "base", Password: "secret", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	c := goredis.New(rdb)
	run := func(body string, keys []string, args ...any) (any, error) {
		return driver.NewScript(aclLib+body).Run(ctx, c, keys, args...)
	}

	t.Run("a denied command: NOPERM", func(t *testing.T) {
		_, err := run(`return call('TIME')`, nil)
		if !denied(err) || !strings.HasPrefix(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "time") {
			t.Errorf("call('TIME') = %v, want NOPERM naming time", err)
		}
		_, own := run(`return redis.call('TIME')`, nil)
		t.Logf("the server's own wording: %v", own)
	})
	t.Run("a denied command's arguments are not shown", func(t *testing.T) {
		_, err := run(`return call('SET', KEYS[1], ARGV[1])`, []string{"k:1"}, "secret-token")
		if !denied(err) || strings.Contains(err.Error(), "secret-token") {
			t.Errorf("call('SET', k, token) = %v, want NOPERM without the token", err)
		}
	})
	t.Run("an allowed command: its reply", func(t *testing.T) {
		if got, err := run(`return call('GET', KEYS[1])`, []string{"k:missing"}); got != nil || err != nil {
			t.Errorf("call('GET', missing) = %v, %v; want nil, nil", got, err)
		}
	})
	t.Run("an allowed command that fails: its own error", func(t *testing.T) {
		_, err := run(`return call('GET', KEYS[1])`, []string{"k:hash"})
		if err == nil || denied(err) || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
			t.Errorf("call('GET', hash) = %v, want WRONGTYPE", err)
		}
	})
}
