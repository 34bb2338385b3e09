package readme

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/locktest"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestInvoices is docs/testing.md's "Testing code that takes locks".
func TestInvoices(t *testing.T) {
	locker, err := single.New(locktest.GoRedis(t)) // or locktest.Redigo(t)
	if err != nil {
		t.Fatal(err)
	}
	billing := invoices.NewService(locker) // your code, given a *lock.Locker
	if err := billing.Settle(context.Background(), 42); err != nil {
		t.Fatalf("Settle = %v, want nil", err)
	}
}

// invoices stands for the user's package under test.
var invoices = struct {
	NewService func(*lock.Locker) Service
}{func(*lock.Locker) Service { return nil }}

// Service is the user's code that takes locks.
type Service interface {
	// Settle settles an invoice, under a lock.
	Settle(ctx context.Context, invoice int) error
}

// TestConformance is docs/extending.md's "Testing it with conformance".
func TestConformance(t *testing.T) {
	addr := startRedis(t) // your own server, started for the test
	conformance.RunDriver(t, func(t *testing.T) driver.Conn { return myredis.New(newClient(t, addr)) })
	conformance.Run(t, conformance.Harness{
		NewLocker: func(t *testing.T) *lock.Locker {
			l, err := mystrategy.New(myredis.New(newClient(t, addr)))
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
	})
}

// What a third party brings to the conformance suite: its server, its
// client, its driver and its strategy.
var (
	startRedis = func(t *testing.T) string { return locktest.NewServer(t).Addr() }
	newClient  = func(t *testing.T, addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	myredis = struct {
		New func(*redis.Client) driver.Conn
	}{func(c *redis.Client) driver.Conn { return goredis.New(c) }}
	mystrategy = struct {
		New func(driver.Conn) (*lock.Locker, error)
	}{func(c driver.Conn) (*lock.Locker, error) { return single.New(c) }}
)
