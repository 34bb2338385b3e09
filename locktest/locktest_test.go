package locktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

// ttl is the TTL of the keys the expiry tests write: long enough that a
// loaded machine still observes each key many times before it expires.
const ttl = 100 * time.Millisecond

// TestTTLNeverRunsShort: a key set with a TTL is there for the whole TTL
// after the SET was sent, and its PTTL never says less than that allows.
// The assertions bound the server's clock by the client's, so delays on a
// loaded machine can only make them easier to meet.
func TestTTLNeverRunsShort(t *testing.T) {
	c := locktest.NewServer(t).GoRedisClient()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 10 {
		sent := time.Now() // the server receives the SET after this
		if err := c.Set(ctx, "k", "v", ttl).Err(); err != nil {
			t.Fatal(err)
		}
		for {
			pttl, err := c.PTTL(ctx, "k").Result()
			if err != nil {
				t.Fatal(err)
			}
			elapsed := time.Since(sent) // at least what the server saw
			if pttl < 0 {               // gone
				if elapsed < ttl {
					t.Fatalf("key %d gone %v after its SET was sent, want at least %v", i, elapsed, ttl)
				}
				break
			}
			// PTTL counts whole milliseconds, rounded down.
			if min := ttl - elapsed - time.Millisecond; pttl < min {
				t.Fatalf("key %d: PTTL = %v %v after its SET was sent, want at least %v", i, pttl, elapsed, min)
			}
		}
	}
}

// TestTimeStandsStillInAScript: as on Redis, no key expires while a script
// runs, however long the script takes: a key that a script sets with a 1ms
// TTL is still there after thousands of the script's own commands.
func TestTimeStandsStillInAScript(t *testing.T) {
	c := locktest.NewServer(t).GoRedisClient()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const script = `redis.call('SET', KEYS[1], 'v', 'PX', 1)
for _ = 1, 20000 do
	redis.call('EXISTS', KEYS[1])
end
return redis.call('GET', KEYS[1])`
	got, err := c.Eval(ctx, script, []string{"k"}).Result()
	if err != nil || got != "v" {
		t.Fatalf("GET at the end of the script = %v, %v; want v, nil: the key expired while the script ran", got, err)
	}
}

// TestExpiresInRealTime: a key expires once its TTL has passed, with no
// call to make time pass.
func TestExpiresInRealTime(t *testing.T) {
	c := locktest.NewServer(t).GoRedisClient()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Set(ctx, "k", "v", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl)
	n, err := c.Exists(ctx, "k").Result()
	if err != nil || n != 0 {
		t.Fatalf("EXISTS after the TTL = %d, %v; want 0, nil", n, err)
	}
}

// TestDrivers: each one-line helper gives a working driver on its own
// server.
func TestDrivers(t *testing.T) {
	for name, conn := range map[string]func(testing.TB) driver.Conn{"GoRedis": locktest.GoRedis, "Redigo": locktest.Redigo} {
		t.Run(name, func(t *testing.T) {
			locker, err := single.New(conn(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			lk, err := locker.Obtain(ctx, "k", time.Minute)
			if err != nil {
				t.Fatalf("Obtain = %v, want nil", err)
			}
			if _, err := locker.Obtain(ctx, "k", time.Minute); !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("second Obtain = %v, want ErrNotObtained", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil", err)
			}
		})
	}
}

// TestClose: Close closes the clients the server handed out, stops the
// server, and may be called again.
func TestClose(t *testing.T) {
	s, err := locktest.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	c := s.GoRedisClient()
	p := s.RedigoPool()
	s.Close()
	s.Close()
	if err := c.Ping(context.Background()).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("go-redis Ping after Close = %v, want redis.ErrClosed", err)
	}
	if _, err := p.GetContext(context.Background()); err == nil {
		t.Errorf("redigo GetContext after Close = nil, want an error")
	}
	other := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer other.Close()
	if err := other.Ping(context.Background()).Err(); err == nil {
		t.Errorf("Ping of a closed server = nil, want an error")
	}
}
