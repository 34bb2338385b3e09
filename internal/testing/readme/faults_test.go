package readme

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

// LostJob is docs/testing.md's "Faults, without sleeps".
func LostJob(t *testing.T) {
	srv := locktest.NewServer(t)
	locker, err := single.New(goredis.New(srv.GoRedisClient()))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	go func() {
		<-started
		srv.ExpireNow("report:daily") // the lock is lost half-way
	}()
	err = lock.Do(context.Background(), locker, "report:daily", time.Second, func(ctx context.Context) error {
		close(started)
		<-ctx.Done() // your job, which must stop when its lock is lost
		return context.Cause(ctx)
	})
	if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrExpired) {
		t.Fatalf("Do = %v, want ErrLost and ErrExpired", err)
	}
}
