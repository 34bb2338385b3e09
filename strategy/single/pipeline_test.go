package single_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// roundTrips is a go-redis hook that counts the round trips of a client:
// a command, or a pipeline of several, but those that set up a connection
// (HELLO, CLIENT SETINFO). Before a pipeline that starts with MULTI, it
// runs meanwhile, if set.
type roundTrips struct {
	mu        sync.Mutex
	n         int
	pipelines [][]string // each pipeline's command names
	meanwhile func()
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "hello" && name != "client" {
			r.mu.Lock()
			r.n++
			r.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		if names[0] == "hello" || names[0] == "client" {
			return next(ctx, cmds)
		}
		r.mu.Lock()
		r.n++
		r.pipelines = append(r.pipelines, names)
		meanwhile := r.meanwhile
		r.mu.Unlock()
		if meanwhile != nil && names[0] == "multi" {
			meanwhile()
		}
		return next(ctx, cmds)
	}
}

// count returns the round trips, and the pipelines' commands.
func (r *roundTrips) count() (int, [][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.pipelines
}

// reset zeroes the counts.
func (r *roundTrips) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n, r.pipelines = 0, nil
}

// planted sets n keys, each to its own value for a minute, and returns the
// batch that refreshes them to ttl.
func planted(t *testing.T, c *redis.Client, n int, ttl time.Duration) []strategy.Refresh {
	t.Helper()
	prefix := conformance.Key(t)
	batch := make([]strategy.Refresh, n)
	p := c.Pipeline()
	for i := range batch {
		batch[i] = strategy.Refresh{Key: fmt.Sprintf("%s:%d", prefix, i), Value: fmt.Sprintf("v%d", i), TTL: ttl}
		p.Set(context.Background(), batch[i].Key, batch[i].Value, time.Minute)
	}
	if _, err := p.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	return batch
}

// extended fails t unless every lock of batch was refreshed to its TTL.
func extended(t *testing.T, c *redis.Client, batch []strategy.Refresh) {
	t.Helper()
	for _, r := range batch {
		if r.Err != nil {
			t.Fatalf("Err of %s = %v, want nil", r.Key, r.Err)
		}
		if ttl := c.PTTL(context.Background(), r.Key).Val(); ttl <= time.Minute {
			t.Fatalf("TTL of %s = %v, want more than the minute it was set for (%v)", r.Key, ttl, r.TTL)
		}
	}
}

// TestBatchPipelined: a batch of more locks than one script carries
// (cas.PerScript) is sent in one round trip over a driver that pipelines;
// without scripts, each part is a transaction of two round trips; a lock
// taken or gone is reported so from either; and a transaction that keeps
// being aborted gives way to a transaction per lock.
func TestBatchPipelined(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	client := redistest.GoRedis(t, srv.Addr, 3)
	trips := &roundTrips{}
	client.AddHook(trips)
	const n = 2*cas.PerScript + 500 // three parts

	t.Run("with scripts, one round trip", func(t *testing.T) {
		s, err := single.NewStrategy(goredis.New(client))
		if err != nil {
			t.Fatal(err)
		}
		s.RefreshBatch(ctx, planted(t, client, 1, 2*time.Minute)) // the script loaded
		batch := planted(t, client, n, 2*time.Minute)
		trips.reset()
		s.RefreshBatch(ctx, batch)
		got, pipelines := trips.count()
		extended(t, client, batch)
		if want := [][]string{{"evalsha", "evalsha", "evalsha"}}; got != 1 || fmt.Sprint(pipelines) != fmt.Sprint(want) {
			t.Errorf("round trips for %d locks = %d, pipelines %v; want 1, %v", n, got, pipelines, want)
		}
	})
	t.Run("without scripts, two round trips per transaction", func(t *testing.T) {
		s, err := single.NewStrategy(driver.WithoutScripts(goredis.New(client)))
		if err != nil {
			t.Fatal(err)
		}
		batch := planted(t, client, n, 2*time.Minute)
		trips.reset()
		s.RefreshBatch(ctx, batch)
		got, pipelines := trips.count()
		extended(t, client, batch)
		if got != 6 || len(pipelines) != 6 {
			t.Errorf("round trips for %d locks in 3 transactions = %d, %d of them pipelines; want 6, 6", n, got, len(pipelines))
		}
	})
	for name, mark := range map[string]func(driver.Conn) driver.Conn{"scripts": withScripts, "without scripts": driver.WithoutScripts} {
		t.Run(name+", a lock taken or gone is reported so", func(t *testing.T) {
			s, err := single.NewStrategy(mark(goredis.New(client)))
			if err != nil {
				t.Fatal(err)
			}
			batch := planted(t, client, 3, 2*time.Minute)
			client.Set(ctx, batch[1].Key, "another owner", time.Minute)
			client.Del(ctx, batch[2].Key)
			s.RefreshBatch(ctx, batch)
			if batch[0].Err != nil {
				t.Errorf("held lock: Err = %v, want nil", batch[0].Err)
			}
			if !errors.Is(batch[1].Err, lock.ErrTaken) {
				t.Errorf("taken lock: Err = %v, want ErrTaken", batch[1].Err)
			}
			if !errors.Is(batch[2].Err, lock.ErrExpired) {
				t.Errorf("gone lock: Err = %v, want ErrExpired", batch[2].Err)
			}
			if v := client.Get(ctx, batch[1].Key).Val(); v != "another owner" {
				t.Errorf("taken lock's key = %q, want the other owner's, untouched", v)
			}
			if client.Exists(ctx, batch[2].Key).Val() != 0 {
				t.Errorf("gone lock's key exists, want it left gone")
			}
		})
	}
	t.Run("without scripts, a transaction aborted twice gives way to one per lock", func(t *testing.T) {
		s, err := single.NewStrategy(driver.WithoutScripts(goredis.New(client)))
		if err != nil {
			t.Fatal(err)
		}
		batch := planted(t, client, 5, 2*time.Minute)
		aborts := 0
		trips.meanwhile = func() { // the key changes, though its value stays: EXEC aborts
			if aborts < 2 {
				aborts++
				client.Set(ctx, batch[0].Key, batch[0].Value, redis.KeepTTL)
			}
		}
		defer func() { trips.meanwhile = nil }()
		trips.reset()
		s.RefreshBatch(ctx, batch)
		extended(t, client, batch)
		if aborts != 2 {
			t.Errorf("transactions aborted = %d, want 2", aborts)
		}
	})
}
