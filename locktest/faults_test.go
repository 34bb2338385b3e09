package locktest_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/locktest"
)

func TestExpireNow(t *testing.T) {
	srv := locktest.NewServer(t)
	c := srv.GoRedisClient()
	ctx := context.Background()
	c.Set(ctx, "k", "v", time.Minute)
	t.Run("a key that is there: gone, and true", func(t *testing.T) {
		if !srv.ExpireNow("k") {
			t.Errorf("ExpireNow = false, want true")
		}
		if n := c.Exists(ctx, "k").Val(); n != 0 {
			t.Errorf("EXISTS = %d, want 0", n)
		}
	})
	t.Run("a key that is not: false", func(t *testing.T) {
		if srv.ExpireNow("k") {
			t.Errorf("ExpireNow = true, want false")
		}
	})
}

func TestOverwrite(t *testing.T) {
	srv := locktest.NewServer(t)
	c := srv.GoRedisClient()
	ctx := context.Background()
	t.Run("a key with a TTL: the value replaced, the TTL kept", func(t *testing.T) {
		c.Set(ctx, "k", "v", time.Minute)
		if !srv.Overwrite("k", "other") {
			t.Errorf("Overwrite = false, want true")
		}
		if v := c.Get(ctx, "k").Val(); v != "other" {
			t.Errorf("GET = %q, want %q", v, "other")
		}
		if ttl := c.PTTL(ctx, "k").Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("PTTL = %v, want in (0, 1m]", ttl)
		}
	})
	t.Run("a key that is not there: set with no TTL, and false", func(t *testing.T) {
		if srv.Overwrite("none", "other") {
			t.Errorf("Overwrite = true, want false")
		}
		if ttl := c.PTTL(ctx, "none").Val(); ttl != -1 {
			t.Errorf("PTTL = %v, want -1 (no TTL)", ttl)
		}
	})
}

func TestFastForward(t *testing.T) {
	srv := locktest.NewServer(t)
	c := srv.GoRedisClient()
	ctx := context.Background()
	before := c.Time(ctx).Val()
	c.Set(ctx, "short", "v", time.Minute)
	c.Set(ctx, "long", "v", time.Hour)
	srv.FastForward(time.Minute)
	t.Run("a key whose TTL it passes: gone", func(t *testing.T) {
		if n := c.Exists(ctx, "short").Val(); n != 0 {
			t.Errorf("EXISTS = %d, want 0", n)
		}
	})
	t.Run("a key whose TTL it does not pass: d shorter", func(t *testing.T) {
		if ttl := c.PTTL(ctx, "long").Val(); ttl <= 0 || ttl > time.Hour-time.Minute {
			t.Errorf("PTTL = %v, want in (0, 59m]", ttl)
		}
	})
	t.Run("TIME: d later", func(t *testing.T) {
		if now := c.Time(ctx).Val(); now.Sub(before) < time.Minute {
			t.Errorf("TIME moved %v, want a minute at least", now.Sub(before))
		}
	})
	t.Run("a negative d: ignored", func(t *testing.T) {
		then := c.Time(ctx).Val()
		srv.FastForward(-time.Hour)
		if now := c.Time(ctx).Val(); now.Before(then) {
			t.Errorf("TIME went back %v, want it never to", then.Sub(now))
		}
	})
}

func TestPause(t *testing.T) {
	srv := locktest.NewServer(t)
	c := srv.GoRedisClient()
	ctx := context.Background()
	c.Ping(ctx) // the connection is made before the pause
	srv.Pause()
	srv.Pause() // a second Pause does nothing
	t.Run("paused: a call ends with its context", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		var ne net.Error // go-redis gives its read's timeout
		if err := c.Set(tctx, "k", "held", 0).Err(); !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
			t.Errorf("SET = %v, want a timeout", err)
		}
	})
	srv.Resume()
	srv.Resume() // a second Resume does nothing
	t.Run("resumed: answers, having run the command it held", func(t *testing.T) {
		if v, err := c.Get(ctx, "k").Result(); v != "held" || err != nil {
			t.Errorf("GET = %q, %v; want %q, nil", v, err, "held")
		}
	})
	t.Run("Close while paused: returns", func(t *testing.T) {
		srv := locktest.NewServer(t)
		c := srv.GoRedisClient()
		c.Ping(ctx)
		srv.Pause()
		go func() {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			c.Get(tctx, "k")
		}()
		srv.Close() // a hang fails the test by its timeout
	})
}

func TestRefuse(t *testing.T) {
	srv := locktest.NewServer(t)
	c := srv.GoRedisClient()
	ctx := context.Background()
	refused := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "NOPERM") && strings.Contains(err.Error(), "'incr'")
	}
	undo := srv.Refuse("INCR")
	t.Run("sent by a client: NOPERM", func(t *testing.T) {
		if err := c.Incr(ctx, "n").Err(); !refused(err) {
			t.Errorf("INCR = %v, want NOPERM naming incr", err)
		}
	})
	t.Run("called by a script: the script fails with it", func(t *testing.T) {
		if err := c.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{"n"}).Err(); !refused(err) {
			t.Errorf("EVAL = %v, want NOPERM naming incr", err)
		}
		if n := c.Exists(ctx, "n").Val(); n != 0 {
			t.Errorf("EXISTS = %d, want 0: the refused command wrote nothing", n)
		}
	})
	t.Run("refusals count: refused until each is undone", func(t *testing.T) {
		again := srv.Refuse("incr")
		undo()
		undo() // a second call of one undo does nothing
		if err := c.Incr(ctx, "n").Err(); !refused(err) {
			t.Errorf("INCR = %v, want NOPERM: one refusal is left", err)
		}
		again()
		if err := c.Incr(ctx, "n").Err(); err != nil {
			t.Errorf("INCR = %v, want nil once every refusal is undone", err)
		}
	})
}
