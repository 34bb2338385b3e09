package single_test

// Failure behaviour of waiting by notification, against real servers. Each
// case checks that no two holders overlap (a conformance.Detector), that
// nobody hangs beyond the documented bound (the contexts are generous hang
// detectors, never timings), and that the queue's companion keys do not
// outlive it. The bounds, with d the retry delay (lock.WithRetry) of the
// waiter that pays:
//
//   - a lost message costs at most one d: the waiter's timer;
//   - a crashed holder costs its remaining TTL: the head's timer is
//     min(d, the holder's PTTL + 1ms);
//   - a dead queued waiter costs at most its patience, 3d + 50ms, plus the d
//     of the next waiter, whose attempt prunes it;
//   - a cancelled waiter's entry leaves the queue at once (Leave, in the
//     background), or at its patience, capped by its deadline, at most.
//
// TestForeignClientsBargeIn, whose contenders include a bsm/redislock
// client, is in internal/bsminterop, with the other tests that import it.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/internal/testing/waittest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// hangDetector bounds each failure case: far beyond every bound it checks.
const hangDetector = 30 * time.Second

// waitCase is one failure case: a server, a key, and its queue's names.
type waitCase struct {
	t   *testing.T
	ctx context.Context
	srv *redistest.Server
	key string
	q   cas.Queue
}

func newWaitCase(t *testing.T, srv *redistest.Server) waitCase {
	ctx, cancel := context.WithTimeout(context.Background(), hangDetector)
	t.Cleanup(cancel)
	key := conformance.Key(t)
	q, _ := cas.NewQueue(key, false)
	return waitCase{t, ctx, srv, key, q}
}

// strategy returns a single Strategy over a go-redis client of its own (so
// a subscriber connection of its own), as another process would have.
func (wc waitCase) strategy() *single.Strategy {
	wc.t.Helper()
	s, err := single.NewStrategy(goredis.New(redistest.GoRedis(wc.t, wc.srv.Addr, 3)))
	if err != nil {
		wc.t.Fatalf("NewStrategy: %v", err)
	}
	return s
}

// locker returns a Locker like another process's, whose waiters do not
// wake on their subscription's confirmation (waittest.MessagesOnly): a
// wake-up is then a message, a resubscription or the timer.
func (wc waitCase) locker() *lock.Locker { return lock.New(waittest.MessagesOnly(wc.strategy())) }

// hold obtains the lock for ttl with a Locker of its own.
func (wc waitCase) hold(ttl time.Duration) *lock.Lock {
	wc.t.Helper()
	lk, err := lock.New(wc.strategy()).Obtain(wc.ctx, wc.key, ttl)
	if err != nil {
		wc.t.Fatalf("holder: Obtain = %v, want a lock", err)
	}
	return lk
}

// release releases lk, which must be held.
func (wc waitCase) release(lk *lock.Lock) {
	wc.t.Helper()
	if err := lk.Release(wc.ctx); err != nil {
		wc.t.Fatalf("Release = %v, want nil", err)
	}
}

// command runs a command on the server.
func (wc waitCase) command(args ...string) string {
	wc.t.Helper()
	reply, err := wc.srv.Command(wc.ctx, args...)
	if err != nil {
		wc.t.Fatalf("%v: %v", args, err)
	}
	return reply
}

