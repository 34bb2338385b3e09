package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// newLocker starts an in-process Redis and returns a single-instance Locker
// on it, and a function that stops both. In an application, build the
// go-redis client from your own configuration instead.
func newLocker() (*lock.Locker, func()) {
	locker, _, stop := newClientLocker()
	return locker, stop
}

// newClientLocker is newLocker that also returns the client.
func newClientLocker() (*lock.Locker, *redis.Client, func()) {
	locker, s, stop := newServerLocker()
	return locker, s.GoRedisClient(), stop
}

// newServerLocker is newLocker that also returns the server, which fakes
// the faults a holder meets (locktest.Server.ExpireNow, say).
func newServerLocker() (*lock.Locker, *locktest.Server, func()) {
	s, err := locktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	locker, err := single.New(goredis.New(s.GoRedisClient()))
	if err != nil {
		log.Fatal(err)
	}
	return locker, s, s.Close
}

func Example() {
	s, err := locktest.StartServer() // an in-process Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	client := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()

	locker, err := single.New(goredis.New(client))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	lk, err := locker.Obtain(ctx, "report:daily", 30*time.Second)
	if errors.Is(err, lock.ErrNotObtained) {
		fmt.Println("another worker is writing the report")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("obtained", lk)

	// ... write the report, finishing before lk.ValidUntil() ...

	if err := lk.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
	// Output:
	// obtained lock "report:daily"
	// released
}

func ExampleWithRetry() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	first, err := locker.Obtain(ctx, "invoice:42", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer first.Release(ctx)

	// A second obtainer waits with exponential backoff while the first
	// holds the lock, but no longer than its context allows.
	waitCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = locker.Obtain(waitCtx, "invoice:42", time.Minute,
		lock.WithRetry(lock.Exponential(5*time.Millisecond, 50*time.Millisecond)))
	fmt.Println("not obtained:", errors.Is(err, lock.ErrNotObtained))
	fmt.Println("deadline exceeded:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// not obtained: true
	// deadline exceeded: true
}

func ExampleLinear() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	first, err := locker.Obtain(ctx, "cache:rebuild", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond) // the first holder finishes its work
		_ = first.Release(ctx)
	}()

	// The second obtainer tries again every 10ms until the first releases.
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	second, err := locker.Obtain(waitCtx, "cache:rebuild", time.Minute,
		lock.WithRetry(lock.Linear(10*time.Millisecond)))
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("obtained after the first holder released")
	// Output:
	// obtained after the first holder released
}

func ExampleLimitAttempts() {
	// Three attempts in all, 100ms apart.
	p := lock.LimitAttempts(lock.Linear(100*time.Millisecond), 3)
	for attempt := 1; ; attempt++ {
		delay, ok := p.Delay(attempt)
		if !ok {
			fmt.Printf("attempt %d failed: give up\n", attempt)
			break
		}
		fmt.Printf("attempt %d failed: wait %v\n", attempt, delay)
	}
	// Output:
	// attempt 1 failed: wait 100ms
	// attempt 2 failed: wait 100ms
	// attempt 3 failed: give up
}

