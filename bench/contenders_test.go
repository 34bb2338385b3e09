package bench

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	redsyncredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/driver/redigo"
	rueidisdriver "github.com/locksmith-go/lock/driver/rueidis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy/redlock"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
	"github.com/locksmith-go/lock/strategy/single"
)

// Settings that every contender shares.
const (
	// ttl is long enough never to expire during a run: every lock is
	// released by its holder.
	ttl = 10 * time.Second
	// retryEvery is how often a polling contender tries again, in the
	// contention benchmark: a fixed interval is the one policy that every
	// library expresses identically.
	retryEvery = time.Millisecond
	// notifyTimer is the retry delay of locksmith's single when it waits
	// for notifications: the longest a waiter sleeps without a message,
	// the safety net for a lost one. It is above the fair wait of the
	// largest contention case on a fast machine (63 holds of 1 ms and
	// their handoffs), so that a timer seldom fires before the message;
	// see docs/design/performance.md.
	notifyTimer = 200 * time.Millisecond
	// nodeTimeout bounds one Redlock node's answer: redsync's bound at
	// this TTL (5% of it), rather than the default 1%, which a loaded
	// two-core machine can exceed.
	nodeTimeout = ttl / 20
)

// Errors of the contenders that report no error of their own.
var (
	errNotObtained = errors.New("bench: not obtained")
	errNotHeld     = errors.New("bench: not held at release")
)

// A mutex is one lock implementation under test, behind the least
// interface that all of them fit.
type mutex interface {
	// obtain locks key for ttl. It makes one attempt, or with wait retries
	// every retryEvery until ctx ends.
	obtain(ctx context.Context, key string, wait bool) (held, error)
}

// held is an obtained lock.
type held interface {
	Release(ctx context.Context) error
}

// The drivers, whose names lead the benchmarks' names.
const (
	goredisDriver = "goredis"
	redigoDriver  = "redigo"
	rueidisDriver = "rueidis"
)

// drivers are the drivers, in the order of the benchmarks.
var drivers = []string{goredisDriver, redigoDriver, rueidisDriver}

// A contender is a named way to build a mutex.
type contender struct {
	driver string // goredis, redigo or rueidis; the raw baseline of the same driver is its reference
	name   string // raw, single, redlock-5, bsm-redislock, ...
	nodes  int    // how many servers it locks on
	// new builds the mutex over the servers at addrs, counting the
	// commands its clients send and the wake-ups of its waiters into cs
	// when cs is not nil.
	new func(tb testing.TB, addrs []string, cs *counters) mutex
	// uncontendedOnly leaves the contender out of the contention benchmark,
	// contendedOnly out of the others (it differs only in how it waits).
	uncontendedOnly, contendedOnly bool
	// notifies says that the contender waits for notifications, and needs
	// a driver that can subscribe.
	notifies bool
}

// contenders returns every contender, the raw baselines first. Those over
// rueidis run uncontended only: the contention benchmark counts the
// commands that clients send, and rueidis has no hooks to count them.
func contenders() []contender {
	var cs []contender
	for _, d := range drivers {
		counted := d != rueidisDriver
		cs = append(cs,
			contender{driver: d, name: "raw", nodes: 1, uncontendedOnly: !counted, new: newRaw(d)},
			contender{driver: d, name: "single", nodes: 1, notifies: true, uncontendedOnly: !counted, new: func(tb testing.TB, addrs []string, cs *counters) mutex {
				l, err := single.New(conn(tb, d, addrs[0], cs))
				return locksmith(tb, l, err, cs, lock.WithRetry(lock.Linear(notifyTimer)))
			}},
			contender{driver: d, name: "single-noscript", nodes: 1, uncontendedOnly: true, new: func(tb testing.TB, addrs []string, cs *counters) mutex {
				l, err := single.New(driver.WithoutScripts(conn(tb, d, addrs[0], cs)))
				return locksmith(tb, l, err, cs)
			}},
		)
		if d == rueidisDriver {
			cs = append(cs, contender{driver: d, name: "raw-watch", nodes: 1, uncontendedOnly: true, new: func(tb testing.TB, addrs []string, _ *counters) mutex {
				return rawRueidisWatch{rawRueidis{redistest.Rueidis(tb, addrs[0])}}
			}})
		}
		if counted {
			cs = append(cs, contender{driver: d, name: "single-poll", nodes: 1, contendedOnly: true, new: func(tb testing.TB, addrs []string, cs *counters) mutex {
				l, err := single.New(conn(tb, d, addrs[0], cs))
				return locksmith(tb, l, err, cs, lock.WithPolling(), lock.WithRetry(lock.Linear(retryEvery)))
			}})
		}
		if d == goredisDriver {
			cs = append(cs,
				contender{driver: d, name: "setnx-getset", nodes: 1, new: func(tb testing.TB, addrs []string, cs *counters) mutex {
					l, err := setnxgetset.New(conn(tb, d, addrs[0], cs))
					return locksmith(tb, l, err, cs, lock.WithPolling(), lock.WithRetry(lock.Linear(retryEvery)))
				}},
				contender{driver: d, name: "otel-noop", nodes: 1, new: newOtel(false), uncontendedOnly: true},
				contender{driver: d, name: "otel-sdk", nodes: 1, new: newOtel(true), uncontendedOnly: true},
				contender{driver: d, name: "otel-floor", nodes: 1, new: newOtelFloor, uncontendedOnly: true},
				contender{driver: d, name: "bsm-redislock", nodes: 1, new: newBSM(retryEvery)},
				contender{driver: d, name: "bsm-redislock-10ms", nodes: 1, contendedOnly: true, new: newBSM(10 * time.Millisecond)},
				contender{driver: d, name: "redsync-default", nodes: 1, contendedOnly: true, new: newRedsync(d, false)},
			)
		}
		for _, n := range []int{3, 5} {
			cs = append(cs,
				contender{driver: d, name: "redlock-" + strconv.Itoa(n), nodes: n, uncontendedOnly: !counted, new: func(tb testing.TB, addrs []string, cs *counters) mutex {
					conns := make([]driver.Conn, len(addrs))
					for i, a := range addrs {
						conns[i] = conn(tb, d, a, cs)
					}
					l, err := redlock.New(conns, redlock.WithNodeTimeout(nodeTimeout))
					return locksmith(tb, l, err, cs, lock.WithPolling(), lock.WithRetry(lock.Linear(retryEvery)))
				}},
			)
			if counted { // redsync's rueidis pool is a module of its own, not benchmarked
				cs = append(cs, contender{driver: d, name: "redsync-" + strconv.Itoa(n), nodes: n, new: newRedsync(d, true)})
			}
		}
	}
	return cs
}

