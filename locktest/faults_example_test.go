package locktest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

// newLocker starts an embedded server and returns a Locker on it.
func newLocker() (*lock.Locker, *locktest.Server) {
	srv, err := locktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	locker, err := single.New(goredis.New(srv.GoRedisClient()))
	if err != nil {
		log.Fatal(err)
	}
	return locker, srv
}

// job is the code under test: it works under the lock until its context
// ends, and says why it stopped.
func job(ctx context.Context, locker *lock.Locker, started chan<- struct{}) error {
	return lock.Do(ctx, locker, "report:daily", time.Second, func(ctx context.Context) error {
		close(started)
		<-ctx.Done() // the work, which stops when the lock is lost
		return context.Cause(ctx)
	})
}

// A test of "my job stops when its lock is lost": the test expires the
// job's lock half-way, with no sleep, and the job stops at its next
// refresh, saying why.
func ExampleServer_ExpireNow() {
	locker, srv := newLocker()
	defer srv.Close()

	started := make(chan struct{})
	go func() {
		<-started
		srv.ExpireNow("report:daily")
	}()
	err := job(context.Background(), locker, started)
	fmt.Println(errors.Is(err, lock.ErrLost), errors.Is(err, lock.ErrExpired))
	// Output: true true
}

// The same when another holder takes the lock: the job stops, and the
// error says the lock was taken.
func ExampleServer_Overwrite() {
	locker, srv := newLocker()
	defer srv.Close()

	started := make(chan struct{})
	go func() {
		<-started
		srv.Overwrite("report:daily", "another holder's token")
	}()
	err := job(context.Background(), locker, started)
	fmt.Println(errors.Is(err, lock.ErrLost), errors.Is(err, lock.ErrTaken))
	// Output: true true
}

// A holder that crashed leaves its lock until its TTL runs out: the test
// moves the server's clock past it rather than sleeping, and the next
// worker obtains the lock at once.
func ExampleServer_FastForward() {
	locker, srv := newLocker()
	defer srv.Close()
	ctx := context.Background()

	if _, err := locker.Obtain(ctx, "report:daily", time.Minute); err != nil { // never released
		log.Fatal(err)
	}
	_, err := locker.Obtain(ctx, "report:daily", time.Minute)
	fmt.Println("before:", errors.Is(err, lock.ErrNotObtained))

	srv.FastForward(time.Minute)
	lk, err := locker.Obtain(ctx, "report:daily", time.Minute)
	fmt.Println("after:", err)
	_ = lk.Release(ctx)
	// Output:
	// before: true
	// after: <nil>
}

// A server that stops answering: the call ends with its context, and its
// error says that Redis did not answer, not that someone holds the lock.
func ExampleServer_Pause() {
	locker, srv := newLocker()
	defer srv.Close()

	srv.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := locker.Obtain(ctx, "invoice:42", time.Minute)
	fmt.Println(errors.Is(err, lock.ErrNoAnswer), errors.Is(err, lock.ErrNotObtained))

	srv.Resume()
	lk, err := locker.Obtain(context.Background(), "invoice:42", time.Minute, lock.WithRetry(lock.Linear(10*time.Millisecond)))
	fmt.Println(err)
	_ = lk.Release(context.Background())
	// Output:
	// true false
	// <nil>
}

// A server whose ACL denies scripts: single finds it at its first contact
// and locks without them, while a semaphore, which needs scripts, is
// refused with an error that says so.
func ExampleServer_Refuse() {
	locker, srv := newLocker()
	defer srv.Close()
	ctx := context.Background()

	undo := srv.Refuse("EVALSHA")
	defer undo()
	defer srv.Refuse("EVAL")()

	lk, err := locker.Obtain(ctx, "invoice:42", time.Minute)
	fmt.Println(err)
	fmt.Println(lk.Release(ctx))
	_, err = locker.Obtain(ctx, "pool", time.Minute, lock.WithPermits(3))
	fmt.Println(errors.Is(err, errors.ErrUnsupported))
	// Output:
	// <nil>
	// <nil>
	// true
}