func ExampleLock_Refresh() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	lk, err := locker.Obtain(ctx, "job:nightly", 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	// The job needs longer than planned: extend the lock before it expires.
	// An error matching lock.ErrNotHeld means it is too late: stop working.
	if err := lk.Refresh(ctx, time.Minute); err != nil {
		log.Fatal(err)
	}
	ttl, err := lk.TTL(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("more than 30s left:", ttl > 30*time.Second)
	// Output:
	// more than 30s left: true
}

func ExampleLock_Release() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	lk, err := locker.Obtain(ctx, "user:7:export", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first release:", lk.Release(ctx))

	// The lock is no longer ours: a second release deletes nothing.
	err = lk.Release(ctx)
	fmt.Println("second release not held:", errors.Is(err, lock.ErrNotHeld))
	// Output:
	// first release: <nil>
	// second release not held: true
}

func ExampleKeyErrors() {
	locker, srv, stop := newServerLocker()
	defer stop()
	ctx := context.Background()

	lk, err := locker.ObtainMany(ctx, []string{"{stock}:a", "{stock}:b", "{stock}:c"}, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	srv.ExpireNow("{stock}:b") // as if both had expired
	srv.ExpireNow("{stock}:c")

	err = lk.Release(ctx) // deletes {stock}:a, and reports the other two
	for _, ke := range lock.KeyErrors(err) {
		fmt.Println(ke.Key, "expired:", errors.Is(ke, lock.ErrExpired))
	}
	// Output:
	// {stock}:b expired: true
	// {stock}:c expired: true
}

func ExampleNotObtainedError() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	holder, err := locker.Obtain(ctx, "report:daily", time.Minute, lock.WithMetadata("web-3 pid=4121"))
	if err != nil {
		log.Fatal(err)
	}
	defer holder.Release(ctx)

	_, err = locker.Obtain(ctx, "report:daily", time.Minute, lock.WithRetry(lock.NoRetry()))
	// err says: lock: not obtained: "report:daily" held by web-3 pid=4121 for 2ms
	var held *lock.NotObtainedError
	if errors.As(err, &held) {
		fmt.Println(held.Key, "is held by", held.Holder.Metadata)
		fmt.Println("for a while:", held.Holder.HeldFor > 0, "and for a while yet:", held.Holder.TTL > 0)
	}
	// Output:
	// report:daily is held by web-3 pid=4121
	// for a while: true and for a while yet: true
}

func ExampleArgumentError() {
	locker, stop := newLocker()
	defer stop()

	_, err := locker.Obtain(context.Background(), "", time.Minute)
	var argErr *lock.ArgumentError
	if errors.As(err, &argErr) {
		fmt.Println("invalid argument:", argErr.Name)
	}
	fmt.Println(errors.As(err, new(*lock.ArgumentError)))
	fmt.Println(err)
	// Output:
	// invalid argument: key
	// true
	// lock: invalid key: must not be empty
}

func ExampleDo() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	// Do obtains the lock, keeps it refreshed while the function runs, and
	// releases it when the function returns.
	err := lock.Do(ctx, locker, "report:daily", 30*time.Second, func(ctx context.Context) error {
		lk, _ := lock.FromContext(ctx)
		fmt.Println("writing the report under", lk)
		// ... work, and stop when ctx is done: the lock was lost ...
		return ctx.Err()
	})
	switch {
	case errors.Is(err, lock.ErrNotObtained):
		fmt.Println("another worker is writing the report")
	case errors.Is(err, lock.ErrLost):
		fmt.Println("the lock was lost before the report was written:", err)
	case err != nil:
		fmt.Println("the report failed:", err)
	default:
		fmt.Println("report written, lock released")
	}
	// Output:
	// writing the report under lock "report:daily"
	// report written, lock released
}

func ExampleHold() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	// A transfer locks both accounts as one lock, then holds it while it
	// runs: refreshed in the background, released when it returns.
	lk, err := locker.ObtainMany(ctx, []string{"account:bob", "account:alice"}, 30*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	err = lock.Hold(ctx, lk, func(ctx context.Context) error {
		fmt.Println("moving money between", lk.Keys())
		return nil
	})
	fmt.Println("released:", err == nil)
	// Output:
	// moving money between [account:alice account:bob]
	// released: true
}

func ExampleLocker_Close() {
	locker, stop := newLocker()
	defer stop() // closes the client, after Close
	ctx := context.Background()

	if lk, err := locker.Obtain(ctx, "job", 30*time.Second); err == nil {
		_ = lk.Release(ctx)
	}
	// Close waits for what the Locker's calls left running in the
	// background, such as a clean-up, before the client goes.
	if err := locker.Close(); err != nil {
		fmt.Println("close:", err)
	}
	_, err := locker.Obtain(ctx, "job", 30*time.Second)
	fmt.Println(errors.Is(err, lock.ErrClosed))
	// Output:
	// true
}

func ExampleDo_lost() {
	locker, srv, stop := newServerLocker()
	defer stop()
	ctx := context.Background()

	errStopped := errors.New("migration stopped half-way")
	err := lock.Do(ctx, locker, "migration", 3*time.Second, func(ctx context.Context) error {
		srv.ExpireNow("migration") // an operator deletes the key
		<-ctx.Done()               // the next refresh finds it gone
		fmt.Println("cause:", context.Cause(ctx))
		return errStopped
	}, lock.WithRefreshFraction(0.1))
	fmt.Println("lost:", errors.Is(err, lock.ErrLost))
	fmt.Println("expired:", errors.Is(err, lock.ErrExpired))
	fmt.Println("fn's error:", errors.Is(err, errStopped))
	// Output:
	// cause: lock: not held: expired
	// lost: true
	// expired: true
	// fn's error: true
}