// goRedis returns a go-redis client of addr (RESP3, its default), with the
// harness's settings: no retries, and ctx's deadline honoured.
func goRedis(tb testing.TB, addr string, cs *counters) *redis.Client {
	c := redistest.GoRedis(tb, addr, 3)
	if cs != nil {
		c.AddHook(hook{&cs.sent})
	}
	return c
}

// redigoPool returns a redigo pool of addr.
func redigoPool(tb testing.TB, addr string, cs *counters) *redigoredis.Pool {
	p := redistest.Redigo(tb, addr)
	if cs != nil {
		dial := p.DialContext
		p.DialContext = func(ctx context.Context) (redigoredis.Conn, error) {
			c, err := dial(ctx)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &cs.sent}, nil
		}
	}
	return p
}

// conn returns a locksmith driver of addr.
func conn(tb testing.TB, d, addr string, cs *counters) driver.Conn {
	switch d {
	case goredisDriver:
		c := goredis.New(goRedis(tb, addr, cs))
		if cs == nil {
			return c
		}
		return countSubscriptions(c, &cs.sent)
	case rueidisDriver:
		return rueidisdriver.New(redistest.Rueidis(tb, addr))
	}
	return redigo.New(redigoPool(tb, addr, cs), redigo.WithAddr(addr))
}

// subscribes reports whether locksmith's driver d can subscribe, so that
// waiters can be notified.
func subscribes(tb testing.TB, d, addr string) bool {
	_, ok := conn(tb, d, addr, nil).(driver.Subscriber)
	return ok
}

// locksmithMutex obtains with a locksmith Locker.
type locksmithMutex struct {
	l    *lock.Locker
	wait []lock.Option // the options of an Obtain that waits
}

// locksmith returns the mutex of l, whose Obtain waits with the options
// wait, and counts its wake-ups into cs when cs is not nil.
func locksmith(tb testing.TB, l *lock.Locker, err error, cs *counters, wait ...lock.Option) mutex {
	if err != nil {
		tb.Fatal(err)
	}
	if cs != nil {
		wait = append(wait, lock.WithHooks(cs.hooks()))
	}
	return locksmithMutex{l, wait}
}

func (m locksmithMutex) obtain(ctx context.Context, key string, wait bool) (held, error) {
	var lk *lock.Lock
	var err error
	if wait {
		lk, err = m.l.Obtain(ctx, key, ttl, m.wait...)
	} else {
		lk, err = m.l.Obtain(ctx, key, ttl)
	}
	if err != nil {
		return nil, err
	}
	return lk, nil
}

