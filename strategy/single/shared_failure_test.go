package single_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/single"
)

// Failure behaviour of semaphores and read-write locks against a real
// server that stops answering or restarts empty. The conformance suite
// checks their properties on a live server (and on a Cluster, each lock's
// keys in its slot); these cases add the server's faults. The contexts are
// hang detectors, never timings.

// sharedLocker returns a single Locker over a go-redis client of its own,
// as another process would have.
func sharedLocker(t *testing.T, addr string) *lock.Locker {
	t.Helper()
	l, err := single.New(goredis.New(redistest.GoRedis(t, addr, 3)))
	if err != nil {
		t.Fatalf("single.New: %v", err)
	}
	return l
}

// TestSemaphoreServerPaused: contenders for a semaphore of 2 go on while the
// server is paused for a second, then resumed. Never more than 2 are inside;
// an Obtain that meets the pause fails by its deadline, saying that Redis
// did not answer (never "not obtained" when no attempt found the permits
// held); and once every holder has released (retrying what the pause
// refused), no key of the semaphore remains: acquisitions that reached the
// server during the pause, after their callers gave up, are deleted by
// the Locker's clean-up. With LOCKSMITH_FULL=1, the same on a Cluster,
// whose master of the key's slot is paused.
func TestSemaphoreServerPaused(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	t.Run("one server", func(t *testing.T) {
		srv := redistest.Start(t, 1)[0]
		newLocker := func(t *testing.T) *lock.Locker { return sharedLocker(t, srv.Addr) }
		semaphorePaused(t, newLocker, srv, redistest.GoRedis(t, srv.Addr, 3), conformance.Key(t))
	})
	t.Run("a Cluster master", func(t *testing.T) {
		redistest.RequireFull(t, "a Cluster")
		cluster := redistest.StartCluster(t, 3)
		newLocker := func(t *testing.T) *lock.Locker {
			l, err := single.New(goredis.New(redistest.GoRedisCluster(t, cluster.Addrs())))
			if err != nil {
				t.Fatalf("single.New: %v", err)
			}
			return l
		}
		key := conformance.Key(t)
		master := cluster.Owner(t, cluster.KeySlot(t, key))
		semaphorePaused(t, newLocker, master, redistest.GoRedisCluster(t, cluster.Addrs()), key)
	})
}

