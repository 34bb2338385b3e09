package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/neterr"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// replyError is an error reply as a driver returns it: its text is the
// server's.
type replyError string

func (e replyError) Error() string { return string(e) }

// typedError is an error with an error type of its own, as
// *redlock.QuorumError has.
type typedError struct{ error }

func (typedError) ErrorType() string { return "no_quorum" }

// errNoPerm is the reply of a server whose ACL denies scripts.
const errNoPerm = replyError("NOPERM this user has no permissions to run the 'evalsha' command")

// TestRefreshErrorReply: auto-refresh stops at the first refresh refused
// with an error reply that cannot pass by itself, and the lock's loss
// names that error; a reply that passes by itself is retried.
func TestRefreshErrorReply(t *testing.T) {
	ctx := context.Background()

	for _, reply := range []error{
		errNoPerm,
		replyError("WRONGTYPE Operation against a key holding the wrong kind of value"),
		replyError("ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 4a2b, on @user_script:1."),
		replyError("OOM command not allowed when used memory > 'maxmemory'."),
		fmt.Errorf("redlock: refresh: no quorum: %w", errors.Join(errNoPerm, errNoPerm)),
	} {
		t.Run("auto-refresh stops at the first refresh refused with "+strings.Fields(reply.Error())[0], func(t *testing.T) {
			noLeaks(t)
			f := newFake()
			f.failRefreshes(reply)
			lk := refreshingFor(t, f, time.Second, lock.WithRefreshFraction(0.1))
			waitDone(t, lk)
			if got := len(f.callsTo("refresh")); got != 1 {
				t.Errorf("refreshes sent = %d, want 1: none after the first refused", got)
			}
			if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) || !errors.Is(err, reply) {
				t.Errorf("Err() = %v, want ErrLapsed and the refresh's error", err)
			}
		})
	}

	for _, code := range append(neterr.Transient, "ERR max number of clients reached") {
		t.Run("a refresh refused with "+code+" is retried", func(t *testing.T) {
			f := newFake()
			reply := replyError(code + " the server is not ready yet")
			f.failRefreshes(nil, reply, reply)
			err := lock.Do(ctx, lock.New(f), "k", aliveTTL, func(ctx context.Context) error {
				return waitRefreshes(ctx, f, 3)
			}, alive)
			if err != nil {
				t.Errorf("Do = %v, want nil: the third refresh succeeded", err)
			}
		})
	}

	t.Run("a refresh that finds the server lacking a command stops the refreshes", func(t *testing.T) {
		f := newFake()
		f.failRefreshes(fmt.Errorf("lock: the server lacks DELIFEQ, which locks without scripts need: %w", errors.ErrUnsupported))
		lk := refreshingFor(t, f, time.Second, lock.WithRefreshFraction(0.1))
		waitDone(t, lk)
		if got := len(f.callsTo("refresh")); got != 1 {
			t.Errorf("refreshes sent = %d, want 1", got)
		}
	})

	t.Run("Err, context.Cause and Do's error carry the refresh's error beside ErrLapsed", func(t *testing.T) {
		noLeaks(t)
		f := newFake()
		f.failRefreshes(errNoPerm)
		var lk *lock.Lock
		err := lock.Do(ctx, lock.New(f), "invoice:7", time.Second, func(ctx context.Context) error {
			lk, _ = lock.FromContext(ctx)
			<-ctx.Done()
			if cause := context.Cause(ctx); !errors.Is(cause, lock.ErrLapsed) || !errors.Is(cause, errNoPerm) || !strings.Contains(cause.Error(), "NOPERM") {
				t.Errorf("context.Cause(fn's context) = %v, want ErrLapsed and NOPERM", cause)
			}
			return nil
		}, lock.WithRefreshFraction(0.1))
		if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrLapsed) || !errors.Is(err, errNoPerm) {
			t.Errorf("Do = %v, want ErrLost, ErrLapsed and NOPERM", err)
		}
		if got := strings.Count(err.Error(), "NOPERM"); got != 1 {
			t.Errorf("Do = %q, names NOPERM %d times, want once", err, got)
		}
		if cause := lk.Err(); !errors.Is(cause, lock.ErrLapsed) || !errors.Is(cause, errNoPerm) {
			t.Errorf("Err() = %v, want ErrLapsed and NOPERM", cause)
		}
		if token := lk.Token(); strings.Contains(err.Error(), token) {
			t.Errorf("Do = %q, holds the token", err)
		}
	})

	t.Run("a lapse after refreshes without an answer matches ErrNoAnswer, not their contexts' errors", func(t *testing.T) {
		f := newFake()
		f.failRefreshes(fmt.Errorf("i/o: %w", context.DeadlineExceeded)) // as a driver whose call's deadline passed
		lk := refreshingFor(t, f, time.Second, lock.WithRefreshFraction(0.1))
		waitDone(t, lk)
		err := lk.Err()
		if !errors.Is(err, lock.ErrLapsed) || !errors.Is(err, lock.ErrNoAnswer) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err() = %v, want ErrLapsed and ErrNoAnswer, and not context.DeadlineExceeded", err)
		}
		if got := len(f.callsTo("refresh")); got < 2 {
			t.Errorf("refreshes sent = %d, want at least 2: one without an answer is retried", got)
		}
	})

	t.Run("the loss's error type, for telemetry, is lapsed, not the refresh's", func(t *testing.T) {
		f := newFake()
		f.failRefreshes(typedError{errNoPerm})
		lk := refreshingFor(t, f, time.Second, lock.WithRefreshFraction(0.1))
		waitDone(t, lk)
		var typed interface{ ErrorType() string }
		if err := lk.Err(); !errors.As(err, &typed) || typed.ErrorType() != "lapsed" {
			t.Errorf("the ErrorType of Err() = %v, want lapsed", err)
		}
	})

	t.Run("a refresh that succeeds after a failed one leaves the lapse without its error", func(t *testing.T) {
		f := newFake()
		f.failRefreshes(nil, errBoom)
		lk := refreshingFor(t, f, time.Second, lock.WithRefreshFraction(0.1))
		if err := waitRefreshes(ctx, f, 3); err != nil {
			t.Fatal(err)
		}
		lk.StopRefresh()
		waitDone(t, lk)
		if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) || errors.Is(err, errBoom) {
			t.Errorf("Err() = %v, want ErrLapsed alone: the last refresh succeeded", err)
		}
	})
}