// newOtel returns the single strategy over go-redis, wrapped by lockotel:
// with no-op providers, or with a recording SDK that samples every span and
// records it in full, and a metric reader (the export pipeline is left
// out: its cost is the same for any instrumentation).
func newOtel(recording bool) func(tb testing.TB, addrs []string, cs *counters) mutex {
	return func(tb testing.TB, addrs []string, cs *counters) mutex {
		l, err := single.New(conn(tb, goredisDriver, addrs[0], cs))
		if err != nil {
			tb.Fatal(err)
		}
		opts := []lockotel.Option{lockotel.WithTracerProvider(tracenoop.NewTracerProvider()), lockotel.WithMeterProvider(metricnoop.NewMeterProvider())}
		if recording {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tb.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
			opts = []lockotel.Option{lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp)}
		}
		return locksmith(tb, lockotel.NewLocker(l, opts...), nil, cs, lock.WithRetry(lock.Linear(retryEvery)))
	}
}

// discard is a span processor that drops the spans it is handed.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// newBSM returns bsm/redislock, retrying every backoff when waiting.
func newBSM(backoff time.Duration) func(tb testing.TB, addrs []string, cs *counters) mutex {
	return func(tb testing.TB, addrs []string, cs *counters) mutex {
		return bsm{redislock.New(goRedis(tb, addrs[0], cs)), &redislock.Options{RetryStrategy: redislock.LinearBackoff(backoff)}}
	}
}

// bsm obtains with bsm/redislock.
type bsm struct {
	c     *redislock.Client
	retry *redislock.Options
}

func (m bsm) obtain(ctx context.Context, key string, wait bool) (held, error) {
	var opt *redislock.Options // NoRetry
	if wait {
		opt = m.retry
	}
	lk, err := m.c.Obtain(ctx, key, ttl, opt)
	if err != nil {
		return nil, err
	}
	return lk, nil
}

// redsyncMutex obtains with go-redsync/redsync, with its defaults but for
// the expiry and, when waiting, unlimited tries (its default gives up after
// 32) and, with fast, a retry every retryEvery (its default waits 50 to
// 250 ms at random). A redsync Mutex holds one lock at a time, so every
// obtain makes a new one, as a server handling requests does.
type redsyncMutex struct {
	rs         *redsync.Redsync
	once, wait []redsync.Option
}

func newRedsync(d string, fast bool) func(tb testing.TB, addrs []string, cs *counters) mutex {
	return func(tb testing.TB, addrs []string, cs *counters) mutex {
		pools := make([]redsyncredis.Pool, len(addrs))
		for i, a := range addrs {
			if d == goredisDriver {
				pools[i] = redsyncgoredis.NewPool(goRedis(tb, a, cs))
			} else {
				pools[i] = redsyncredigo.NewPool(redigoPool(tb, a, cs))
			}
		}
		wait := []redsync.Option{redsync.WithExpiry(ttl), redsync.WithTries(math.MaxInt32)}
		if fast {
			wait = append(wait, redsync.WithRetryDelay(retryEvery))
		}
		return redsyncMutex{rs: redsync.New(pools...), once: []redsync.Option{redsync.WithExpiry(ttl)}, wait: wait}
	}
}

func (m redsyncMutex) obtain(ctx context.Context, key string, wait bool) (held, error) {
	var err error
	var mu *redsync.Mutex
	if wait {
		mu = m.rs.NewMutex(key, m.wait...)
		err = mu.LockContext(ctx)
	} else {
		mu = m.rs.NewMutex(key, m.once...)
		err = mu.TryLockContext(ctx)
	}
	if err != nil {
		return nil, err
	}
	return redsyncLock{mu}, nil
}

type redsyncLock struct{ m *redsync.Mutex }

func (l redsyncLock) Release(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if err == nil && !ok {
		return errNotHeld
	}
	return err
}

// The raw baseline: what a hand-written lock does, and no more. It draws a
// 128-bit token from crypto/rand, acquires with SET key token NX PX ttl and
// releases with EVALSHA of a compare-and-delete script (loaded beforehand):
// two round trips.