// semaphorePaused is TestSemaphoreServerPaused on the server srv, which
// holds key, with Lockers from newLocker; rdb reads the keys left.
func semaphorePaused(t *testing.T, newLocker func(*testing.T) *lock.Locker, srv *redistest.Server, rdb redis.UniversalClient, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const permits, contenders = 2, 4
	var (
		inside, most, broken atomic.Int64
		obtained, unanswered atomic.Int64
		paused               = make(chan struct{})
		wg                   sync.WaitGroup
	)
	for range contenders {
		l := newLocker(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 60 || !closed(paused); i++ {
				octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
				lk, err := l.Obtain(octx, key, 10*time.Second, lock.WithPermits(permits), lock.WithRetry(lock.Linear(5*time.Millisecond)))
				ocancel()
				switch {
				case err == nil:
				case errors.Is(err, lock.ErrNoAnswer):
					unanswered.Add(1)
					continue
				case errors.Is(err, lock.ErrNotObtained):
					continue
				default:
					t.Errorf("Obtain = %v, want a lock, ErrNotObtained or ErrNoAnswer", err)
					return
				}
				obtained.Add(1)
				n := inside.Add(1)
				if n > permits {
					broken.Add(1)
				}
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				// A Release that got no answer may have reached the server
				// all the same: the next finds the permit released.
				for again := false; ; again = true {
					rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
					err := lk.Release(rctx)
					rcancel()
					if errors.Is(err, lock.ErrNoAnswer) {
						continue
					}
					if err != nil && !(again && errors.Is(err, lock.ErrExpired)) {
						t.Errorf("Release = %v, want nil (or, after a Release that got no answer, ErrExpired)", err)
					}
					break
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the contention start
	srv.Pause()
	t.Run("an Obtain during the pause", func(t *testing.T) {
		octx, ocancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer ocancel()
		_, err := newLocker(t).Obtain(octx, "{"+key+"}:other", time.Minute, lock.WithPermits(permits))
		if !errors.Is(err, lock.ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain of a free semaphore while the server is paused = %v, want ErrNoAnswer and DeadlineExceeded, not ErrNotObtained", err)
		}
	})
	time.Sleep(time.Second)
	srv.Resume()
	close(paused)
	wg.Wait()
	t.Logf("%d permits obtained, %d Obtains unanswered, at most %d inside at once", obtained.Load(), unanswered.Load(), most.Load())
	if broken.Load() > 0 {
		t.Errorf("%d entries found more than %d holders inside, want none", broken.Load(), permits)
	}
	noSharedKeysLeft(t, ctx, rdb, key, "{"+key+"}:other")
}

// closed reports whether c is closed.
func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// noSharedKeysLeft fails t unless, within a hang detector's bound, no key
// of the shared locks on keys (their holders, hash, and queue) remains,
// as rdb reads them.
func noSharedKeysLeft(t *testing.T, ctx context.Context, rdb redis.UniversalClient, keys ...string) {
	t.Helper()
	var names []string
	for _, k := range keys {
		s, _ := cas.NewShared(k, false)
		names = append(names, s.Key, s.M, s.Q, s.W)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		left := 0
		for _, name := range names { // one by one: on a Cluster, the keys of two names are in two slots
			left += int(rdb.Exists(ctx, name).Val())
		}
		if left == 0 {
			return
		}
	}
	var left []string
	for _, name := range names {
		if rdb.Exists(ctx, name).Val() == 1 {
			left = append(left, name)
		}
	}
	t.Errorf("keys left after every holder released: %s, want none", strings.Join(left, ", "))
}

// TestReadWriteServerRestartedEmpty: the server restarts empty while a
// writer holds a read-write lock and a reader waits: the writer finds its
// lease gone (ErrExpired), the reader obtains the lock (trying again
// after a refused connection, as its caller would), and a new writer is
// refused while it reads.
func TestReadWriteServerRestartedEmpty(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv := redistest.Start(t, 1)[0]
	key := conformance.Key(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := sharedLocker(t, srv.Addr).Obtain(ctx, key, time.Minute, lock.WithWrite())
	if err != nil {
		t.Fatalf("the writer's Obtain = %v, want a lock", err)
	}
	read := make(chan error, 1)
	go func() {
		// A retry while the server is down gets the truth, its connection
		// refused (or no answer), and the caller tries again.
		l := sharedLocker(t, srv.Addr)
		lk, err := l.Obtain(ctx, key, time.Minute, lock.WithRead(), lock.WithRetry(lock.Linear(20*time.Millisecond)))
		for errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, lock.ErrNoAnswer) {
			time.Sleep(20 * time.Millisecond)
			lk, err = l.Obtain(ctx, key, time.Minute, lock.WithRead(), lock.WithRetry(lock.Linear(20*time.Millisecond)))
		}
		if err == nil {
			if _, err := sharedLocker(t, srv.Addr).Obtain(ctx, key, time.Minute, lock.WithWrite()); !errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("a writer's Obtain while the reader reads = %v, want ErrNotObtained", err)
			}
			err = lk.Release(ctx)
		}
		read <- err
	}()
	if err := srv.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := <-read; err != nil {
		t.Fatalf("the reader after the restart = %v, want the lock, then released", err)
	}
	if err := w.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrExpired) {
		t.Errorf("the writer's Refresh after the restart = %v, want ErrExpired", err)
	}
	noSharedKeysLeft(t, ctx, redistest.GoRedis(t, srv.Addr, 3), key)
}
