package lock_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy/redlock"
	setnxgetset "github.com/locksmith-go/lock/strategy/setnx-getset"
	"github.com/locksmith-go/lock/strategy/single"
)

// TestREADMEACLRules: the ACL rules that README.md gives for each strategy
// ("The commands each strategy sends") let a user that may run nothing
// else obtain, inspect, refresh, read the TTL of and release a lock on a
// real server, with every option that sends more commands.
func TestREADMEACLRules(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A brand-new node, seeded as the README says, so the guard grants.
	if _, err := srv.Command(ctx, "SET", redlock.GuardKey, "0"); err != nil {
		t.Fatal(err)
	}
	const base = "+evalsha +eval +get +set +pexpire +pttl +del"
	for _, c := range []struct {
		name  string
		rules []string // each as README.md gives it
		opts  []lock.Option
		newL  func(driver.Conn) (lock.Locker, error)
	}{
		{"single", []string{base}, nil, single.New},
		{"single WithFencing", []string{base, "+exists +time +incr"}, []lock.Option{lock.WithFencing()}, single.New},
		{"setnx-getset", []string{"+set +get +getset +evalsha +eval +pexpire +pttl +del"}, nil, func(c driver.Conn) (lock.Locker, error) {
			return setnxgetset.New(c, setnxgetset.WithSafetyTTL(time.Minute))
		}},
		{"redlock", []string{base}, nil, func(c driver.Conn) (lock.Locker, error) { return redlock.New([]driver.Conn{c}) }},
		{"redlock WithRestartGuard", []string{base, "+time"}, nil, func(c driver.Conn) (lock.Locker, error) {
			return redlock.New([]driver.Conn{c}, redlock.WithRestartGuard(time.Minute))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range c.rules {
				if !strings.Contains(string(readme), "`"+r+"`") {
					t.Fatalf("README.md does not give the rule `%s`, want it in the table of the commands each strategy sends", r)
				}
			}
			user := strings.ReplaceAll(c.name, " ", "-")
			setuser := append([]string{"ACL", "SETUSER", user, "on", ">secret", "resetkeys", "~lock:*", "~{lock:*", "~" + redlock.GuardKey, "-@all"},
				strings.Fields(strings.Join(c.rules, " "))...)
			if _, err := srv.Command(ctx, setuser...); err != nil {
				t.Fatal(err)
			}
			client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: "secret", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
			defer client.Close()
			locker, err := c.newL(goredis.New(client))
			if err != nil {
				t.Fatal(err)
			}
			lk, err := locker.Obtain(ctx, "lock:"+user, time.Minute, c.opts...)
			if err != nil {
				t.Fatalf("Obtain = %v, want nil", err)
			}
			if st, err := locker.Inspect(ctx, "lock:"+user); err != nil || !st.Held {
				t.Errorf("Inspect = held %v, %v; want held, nil", st.Held, err)
			}
			if err := lk.Refresh(ctx, time.Minute); err != nil {
				t.Errorf("Refresh = %v, want nil", err)
			}
			if _, err := lk.TTL(ctx); err != nil {
				t.Errorf("TTL = %v, want nil", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Errorf("Release = %v, want nil", err)
			}
		})
	}
}

// TestREADMEACLInspect: single's Inspect reads the fencing counter in the
// same script as the lock where the user's ACL allows the counters' keys,
// and the lock alone, with Fence 0, where it does not: a user that never
// fences needs no more than the base rule, as README.md says.
func TestREADMEACLInspect(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const rule = "~{lock:*"
	if !strings.Contains(string(readme), "`"+rule+"`") {
		t.Fatalf("README.md does not give the rule `%s`, want it with the commands each strategy sends", rule)
	}
	srv := redistest.Start(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name  string
		keys  []string
		fence bool // Inspect reads the counter
	}{
		{"with the counters' keys", []string{"~lock:*", rule}, true},
		{"with read access to them only", []string{"~lock:*", "%R~{lock:*"}, false},
		{"without them", []string{"~lock:*"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			user := "inspect-" + strings.NewReplacer(" ", "-", "'", "").Replace(c.name)
			setuser := append(append([]string{"ACL", "SETUSER", user, "on", ">secret", "resetkeys", "-@all"}, c.keys...),
				"+evalsha", "+eval", "+get", "+set", "+pexpire", "+pttl", "+del")
			if _, err := srv.Command(ctx, setuser...); err != nil {
				t.Fatal(err)
			}
			key := "lock:" + user
			if _, err := srv.Command(ctx, "SET", "{"+key+"}:fence", "7"); err != nil {
				t.Fatal(err)
			}
			client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: "secret", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
			defer client.Close()
			locker, err := single.New(goredis.New(client))
			if err != nil {
				t.Fatal(err)
			}
			lk, err := locker.Obtain(ctx, key, time.Minute, lock.WithMetadata("m"))
			if err != nil {
				t.Fatalf("Obtain = %v, want nil", err)
			}
			defer lk.Release(ctx)
			st, err := locker.Inspect(ctx, key)
			if err != nil || !st.Held || st.Metadata != "m" {
				t.Fatalf("Inspect = held %v, metadata %q, %v; want held, \"m\", nil", st.Held, st.Metadata, err)
			}
			want := int64(0)
			if c.fence {
				want = 7
			}
			if st.Fence != want {
				t.Errorf("Inspect's Fence: got %d, want %d", st.Fence, want)
			}
		})
	}
}
