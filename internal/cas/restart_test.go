package cas_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestAfterARestart: after the server restarts empty, the first call on a
// client that used it before gets the new server's answer, over every
// driver; redigo's pool hands out the connection the old server closed,
// whose EOF is retried.
func TestAfterARestart(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	calls := []struct {
		name string
		call func(context.Context, driver.Conn) error
		want error
	}{
		{"Acquire", func(ctx context.Context, c driver.Conn) error {
			return acquire(ctx, c, "k", "v", time.Minute, cas.ByScript)
		}, nil},
		{"Acquire, SET first", func(ctx context.Context, c driver.Conn) error {
			return acquire(ctx, c, "k", "v", time.Minute, cas.BySet)
		}, nil},
		{"Acquire, SET alone", func(ctx context.Context, c driver.Conn) error {
			return acquire(ctx, c, "k", "v", time.Minute, cas.BySetOnly)
		}, nil},
		{"AcquireFenced", func(ctx context.Context, c driver.Conn) error {
			_, err := acquireFenced(ctx, c, "{k}", "{k}:fence", "v", time.Minute)
			return err
		}, nil},
		{"Delete", func(ctx context.Context, c driver.Conn) error { return deleteKey(ctx, c, "k", "v") }, lock.ErrExpired},
		{"PExpire", func(ctx context.Context, c driver.Conn) error { return pexpire(ctx, c, "k", "v", time.Minute) }, lock.ErrExpired},
		{"PTTL", func(ctx context.Context, c driver.Conn) error { _, err := pttl(ctx, c, "k", "v"); return err }, lock.ErrExpired},
		{"Set", func(ctx context.Context, c driver.Conn) error { return set(ctx, c, "k", "v", "w", time.Minute) }, lock.ErrExpired},
	}
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			for _, tc := range calls {
				t.Run(tc.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					c := d.Conn(t, srv.Addr)
					if err := acquire(ctx, c, "k", "v", time.Minute, cas.ByScript); err != nil {
						t.Fatalf("Acquire before the restart = %v, want nil", err)
					}
					if err := srv.Restart(); err != nil {
						t.Fatalf("restart: %v", err)
					}
					if err := tc.call(ctx, c); !errors.Is(err, tc.want) {
						t.Errorf("%s after a restart = %v, want %v", tc.name, err, tc.want)
					}
				})
			}
		})
	}
}