// releaseSrc is the raw baseline's compare-and-delete script.
const releaseSrc = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`

var releaseSHA = func() string {
	sum := sha1.Sum([]byte(releaseSrc))
	return hex.EncodeToString(sum[:])
}()

func newRaw(d string) func(tb testing.TB, addrs []string, cs *counters) mutex {
	return func(tb testing.TB, addrs []string, cs *counters) mutex {
		ctx := context.Background()
		switch d {
		case goredisDriver:
			c := goRedis(tb, addrs[0], cs)
			if err := c.ScriptLoad(ctx, releaseSrc).Err(); err != nil {
				tb.Fatal(err)
			}
			return rawGoRedis{c}
		case rueidisDriver:
			c := redistest.Rueidis(tb, addrs[0])
			if err := c.Do(ctx, c.B().ScriptLoad().Script(releaseSrc).Build()).Error(); err != nil {
				tb.Fatal(err)
			}
			return rawRueidis{c}
		}
		m := rawRedigo{redigoPool(tb, addrs[0], cs)}
		if _, err := m.do("SCRIPT", "LOAD", releaseSrc); err != nil {
			tb.Fatal(err)
		}
		return m
	}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: it crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// retry waits retryEvery before another attempt, or returns errNotObtained
// when not waiting, or ctx's error once it ended.
func retry(ctx context.Context, wait bool) error {
	if !wait {
		return errNotObtained
	}
	time.Sleep(retryEvery)
	return ctx.Err()
}

// released turns the reply of the release script into an error.
func released(n int64, err error) error {
	if err == nil && n != 1 {
		return errNotHeld
	}
	return err
}

type rawGoRedis struct{ c *redis.Client }

func (m rawGoRedis) obtain(ctx context.Context, key string, wait bool) (held, error) {
	token := newToken()
	for {
		ok, err := m.c.SetNX(ctx, key, token, ttl).Result()
		switch {
		case err != nil:
			return nil, err
		case ok:
			return &rawGoRedisLock{m.c, key, token}, nil
		}
		if err := retry(ctx, wait); err != nil {
			return nil, err
		}
	}
}

type rawGoRedisLock struct {
	c          *redis.Client
	key, token string
}

func (l *rawGoRedisLock) Release(ctx context.Context) error {
	return released(l.c.EvalSha(ctx, releaseSHA, []string{l.key}, l.token).Int64())
}

type rawRedigo struct{ p *redigoredis.Pool }

// do runs one command on a pooled connection, the plain redigo way: Do,
// with no context (DoContext would start a goroutine per command).
func (m rawRedigo) do(cmd string, args ...any) (any, error) {
	c := m.p.Get()
	defer c.Close()
	return c.Do(cmd, args...)
}

func (m rawRedigo) obtain(ctx context.Context, key string, wait bool) (held, error) {
	token := newToken()
	for {
		reply, err := m.do("SET", key, token, "NX", "PX", ttl.Milliseconds())
		switch {
		case err != nil:
			return nil, err
		case reply != nil:
			return &rawRedigoLock{m, key, token}, nil
		}
		if err := retry(ctx, wait); err != nil {
			return nil, err
		}
	}
}

type rawRedigoLock struct {
	m          rawRedigo
	key, token string
}

func (l *rawRedigoLock) Release(context.Context) error {
	return released(redigoredis.Int64(l.m.do("EVALSHA", releaseSHA, 1, l.key, l.token)))
}

type rawRueidis struct{ c rueidis.Client }

func (m rawRueidis) obtain(ctx context.Context, key string, wait bool) (held, error) {
	token := newToken()
	for {
		err := m.c.Do(ctx, m.c.B().Set().Key(key).Value(token).Nx().PxMilliseconds(ttl.Milliseconds()).Build()).Error()
		switch {
		case err == nil:
			return &rawRueidisLock{m.c, key, token}, nil
		case !rueidis.IsRedisNil(err):
			return nil, err
		}
		if err := retry(ctx, wait); err != nil {
			return nil, err
		}
	}
}

type rawRueidisLock struct {
	c          rueidis.Client
	key, token string
}

func (l *rawRueidisLock) Release(ctx context.Context) error {
	return released(l.c.Do(ctx, l.c.B().Evalsha().Sha1(releaseSHA).Numkeys(1).Key(l.key).Arg(l.token).Build()).AsInt64())
}

// rawRueidisWatch is the raw rueidis client releasing without a script, as
// single without scripts does on a server without DELEX or DELIFEQ (Redis
// 7.0): WATCH and GET, then MULTI, DEL and EXEC, in two pipelines over a
// dedicated connection. It is the floor of single-noscript's release over
// rueidis, whose raw baseline multiplexes every goroutine over one
// connection, which a WATCH cannot share.
type rawRueidisWatch struct{ rawRueidis }

func (m rawRueidisWatch) obtain(ctx context.Context, key string, wait bool) (held, error) {
	h, err := m.rawRueidis.obtain(ctx, key, wait)
	if err != nil {
		return nil, err
	}
	return rawRueidisWatchLock{h.(*rawRueidisLock)}, nil
}

type rawRueidisWatchLock struct{ *rawRueidisLock }

func (l rawRueidisWatchLock) Release(ctx context.Context) error {
	return l.c.Dedicated(func(c rueidis.DedicatedClient) error {
		r := c.DoMulti(ctx, c.B().Watch().Key(l.key).Build(), c.B().Get().Key(l.key).Build())
		if v, err := r[1].ToString(); err != nil || v != l.token {
			c.Do(ctx, c.B().Unwatch().Build())
			if err == nil || rueidis.IsRedisNil(err) {
				err = errNotHeld
			}
			return err
		}
		r = c.DoMulti(ctx, c.B().Multi().Build(), c.B().Del().Key(l.key).Build(), c.B().Exec().Build())
		return r[2].Error()
	})
}
