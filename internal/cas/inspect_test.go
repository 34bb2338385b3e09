package cas_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestInspect: Inspect reads a key's value, its TTL and the fencing
// counter as they are, over every driver, and refuses keys of another type
// with the server's WRONGTYPE error.
func TestInspect(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	do := func(t *testing.T, args ...string) {
		t.Helper()
		if _, err := srv.Command(ctx, args...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	for _, d := range redistest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			c := d.Conn(t, srv.Addr)
			key, fence := "{inspect:"+d.Name+"}", "{inspect:"+d.Name+"}:fence"
			t.Run("a missing key", func(t *testing.T) {
				got, err := inspect(ctx, c, key, fence, cas.Queue{})
				if err != nil || got != (cas.Reading{}) {
					t.Errorf("Inspect = %+v, %v; want the zero Reading, nil", got, err)
				}
			})
			t.Run("a key with a TTL and a counter", func(t *testing.T) {
				do(t, "SET", key, "value", "PX", "60000")
				do(t, "SET", fence, "42")
				got, err := inspect(ctx, c, key, fence, cas.Queue{})
				if err != nil || !got.Exists || got.Value != "value" || got.Fence != 42 {
					t.Errorf("Inspect = %+v, %v; want the value and fence 42", got, err)
				}
				if got.TTL <= 0 || got.TTL > time.Minute {
					t.Errorf("TTL = %v, want in (0, 1m]", got.TTL)
				}
			})
			t.Run("a counter not asked for", func(t *testing.T) {
				if got, err := inspect(ctx, c, key, "", cas.Queue{}); err != nil || got.Fence != 0 {
					t.Errorf("Inspect without a fence key = %+v, %v; want Fence 0", got, err)
				}
			})
			t.Run("a key with no expiry", func(t *testing.T) {
				do(t, "SET", key, "value")
				if got, err := inspect(ctx, c, key, "", cas.Queue{}); err != nil || !got.Exists || got.TTL >= 0 {
					t.Errorf("Inspect = %+v, %v; want it existing with a negative TTL", got, err)
				}
			})
			t.Run("an empty value", func(t *testing.T) {
				do(t, "SET", key, "")
				if got, err := inspect(ctx, c, key, "", cas.Queue{}); err != nil || !got.Exists || got.Value != "" {
					t.Errorf("Inspect = %+v, %v; want it existing with an empty value", got, err)
				}
			})
			t.Run("a key of another type", func(t *testing.T) {
				do(t, "DEL", key)
				do(t, "HSET", key, "f", "v")
				if _, err := inspect(ctx, c, key, "", cas.Queue{}); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
					t.Errorf("Inspect of a hash = %v, want WRONGTYPE", err)
				}
			})
			t.Run("a counter that is not a number", func(t *testing.T) {
				do(t, "DEL", key)
				do(t, "SET", fence, "x")
				if _, err := inspect(ctx, c, key, fence, cas.Queue{}); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
					t.Errorf("Inspect with a counter of text = %v, want WRONGTYPE", err)
				}
			})
			do(t, "DEL", key, fence)
		})
	}
}
