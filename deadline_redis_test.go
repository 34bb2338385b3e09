package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
)

// deadline is the context deadline of the calls against paused servers, and
// returnBound how long after it they may return: far less than the second a
// synchronous clean-up used to add, and a wide margin for a loaded machine.
const (
	deadline    = 200 * time.Millisecond
	returnBound = time.Second
	goneBound   = 10 * time.Second // how long a key may take to go once the servers answer again
)

// pausedCase is one strategy × driver on its servers, with those to pause
// so that no quorum is possible without them.
type pausedCase struct {
	name    string
	h       conformance.Harness
	servers []*redistest.Server
	pause   []*redistest.Server
	// strays says why a failed Obtain may leave its key, if it may.
	strays string
}

// pausedCases returns every strategy × driver: single and setnx-getset on
// one server, redlock on 3 nodes of which 2 are paused.
func pausedCases(t *testing.T) []pausedCase {
	one := redistest.Start(t, 1)
	three := redistest.Start(t, 3)
	addrs := make([]string, len(three))
	for i, s := range three {
		addrs[i] = s.Addr
	}
	var cases []pausedCase
	add := func(strategy string, combos []matrix.Combo, servers []*redistest.Server, paused int, strays string) {
		for _, c := range combos {
			cases = append(cases, pausedCase{strategy + "/" + c.Name, c.Harness, servers, servers[:paused], strays})
		}
	}
	add("single", matrix.Single(one[0].Addr), one, 1, "")
	add("single-without-scripts", matrix.WithoutScripts(matrix.Single(one[0].Addr)), one, 1, "")
	const legacyStrays = "its timestamps are not unique: deleting one could delete another holder's lock, so a stray one expires as a crashed holder's does"
	add("setnx-getset", legacy(matrix.SetnxGetset(one[0].Addr)), one, 1, legacyStrays)
	add("setnx-getset-without-scripts", legacy(matrix.WithoutScripts(matrix.SetnxGetset(one[0].Addr))), one, 1, legacyStrays)
	add("redlock", matrix.Redlock(addrs), three, 2, "")
	add("redlock-without-scripts", matrix.WithoutScripts(matrix.Redlock(addrs)), three, 2, "")
	return cases
}

// legacy returns the combinations of setnx-getset in one format, over
// every driver: the formats differ only in the strategy.
func legacy(combos []matrix.Combo) []matrix.Combo {
	var over []matrix.Combo
	for _, c := range combos {
		if strings.HasPrefix(c.Name, "ms+safety-ttl/") {
			over = append(over, c)
		}
	}
	return over
}