// TestDoSaysTheCauseOnce: when fn returns its context's cause, or wraps
// it, Do's error says the cause once.
func TestDoSaysTheCauseOnce(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		ret  func(ctx context.Context) error
		want string
	}{
		{"fn returns the cause", context.Cause, `lock: lost "invoice:7": lock: not held: expired`},
		{"fn wraps the cause", func(ctx context.Context) error { return fmt.Errorf("invoice: %w", context.Cause(ctx)) },
			`lock: lost "invoice:7": invoice: lock: not held: expired`},
		{"fn returns its context's error", func(ctx context.Context) error { return ctx.Err() },
			`lock: lost "invoice:7": lock: not held: expired (fn returned: context canceled)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			err := lock.Do(ctx, lock.New(f), "invoice:7", aliveTTL, func(ctx context.Context) error {
				f.drop("invoice:7")
				<-ctx.Done()
				return c.ret(ctx)
			}, alive)
			if err == nil || err.Error() != c.want {
				t.Errorf("Do = %v, want %q", err, c.want)
			}
			if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrExpired) {
				t.Errorf("Do = %v, want ErrLost and ErrExpired", err)
			}
		})
	}
}

// TestRefreshErrorReplyRedis: against a real server (or the embedded one),
// over every driver, the batched auto-refresh of single stops at the first
// refresh that the server refuses with WRONGTYPE (the lock's key was made a
// list), and the lock's loss names it.
func TestRefreshErrorReplyRedis(t *testing.T) {
	addr, _ := redistest.Addr(t)
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn := d.Conn(t, addr)
			locker, err := single.New(conn)
			if err != nil {
				t.Fatal(err)
			}
			var r refreshReplies
			key := "lock:wrongtype:" + d.Name
			lk, err := locker.Obtain(ctx, key, time.Second, lock.WithRefreshFraction(0.1), lock.WithHooks(r.hooks()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = conn.Del(context.Background(), key) })
			if _, err := conn.Del(ctx, key); err != nil {
				t.Fatal(err)
			}
			if _, err := driver.Do(ctx, conn, "RPUSH", key, "not a lock"); err != nil {
				t.Fatal(err)
			}
			if err := lk.StartRefresh(ctx); err != nil {
				t.Fatal(err)
			}
			waitDone(t, lk)
			r.stoppedAt(t, "WRONGTYPE")
			if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("Err() = %v, want ErrLapsed, naming WRONGTYPE", err)
			}
		})
	}
}

// TestRefreshDeniedByACL: a user whose ACL denies PEXPIRE holds a lock of
// single, with scripts or without, until its first refresh, which the
// server refuses: within the script, with ERR (which rueidis's errors leave
// out), or as a command, with NOPERM (in a transaction, EXECABORT).
// Auto-refresh stops there, over every driver, and the lapse names the
// refusal.
func TestRefreshDeniedByACL(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The words of the refusal: Redis 7.0's, Redis 7.2's and Valkey's.
	refusal := []string{"NOPERM", "can't run this command", "ACL failure"}
	for _, d := range []string{"goredis", "redigo", "rueidis"} {
		for mode, newL := range map[string]func(driver.Conn) (*lock.Locker, error){"scripts": newSingle, "without scripts": newSingleWithoutScripts} {
			t.Run(d+"/"+mode, func(t *testing.T) {
				user := "no-pexpire-" + d + "-" + strings.ReplaceAll(mode, " ", "-")
				locker, err := newL(aclConnOver(t, ctx, srv, d, user, "~lock:*", "+evalsha +eval", strings.ReplaceAll(noScripts, "+pexpire ", "")))
				if err != nil {
					t.Fatal(err)
				}
				var r refreshReplies
				lk, err := locker.Obtain(ctx, "lock:"+user, time.Second, lock.WithRefreshFraction(0.1), lock.WithHooks(r.hooks()))
				if err != nil {
					t.Fatalf("Obtain = %v, want a lock", err)
				}
				if err := lk.StartRefresh(ctx); err != nil {
					t.Fatal(err)
				}
				waitDone(t, lk)
				r.stoppedAt(t, refusal...)
				if err := lk.Err(); !errors.Is(err, lock.ErrLapsed) || !containsAny(err.Error(), refusal) {
					t.Errorf("Err() = %v, want ErrLapsed, naming the refusal", err)
				}
			})
		}
	}
}

// TestTransientRepliesDocumented: docs/safety.md lists every error reply
// that auto-refresh retries.
func TestTransientRepliesDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/safety.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range neterr.Transient {
		if !strings.Contains(string(doc), "`"+code+"`") {
			t.Errorf("docs/safety.md does not list `%s`, a reply that auto-refresh retries", code)
		}
	}
}

// refreshingFor obtains "k" on f for ttl and starts refreshing it.
func refreshingFor(t *testing.T, f *fakeStrategy, ttl time.Duration, opts ...lock.Option) *lock.Lock {
	t.Helper()
	lk, err := lock.New(f).Obtain(context.Background(), "k", ttl, opts...)
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	if err := lk.StartRefresh(context.Background()); err != nil {
		t.Fatalf("StartRefresh = %v, want nil", err)
	}
	return lk
}

// refreshReplies records the outcome of every refresh that the Op hooks
// see.
type refreshReplies struct {
	mu   sync.Mutex
	errs []error
}

func (r *refreshReplies) hooks() *lock.Hooks {
	return &lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
		err := next(ctx)
		if e.Op == "refresh" {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		}
		return err
	}}
}

// stoppedAt fails t unless the last refresh recorded is the first whose
// error holds one of words: the refreshes stopped there. (Those before it
// may have got no answer, on a loaded machine.)
func (r *refreshReplies) stoppedAt(t *testing.T, words ...string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, err := range r.errs {
		if err != nil && containsAny(err.Error(), words) {
			if i != len(r.errs)-1 {
				t.Errorf("refresh errors = %v, want none after the first naming one of %q", r.errs, words)
			}
			return
		}
	}
	t.Errorf("refresh errors = %v, want one naming one of %q", r.errs, words)
}

// containsAny reports whether s contains one of words.
func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
