// Command demo shows locks at work with no Redis to set up: workers contend
// for one lock on an embedded in-process server and print what happened.
//
//	go run ./cmd/demo                       # embedded server
//	go run ./cmd/demo -addr 127.0.0.1:6380  # a Redis of your own
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/internal/testing/embedded"
)

func main() {
	addr := flag.String("addr", "", "Redis address (default: an embedded in-process server)")
	workers := flag.Int("workers", 5, "workers contending for the lock")
	flag.Parse()
	log.SetFlags(0)

	locker, closeLocker, err := embedded.Single(*addr)
	if err != nil {
		log.Fatal(err)
	}
	defer closeLocker()
	ctx := context.Background()
	if err := run(ctx, locker, *workers); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(ctx context.Context, locker *lock.Locker, workers int) error {
	start := time.Now()
	since := func() string { return fmt.Sprintf("%6.1fms", float64(time.Since(start).Microseconds())/1000) }
	key := "demo:report"

	fmt.Printf("\n1. %d workers contend for %q; each holds it for 20ms. They wait in turn,\n   woken by the release: their timers (1s) are only the safety net\n", workers, key)
	var (
		wg     sync.WaitGroup
		inside atomic.Int32
		errs   = make(chan error, workers)
	)
	for w := 1; w <= workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			asked := time.Now()
			var woken []string // why it woke, each time: message, subscribed, resubscribed or timer
			lk, err := locker.Obtain(ctx, key, 5*time.Second,
				lock.WithRetry(lock.Linear(time.Second)),
				lock.WithMetadata(fmt.Sprintf("worker=%d", w)),
				lock.WithHooks(&lock.Hooks{Wait: func(_ context.Context, e lock.Event) {
					if e.Op == "woken" {
						woken = append(woken, e.Reason)
					}
				}}))
			if err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
				return
			}
			if inside.Add(1) != 1 {
				errs <- fmt.Errorf("worker %d: two holders at once", w)
			}
			fmt.Printf("%s  worker %d obtained it after waiting %v (%s), woken by %v\n", since(), w, time.Since(asked).Round(time.Millisecond), lk.Metadata(), woken)
			time.Sleep(20 * time.Millisecond)
			inside.Add(-1)
			if err := lk.Release(ctx); err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("%s  all %d workers held the lock in turn, never two at once\n", since(), workers)

	fmt.Printf("\n2. A holder crashes (never releases) with a 200ms TTL\n")
	crashed, err := locker.Obtain(ctx, key, 200*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Printf("%s  the crashed holder's lock is valid for %v\n", since(), time.Until(crashed.ValidUntil()).Round(10*time.Millisecond))
	_, err = locker.Obtain(ctx, key, time.Second)
	fmt.Printf("%s  an impatient worker (no retry): %v\n", since(), err)
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = locker.Obtain(wctx, key, time.Second, lock.WithRetry(lock.Linear(10*time.Millisecond)))
	cancel()
	fmt.Printf("%s  a worker that waits 50ms: %v\n", since(), err)
	next, err := locker.Obtain(ctx, key, time.Second, lock.WithRetry(lock.Linear(10*time.Millisecond)))
	if err != nil {
		return err
	}
	fmt.Printf("%s  a patient worker obtained it once the TTL freed it\n", since())
	err = crashed.Release(ctx)
	fmt.Printf("%s  the crashed holder comes back and releases: %v (errors.Is ErrNotHeld: %t)\n", since(), err, errors.Is(err, lock.ErrNotHeld))
	if err := next.Release(ctx); err != nil {
		return err
	}
	fmt.Printf("%s  the patient worker releases: the lock is free\n", since())
	return nil
}