// keysGone polls, up to goneBound, until no server holds any of the keys.
func keysGone(t *testing.T, servers []*redistest.Server, keys ...string) {
	t.Helper()
	start := time.Now()
	for {
		var left []string
		for _, s := range servers {
			for _, k := range keys {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				n, err := s.Command(ctx, "EXISTS", k)
				cancel()
				if err != nil || n != "0" {
					left = append(left, fmt.Sprintf("%s on %s (EXISTS = %q, %v)", k, s.Addr, n, err))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Since(start) > goneBound {
			t.Errorf("%v after the servers resumed, keys are left behind: %s; want none", goneBound, strings.Join(left, "; "))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ends are the two ways in which the context of a call against paused
// servers ends: its deadline passes, or it is cancelled as late. The
// cancelled one has a deadline too, later: go-redis ends a command waiting
// for its reply at the context's deadline, not at its cancellation (it
// then waits for its ReadTimeout).
var ends = []struct {
	name string
	want error // what ends the context, which the call's error must match
	ctx  func() (context.Context, context.CancelFunc)
}{
	{"deadline", context.DeadlineExceeded, func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), deadline)
	}},
	{"cancel", context.Canceled, func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*deadline)
		t := time.AfterFunc(deadline, cancel)
		return ctx, func() { t.Stop(); cancel() }
	}},
}

// TestPausedServerDeadlines: against paused servers (SIGSTOP), with a
// context that ends after 200ms (its deadline, or a cancellation), Obtain
// (waiting or not), Refresh, Release, TTL, the guarded writes (where the
// strategy runs them), Inspect, Break, List and Do
// return soon after it ends, for every strategy and driver, with an error
// that matches the context's error and ErrNoAnswer; an Obtain matches ErrNotObtained only
// when an attempt found the lock held before the pause. Once the servers
// resume, neither the failed Obtains nor Do leave their key, or a wait
// queue's keys, behind.
func TestPausedServerDeadlines(t *testing.T) {
	const ttl = 30 * time.Second // longer than goneBound: a key left behind is seen
	for _, c := range pausedCases(t) {
		t.Run(c.name, func(t *testing.T) {
			bg := context.Background()
			l := c.h.NewLocker(t)
			key := conformance.Key(t)
			// Warm the pools up, and hold the locks for Refresh, Release and
			// TTL, and the one that a waiter finds held before the pause.
			held := map[string]*lock.Lock{}
			for _, e := range ends {
				for _, op := range []string{"refresh", "release", "ttl", "guard", "guard-commands"} {
					lk, err := l.Obtain(bg, key+":"+e.name+":"+op, ttl)
					if err != nil {
						t.Fatalf("Obtain before the pause = %v, want a lock", err)
					}
					held[e.name+":"+op] = lk
				}
			}
			// The guarded writes the strategy runs (single; with scripts, Guard
			// too), as a write before the pause shows.
			const setKey = `return redis.call('SET', KEYS[1], ARGV[1])`
			guarded := func(name string, lk *lock.Lock, ctx context.Context) error {
				data := key + ":guarded"
				if name == "Guard" {
					_, err := lk.Guard(ctx, setKey, []string{data}, "x")
					return err
				}
				_, err := lk.GuardCommands(ctx, []string{data}, []any{"SET", data, "x"})
				return err
			}
			checked := []string{"Obtain", "Obtain waiting", "Refresh", "Release", "TTL", "Inspect", "Break"}
			for _, name := range []string{"Guard", "GuardCommands"} {
				switch err := guarded(name, held["deadline:"+map[string]string{"Guard": "guard", "GuardCommands": "guard-commands"}[name]], bg); {
				case err == nil:
					checked = append(checked, name)
				case !errors.Is(err, errors.ErrUnsupported):
					t.Fatalf("%s before the pause = %v, want nil, or an error matching errors.ErrUnsupported", name, err)
				}
			}
			holder, err := l.Obtain(bg, key+":held", ttl)
			if err != nil {
				t.Fatalf("Obtain before the pause = %v, want a lock", err)
			}
			paused := make(chan struct{})
			calls := func(end string) map[string]func(ctx context.Context) error {
				k := key + ":" + end
				return map[string]func(ctx context.Context) error{
					"Obtain": func(ctx context.Context) error {
						_, err := l.Obtain(ctx, k+":obtain", ttl)
						return err
					},
					// A waiting Obtain sends the queue's script (single), and
					// listens for wake-ups.
					"Obtain waiting": func(ctx context.Context) error {
						_, err := l.Obtain(ctx, k+":wait", ttl, lock.WithRetry(lock.Linear(50*time.Millisecond)))
						return err
					},
					"Refresh": func(ctx context.Context) error { return held[end+":refresh"].Refresh(ctx, ttl) },
					"Release": func(ctx context.Context) error { return held[end+":release"].Release(ctx) },
					"TTL": func(ctx context.Context) error {
						_, err := held[end+":ttl"].TTL(ctx)
						return err
					},
					"Inspect": func(ctx context.Context) error {
						_, err := l.Inspect(ctx, k+":ttl")
						return err
					},
					"Break": func(ctx context.Context) error {
						_, err := l.Break(ctx, k+":ttl", strategy.Fingerprint("not the holder"))
						return err
					},
					"List": func(ctx context.Context) error {
						_, err := l.List(ctx, k, 10)
						return err
					},
					"Guard":         func(ctx context.Context) error { return guarded("Guard", held[end+":guard"], ctx) },
					"GuardCommands": func(ctx context.Context) error { return guarded("GuardCommands", held[end+":guard-commands"], ctx) },
				}
			}
			var wg sync.WaitGroup
			// A waiter whose first attempt finds the lock held, before the
			// pause; its next attempt gets no answer.
			attempted := make(chan struct{})
			var once sync.Once
			first := &lock.Hooks{Attempt: func(ctx context.Context, _ lock.Event, next func(context.Context) error) error {
				err := next(ctx)
				once.Do(func() { close(attempted) })
				return err
			}}
			var heldErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(bg, 5*deadline)
				defer cancel()
				_, heldErr = l.Obtain(ctx, key+":held", ttl, lock.WithRetry(lock.Linear(10*time.Millisecond)), lock.WithHooks(first))
			}()
			// Do obtains before the pause, and its fn returns once the servers
			// are paused: its release meets them.
			doStarted := make(chan struct{})
			var doErr error
			var doTook time.Duration
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(bg, deadline)
				defer cancel()
				start, ran := time.Now(), false
				doErr = lock.Do(ctx, l, key+":do", ttl, func(context.Context) error {
					ran = true
					close(doStarted)
					<-paused
					return nil
				})
				doTook = time.Since(start)
				if !ran {
					close(doStarted)
				}
			}()
			<-doStarted
			if doErr != nil {
				t.Fatalf("Do before the pause = %v, want fn to run", doErr)
			}
			<-attempted
			for _, s := range c.pause {
				s.Pause()
			}
			resumed := false
			resume := func() {
				if !resumed {
					for _, s := range c.pause {
						s.Resume()
					}
					resumed = true
				}
			}
			defer resume()
			close(paused)
			took := map[string]time.Duration{}
			errs := map[string]error{}
			ended := map[string]error{} // each call's ctx.Err() as it returned
			var mu sync.Mutex
			for _, e := range ends {
				for name, call := range calls(e.name) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := e.ctx()
						defer cancel()
						start := time.Now()
						err := call(ctx)
						mu.Lock()
						took[e.name+" "+name], errs[e.name+" "+name], ended[e.name+" "+name] = time.Since(start), err, ctx.Err()
						mu.Unlock()
					}()
				}
			}
			wg.Wait()
			time.Sleep(300 * time.Millisecond) // the servers stay paused past the calls
			resume()
			t.Logf("Do with a %v context against paused servers returned after %v (err: %v)", deadline, doTook.Round(time.Millisecond), doErr)
			if doTook > returnBound {
				t.Errorf("Do returned after %v, want well before %v", doTook, returnBound)
			}
			if !errors.Is(doErr, context.DeadlineExceeded) {
				t.Errorf("Do: got %v, want an error matching context.DeadlineExceeded", doErr)
			}
			for _, e := range ends {
				for _, name := range checked {
					name := e.name + " " + name
					err := errs[name]
					t.Logf("%s: a %v context against paused servers; returned after %v (err: %v)", name, deadline, took[name].Round(time.Millisecond), err)
					if took[name] > returnBound {
						t.Errorf("%s returned after %v, want well before %v", name, took[name], returnBound)
					}
					// A process stalled past the cancellation's deadline too (a
					// loaded machine, under -race) ends the cancelled context
					// by its deadline: the call's error must match whichever
					// ended it.
					end := e.want
					if ended[name] != nil {
						end = ended[name]
					}
					for _, want := range []error{end, lock.ErrNoAnswer} {
						if !errors.Is(err, want) {
							t.Errorf("%s: got %v, want an error matching %v", name, err, want)
						}
					}
					if errors.Is(err, lock.ErrNotObtained) {
						t.Errorf("%s: got %v, want an error not matching ErrNotObtained: nothing was found held", name, err)
					}
					if err != nil && !strings.Contains(err.Error(), "Redis did not answer") {
						t.Errorf("%s: got %q, want it to say that Redis did not answer", name, err)
					}
				}
			}
			// Redlock's last attempt may have had an answer, "taken", from
			// the node that was not paused.
			wantHeld := []error{lock.ErrNotObtained, context.DeadlineExceeded}
			if len(c.servers) == 1 {
				wantHeld = append(wantHeld, lock.ErrNoAnswer)
			}
			t.Logf("Obtain of a lock found held before the pause: %v", heldErr)
			for _, want := range wantHeld {
				if !errors.Is(heldErr, want) {
					t.Errorf("Obtain of a lock found held before the pause: got %v, want an error matching %v", heldErr, want)
				}
			}
			if c.strays != "" {
				t.Logf("not checked: the key of the failed Obtain; %s", c.strays)
				keysGone(t, c.servers, key+":do")
			} else {
				var keys []string
				for _, e := range ends {
					k := key + ":" + e.name
					keys = append(keys, k+":obtain", k+":wait", "{"+k+":wait}:q", "{"+k+":wait}:w")
				}
				keysGone(t, c.servers, append(keys, key+":do")...)
			}
			for _, lk := range held {
				_ = lk.Release(bg)
			}
			_ = holder.Release(bg)
		})
	}
}