func ExampleLock_StartRefresh() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	lk, err := locker.Obtain(ctx, "leader", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	// Keep the lock while leading, and stop leading as soon as it is lost.
	if err := lk.StartRefresh(ctx); err != nil {
		log.Fatal(err)
	}
	jobs := make(chan string, 1)
	jobs <- "rebalance"
	close(jobs)
	for job := range jobs {
		select {
		case <-lk.Done():
			fmt.Println("lost the lead:", lk.Err())
			return
		default:
			fmt.Println("leading:", job)
		}
	}
	// Release stops the refreshes first, and closes Done.
	if err := lk.Release(ctx); err != nil {
		log.Fatal(err)
	}
	<-lk.Done()
	fmt.Println("stepped down:", errors.Is(lk.Err(), lock.ErrNotHeld))
	// Output:
	// leading: rebalance
	// stepped down: true
}

// store is a resource that protects itself with fencing tokens: it accepts
// a write only with a token at least as large as any it has seen.
type store struct {
	mu      sync.Mutex
	highest int64
	value   string
}

var errStale = errors.New("stale fencing token: the writer's lock was taken over")

func (s *store) write(token int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		return errStale
	}
	s.highest, s.value = token, value
	return nil
}

func ExampleWithFencing() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()
	var db store

	// A obtains the lock with a fencing token, and writes with it.
	a, err := locker.Obtain(ctx, "invoice:42", 100*time.Millisecond, lock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	tokenA, _ := a.Fence()
	fmt.Println("A writes:", db.write(tokenA, "draft by A"))

	// A stalls (a GC pause, say) past its TTL; B obtains the lock.
	b, err := locker.Obtain(ctx, "invoice:42", time.Minute, lock.WithFencing(),
		lock.WithRetry(lock.Linear(10*time.Millisecond)))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Release(ctx)
	tokenB, _ := b.Fence()
	fmt.Println("B writes:", db.write(tokenB, "final by B"))

	// A wakes up, unaware, and writes again: the store rejects it.
	fmt.Println("A writes:", db.write(tokenA, "draft by A, again"))
	fmt.Println("stored:", db.value)
	// Output:
	// A writes: <nil>
	// B writes: <nil>
	// A writes: stale fencing token: the writer's lock was taken over
	// stored: final by B
}

// Handing a lock from one process to the next: the first chooses its token
// with NewToken, and gives the token and the metadata to the second, which
// obtains the lock again with both and so holds it from then on (as the
// locksmith CLI's acquire and release do).
func ExampleNewToken() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	token, err := lock.NewToken()
	if err != nil {
		log.Fatal(err)
	}
	first, err := locker.Obtain(ctx, "deploy", time.Minute, lock.WithToken(token), lock.WithMetadata("host=ci-7"))
	if err != nil {
		log.Fatal(err)
	}
	// ... the token and the metadata travel to the next process, secretly ...
	next, err := locker.Obtain(ctx, "deploy", time.Minute, lock.WithToken(token), lock.WithMetadata("host=ci-7"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(next.Token() == first.Token())
	fmt.Println(next.Release(ctx))
	// Output:
	// true
	// <nil>
}

// A semaphore of two permits: at most two holders of "partner-api" at once,
// each with a lease of its own. A third waits, or, without a retry policy,
// is refused.
func ExampleWithPermits() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	for _, worker := range []string{"a", "b", "c"} {
		lk, err := locker.Obtain(ctx, "partner-api", time.Minute, lock.WithPermits(2))
		if errors.Is(err, lock.ErrNotObtained) {
			fmt.Println(worker, "waits: both permits are held")
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		defer lk.Release(ctx)
		permit, _ := lk.Permit()
		fmt.Println(worker, "holds permit", permit)
	}

	// A caller that states another limit is refused, not given a second
	// semaphore.
	_, err := locker.Obtain(ctx, "partner-api", time.Minute, lock.WithPermits(5))
	fmt.Println(errors.Is(err, lock.ErrMismatch))
	// Output:
	// a holds permit 0
	// b holds permit 1
	// c waits: both permits are held
	// true
}

// A read-write lock: readers share it, a writer has it alone, and a writer
// that is done writing can go on reading without letting another writer in.
func ExampleLock_Downgrade() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	w, err := locker.Obtain(ctx, "catalog", time.Minute, lock.WithWrite())
	if err != nil {
		log.Fatal(err)
	}
	defer w.Release(ctx)
	_, err = locker.Obtain(ctx, "catalog", time.Minute, lock.WithRead())
	fmt.Println("a reader while the writer writes:", errors.Is(err, lock.ErrNotObtained)) // not obtained: "catalog" held by the writer

	if err := w.Downgrade(ctx); err != nil { // now a reader
		log.Fatal(err)
	}
	r, err := locker.Obtain(ctx, "catalog", time.Minute, lock.WithRead())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Release(ctx)
	fmt.Println("a reader after Downgrade: obtained")
	_, err = locker.Obtain(ctx, "catalog", time.Minute, lock.WithWrite())
	fmt.Println("another writer:", errors.Is(err, lock.ErrNotObtained))
	// Output:
	// a reader while the writer writes: true
	// a reader after Downgrade: obtained
	// another writer: true
}