// waitFor polls the server with args until its reply is want.
func (wc waitCase) waitFor(want string, args ...string) {
	wc.t.Helper()
	for {
		got, err := wc.srv.Command(wc.ctx, args...)
		if err == nil && got == want {
			return
		}
		if wc.ctx.Err() != nil {
			wc.t.Fatalf("%v = %q, %v; want %q within %v", args, got, err, want, hangDetector)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// subscribers waits until n clients subscribe to the lock's channel.
func (wc waitCase) subscribers(n int) {
	wc.t.Helper()
	waittest.Subscribers(wc.t, wc.ctx, wc.srv, channelOf(wc.q), n)
}

// noQueueLeft checks that the queue's keys are gone.
func (wc waitCase) noQueueLeft() {
	wc.t.Helper()
	if n := wc.command("EXISTS", wc.q.Q, wc.q.W); n != "0" {
		wc.t.Errorf("queue keys left: %s of %s and %s, want none", n, wc.q.Q, wc.q.W)
	}
}

// contend runs the contenders at once on the lock and waits for them
// (waittest.Contend).
func (wc waitCase) contend(det *conformance.Detector, times int, cs ...*waittest.Contender) {
	wc.t.Helper()
	waittest.Contend(wc.t, wc.ctx, wc.key, det, times, cs...)
}

// TestLostNotification: the waiters' subscriber connections are killed
// (CLIENT KILL TYPE pubsub) while they wait, and the release's message is
// lost; they still all obtain the lock, one at a time, each woken by its
// resubscription or its timer first: a lost message costs at most one
// retry delay.
func TestLostNotification(t *testing.T) {
	const waiters = 3
	wc := newWaitCase(t, redistest.Start(t, 1)[0])
	holder := wc.hold(time.Minute)
	cs := make([]*waittest.Contender, waiters)
	for i := range cs {
		cs[i] = &waittest.Contender{L: wc.locker(), Opts: []lock.Option{lock.WithRetry(lock.Linear(200 * time.Millisecond))}}
	}
	var det conformance.Detector
	done := make(chan struct{})
	go func() { wc.contend(&det, 1, cs...); close(done) }()
	wc.subscribers(waiters)
	if got := wc.command("CLIENT", "KILL", "TYPE", "pubsub"); got != strconv.Itoa(waiters) {
		t.Fatalf("CLIENT KILL TYPE pubsub = %s, want %d killed", got, waiters)
	}
	wc.release(holder)
	<-done
	for i, c := range cs {
		if c.Rec.Count("woken:resubscribed")+c.Rec.Count("woken:timer") == 0 {
			t.Errorf("waiter %d's wake-ups = %v, want a resubscription or a timer first", i, &c.Rec)
		}
		t.Logf("waiter %d: %v", i, &c.Rec)
	}
	wc.noQueueLeft()
}

// crashEnv, set in the environment of a child test process, makes
// TestCrashedHolder the holder that gets killed: "addr key".
const crashEnv = "LOCKSMITH_TEST_CRASHED_HOLDER"

// crashTTL is the crashed holder's TTL.
const crashTTL = 2 * time.Second

// TestCrashedHolder: a holder in another OS process is killed with SIGKILL
// and never releases. The head of the queue, whose retry delay is a minute,
// obtains the lock once the holder's TTL ends, woken by its timer, which
// is min(d, the holder's PTTL + 1ms): a crashed holder costs its remaining
// TTL, not the retry delay.
func TestCrashedHolder(t *testing.T) {
	if arg := os.Getenv(crashEnv); arg != "" {
		crashedHolder(t, arg)
		return
	}
	wc := newWaitCase(t, redistest.Start(t, 1)[0])
	child := exec.CommandContext(wc.ctx, os.Args[0], "-test.run=^TestCrashedHolder$", "-test.count=1")
	child.Env = append(os.Environ(), crashEnv+"="+wc.srv.Addr+" "+wc.key)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatalf("start the holder's process: %v", err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "held" {
	}
	if lines.Text() != "held" {
		t.Fatalf("the holder's process ended without the lock: %v", lines.Err())
	}
	go func() { // let its output go
		for lines.Scan() {
		}
	}()

	var rec waittest.Recorder
	got := make(chan error, 1)
	go func() {
		lk, err := wc.locker().Obtain(wc.ctx, wc.key, time.Minute, lock.WithRetry(lock.Linear(time.Minute)), rec.Option())
		if err == nil {
			err = lk.Release(wc.ctx)
		}
		got <- err
	}()
	wc.waitFor("1", "ZCARD", wc.q.Q)
	if err := child.Process.Kill(); err != nil { // SIGKILL
		t.Fatalf("kill -9 the holder: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: Obtain with a one-minute retry = %v, want the lock once the crashed holder's %v TTL ended", err, crashTTL)
	}
	if rec.Count("woken:message") != 0 || rec.Last() != "timer" {
		t.Errorf("waiter's wake-ups = %v, last %q; want no message, the timer last", &rec, rec.Last())
	}
	wc.noQueueLeft()
}

// crashedHolder is the child process of TestCrashedHolder: it obtains the
// lock for crashTTL, says "held" on its standard output, and waits to be
// killed (a minute at most).
func crashedHolder(t *testing.T, arg string) {
	var addr, key string
	if _, err := fmt.Sscan(arg, &addr, &key); err != nil {
		t.Fatalf("%s=%q: %v", crashEnv, arg, err)
	}
	l, err := single.New(goredis.New(redistest.GoRedis(t, addr, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Obtain(context.Background(), key, crashTTL); err != nil {
		t.Fatalf("crashed holder: Obtain = %v", err)
	}
	fmt.Println("held")
	time.Sleep(time.Minute)
}

// TestDeadWaiter: a waiter that stops calling does not stall the queue.
func TestDeadWaiter(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	const deadPatience = 300 * time.Millisecond

	// queueDead queues a waiter that never comes back: one raw attempt with
	// a short patience.
	queueDead := func(wc waitCase) {
		t.Helper()
		_, err := wc.strategy().Acquire(wc.ctx, strategy.Request{Key: wc.key, TTL: time.Minute, Token: "dead-token", Waiter: "dead", Patience: deadPatience})
		if !errors.Is(err, strategy.ErrNotObtained) {
			t.Fatalf("the dead waiter's attempt = %v, want ErrNotObtained", err)
		}
	}

	t.Run("one queued past its patience is passed over: the release wakes the next", func(t *testing.T) {
		wc := newWaitCase(t, srv)
		holder := wc.hold(time.Minute)
		queueDead(wc)
		var rec waittest.Recorder
		got := make(chan error, 1)
		go func() {
			lk, err := wc.locker().Obtain(wc.ctx, wc.key, time.Minute, lock.WithRetry(lock.Linear(time.Minute)), rec.Option())
			if err == nil {
				err = lk.Release(wc.ctx)
			}
			got <- err
		}()
		wc.waitFor("2", "ZCARD", wc.q.Q)
		wc.subscribers(1)
		time.Sleep(2 * deadPatience) // the dead waiter's patience ends, by the server's clock too
		wc.release(holder)
		if err := <-got; err != nil {
			t.Fatalf("waiter: Obtain with a one-minute retry = %v, want the lock at the release", err)
		}
		if rec.Count("woken:message") != 1 || rec.Count("woken:timer") != 0 {
			t.Errorf("waiter's wake-ups = %v, want one message, no timer", &rec)
		}
		wc.noQueueLeft()
	})

	t.Run("a woken head that never claims costs its patience and the next one's retry delay", func(t *testing.T) {
		wc := newWaitCase(t, srv)
		holder := wc.hold(time.Minute)
		queueDead(wc)
		var rec waittest.Recorder
		got := make(chan error, 1)
		go func() {
			lk, err := wc.locker().Obtain(wc.ctx, wc.key, time.Minute, lock.WithRetry(lock.Linear(100*time.Millisecond)), rec.Option())
			if err == nil {
				err = lk.Release(wc.ctx)
			}
			got <- err
		}()
		wc.waitFor("2", "ZCARD", wc.q.Q)
		wc.release(holder) // wakes the dead head, which never claims
		if err := <-got; err != nil {
			t.Fatalf("waiter: Obtain = %v, want the lock within the dead head's patience (%v) and a retry delay", err, deadPatience)
		}
		if rec.Count("woken:timer") == 0 {
			t.Errorf("waiter's wake-ups = %v, want its timer", &rec)
		}
		wc.noQueueLeft()
	})
}

// TestCancelledWaiter: a waiter whose context ends while it is queued
// returns at once with ErrNotObtained and the context's error, and its
// entry leaves the queue: at once when cancelled, and none of it outlives
// its deadline.
func TestCancelledWaiter(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, 1)[0]

	t.Run("cancelled: it returns, and leaves the queue", func(t *testing.T) {
		wc := newWaitCase(t, srv)
		wc.hold(time.Minute)
		ctx, cancel := context.WithCancel(wc.ctx)
		got := make(chan error, 1)
		go func() {
			_, err := wc.locker().Obtain(ctx, wc.key, time.Minute, lock.WithRetry(lock.Linear(time.Minute)))
			got <- err
		}()
		wc.waitFor("1", "ZCARD", wc.q.Q)
		cancel()
		if err := <-got; !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Obtain cancelled while queued = %v, want ErrNotObtained and context.Canceled", err)
		}
		wc.waitFor("0", "ZCARD", wc.q.Q) // long before its patience, 3 minutes
		wc.noQueueLeft()
	})

	t.Run("past its deadline: nothing of it is left", func(t *testing.T) {
		wc := newWaitCase(t, srv)
		wc.hold(time.Minute)
		const deadline = 2 * time.Second
		ctx, cancel := context.WithTimeout(wc.ctx, deadline)
		defer cancel()
		got := make(chan error, 1)
		go func() {
			_, err := wc.locker().Obtain(ctx, wc.key, time.Minute, lock.WithRetry(lock.Linear(time.Minute)))
			got <- err
		}()
		wc.waitFor("1", "ZCARD", wc.q.Q)
		for _, k := range []string{wc.q.Q, wc.q.W} {
			ms, _ := strconv.Atoi(wc.command("PTTL", k))
			if ms == -2 && ctx.Err() != nil {
				continue // read past the deadline (a stalled machine): gone, as it must be
			}
			if ms <= 0 || ms > int(deadline.Milliseconds()) {
				t.Errorf("PTTL %s = %dms, want in (0, %d]: within the waiter's deadline", k, ms, deadline.Milliseconds())
			}
		}
		if err := <-got; !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Obtain past its deadline = %v, want ErrNotObtained and context.DeadlineExceeded", err)
		}
		wc.waitFor("0", "EXISTS", wc.q.Q, wc.q.W)
	})
}

// TestServerRestartedEmpty: the server restarts empty while waiters wait:
// the lock, the queue and the subscriptions are gone. The waiters
// resubscribe, or their timers fire, and they all obtain the lock, one at
// a time. A waiter whose timer fires while the server is down gets the
// truth, its connection refused (or no answer, for a command on its way
// when the server died), and its caller tries again: the restart takes
// longer than a timer on a loaded machine.
func TestServerRestartedEmpty(t *testing.T) {
	const waiters = 3
	wc := newWaitCase(t, redistest.Start(t, 1)[0])
	wc.hold(time.Minute)
	down := func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, lock.ErrNoAnswer) }
	cs := make([]*waittest.Contender, waiters)
	for i := range cs {
		cs[i] = &waittest.Contender{L: wc.locker(), Opts: []lock.Option{lock.WithRetry(lock.Linear(200 * time.Millisecond))}, Again: down}
	}
	var det conformance.Detector
	done := make(chan struct{})
	go func() { wc.contend(&det, 3, cs...); close(done) }()
	wc.subscribers(waiters)
	wc.waitFor(strconv.Itoa(waiters), "ZCARD", wc.q.Q)
	if err := wc.srv.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	<-done
	for i, c := range cs {
		t.Logf("waiter %d: %v", i, &c.Rec)
	}
	if keys := wc.command("KEYS", "*"); keys != "" {
		t.Errorf("KEYS * after the waiters released = %q, want none", keys)
	}
}

// channelOf returns the lock's own wake-up channel, where messages for
// waiters whose ids name no listener go.
func channelOf(q cas.Queue) string {
	c, _ := cas.WakeChannel(q.Key)
	return c
}