func ExampleLock_SetMetadata() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()

	lk, err := locker.Obtain(ctx, "leader:billing", time.Minute, lock.WithMetadata("web-3 starting"))
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	// Ready to serve: say so to whoever inspects the lock, without letting
	// it go. An error matching lock.ErrNotHeld means the lock was lost.
	if err := lk.SetMetadata(ctx, "web-3 serving"); err != nil {
		log.Fatal(err)
	}
	st, err := locker.Inspect(ctx, "leader:billing")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lk.Metadata())
	fmt.Println(st.Metadata, st.Fingerprint == strategy.Fingerprint(lk.Token()))
	// Output:
	// web-3 serving
	// web-3 serving true
}

func ExampleLocker_List() {
	locker, stop := newLocker()
	defer stop()
	ctx := context.Background()
	for _, key := range []string{"report:daily", "report:weekly", "invoice:42"} {
		if _, err := locker.Obtain(ctx, key, time.Minute, lock.WithMetadata("host=web-3")); err != nil {
			log.Fatal(err)
		}
	}

	held, err := locker.List(ctx, "report:", 100)
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range held {
		fmt.Println(h.Key, h.State.Metadata, h.State.Waiters)
	}
	// Output:
	// report:daily host=web-3 0
	// report:weekly host=web-3 0
}

func ExampleLock_Guard() {
	locker, srv, stop := newServerLocker()
	defer stop()
	client := srv.GoRedisClient()
	ctx := context.Background()

	lk, err := locker.Obtain(ctx, "{orders}:42", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	// The write lands only while the lock is ours, in the same step as the
	// check: the data key shares the lock's hash tag, so it also runs on a
	// Cluster.
	const setState = `return redis.call('SET', KEYS[1], ARGV[1])`
	reply, err := lk.Guard(ctx, setState, []string{"{orders}:42:state"}, "paid")
	fmt.Println(reply, err)

	// Another holder takes the key, as after this holder paused past its
	// lease: the stale write changes nothing.
	srv.Overwrite("{orders}:42", "another holder")
	_, err = lk.Guard(ctx, setState, []string{"{orders}:42:state"}, "refunded")
	fmt.Println(errors.Is(err, lock.ErrTaken), client.Get(ctx, "{orders}:42:state").Val())
	// Output:
	// OK <nil>
	// true paid
}

func ExampleLock_GuardCommands() {
	locker, client, stop := newClientLocker()
	defer stop()
	ctx := context.Background()

	lk, err := locker.Obtain(ctx, "{orders}:42", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	// No Lua: a transaction that runs only while the lock is ours.
	replies, err := lk.GuardCommands(ctx, []string{"{orders}:42:state", "{orders}:42:events"},
		[]any{"SET", "{orders}:42:state", "paid"},
		[]any{"RPUSH", "{orders}:42:events", "paid"})
	fmt.Println(replies, err)
	fmt.Println(client.LRange(ctx, "{orders}:42:events", 0, -1).Val())
	// Output:
	// [OK 1] <nil>
	// [paid]
}
