package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock/driver"
)

// RunDriver checks a [driver.Conn], which newConn returns for a server the
// test may write to, as subtests of t: NX semantics, PX expiry, nil-reply
// normalisation, script replies and the NOSCRIPT fallback, errors passed
// through (an error reply as an error whose text is the reply's), cancelled
// contexts, the address of a [driver.Addresser] (skipped for a Conn that
// is none, or does not know its address), and that [driver.Check] accepts
// the Conn. For a [driver.Subscriber], it checks that a session confirms a
// subscription, delivers a message, confirms an unsubscription and ends
// with Closed after Close. For a Conn that can pin a connection
// ([driver.Pinnable]), it checks that a pinned Conn's commands go over one
// connection, that WAIT answers there, and that a WATCH transaction there
// runs, or is aborted by another client's change, for keys on every master
// of a Cluster. For a [driver.Pipeliner], it checks that each command gets
// its own reply, in order, an error in its place, for keys in several hash
// slots, that [driver.Script.RunEach] falls back to EVAL, and that a pinned
// Conn pipelines a WATCH transaction.
func RunDriver(t *testing.T, newConn func(t *testing.T) driver.Conn) {
	for _, p := range driverProperties {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), subtestTimeout)
			defer cancel()
			p.f(t, ctx, newConn(t))
		})
	}
}

// driverProperties are RunDriver's checks, in the order it runs them.
var driverProperties = []struct {
	name string
	f    func(*testing.T, context.Context, driver.Conn)
}{
	{"SetNX", driverSetNX},
	{"Get", driverGet},
	{"GetSet", driverGetSet},
	{"Del", driverDel},
	{"PTTL", driverPTTL},
	{"ScriptFallback", driverScriptFallback},
	{"ScriptReplies", driverScriptReplies},
	{"ErrorsPassThrough", driverErrors},
	{"CancelledContext", driverCancelled},
	{"Addresser", driverAddresser},
	{"Check", driverCheck},
	{"Subscriber", driverSubscriber},
	{"Pinner", driverPinner},
	{"WatchAbortsExec", driverWatch},
	{"Pipeliner", driverPipeliner},
}

// cleanKey returns a fresh key that is deleted when t ends.
func cleanKey(t *testing.T, c driver.Conn) string {
	key := Key(t)
	t.Cleanup(func() { _, _ = c.Del(context.Background(), key) })
	return key
}

func driverSetNX(t *testing.T, ctx context.Context, c driver.Conn) {
	key := cleanKey(t, c)
	if ok, err := c.SetNX(ctx, key, "a", time.Minute); !ok || err != nil {
		t.Fatalf("SetNX on a missing key = %v, %v; want true, nil", ok, err)
	}
	if ok, err := c.SetNX(ctx, key, "b", time.Minute); ok || err != nil {
		t.Errorf("SetNX on an existing key = %v, %v; want false, nil", ok, err)
	}
	if v, _, _ := c.Get(ctx, key); v != "a" {
		t.Errorf("value after a refused SetNX = %q, want %q", v, "a")
	}
	if ttl, ok, err := c.PTTL(ctx, key); !ok || err != nil || ttl <= 0 || ttl > time.Minute {
		t.Errorf("PTTL after SetNX with a minute = %v, %v, %v; want in (0, 1m], true, nil", ttl, ok, err)
	}
	noExpiry := cleanKey(t, c)
	if ok, err := c.SetNX(ctx, noExpiry, "a", 0); !ok || err != nil {
		t.Fatalf("SetNX with no TTL = %v, %v; want true, nil", ok, err)
	}
	if ttl, ok, err := c.PTTL(ctx, noExpiry); !ok || err != nil || ttl >= 0 {
		t.Errorf("PTTL after SetNX with no TTL = %v, %v, %v; want negative, true, nil", ttl, ok, err)
	}
	if ok, err := c.SetNX(ctx, noExpiry, "b", 0); ok || err != nil {
		t.Errorf("SetNX with no TTL on an existing key = %v, %v; want false, nil", ok, err)
	}
}

func driverGet(t *testing.T, ctx context.Context, c driver.Conn) {
	key := cleanKey(t, c)
	if v, ok, err := c.Get(ctx, key); v != "" || ok || err != nil {
		t.Errorf("Get of a missing key = %q, %v, %v; want \"\", false, nil", v, ok, err)
	}
	const value = "v\x00 with spaces\r\nand bytes"
	if _, err := c.SetNX(ctx, key, value, time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := c.Get(ctx, key); v != value || !ok || err != nil {
		t.Errorf("Get = %q, %v, %v; want %q, true, nil", v, ok, err, value)
	}
}

func driverGetSet(t *testing.T, ctx context.Context, c driver.Conn) {
	key := cleanKey(t, c)
	if old, ok, err := c.GetSet(ctx, key, "1"); old != "" || ok || err != nil {
		t.Errorf("GetSet of a missing key = %q, %v, %v; want \"\", false, nil", old, ok, err)
	}
	if old, ok, err := c.GetSet(ctx, key, "2"); old != "1" || !ok || err != nil {
		t.Errorf("GetSet = %q, %v, %v; want \"1\", true, nil", old, ok, err)
	}
	if v, _, _ := c.Get(ctx, key); v != "2" {
		t.Errorf("value after GetSet = %q, want \"2\"", v)
	}
}

func driverDel(t *testing.T, ctx context.Context, c driver.Conn) {
	key := cleanKey(t, c)
	if ok, err := c.Del(ctx, key); ok || err != nil {
		t.Errorf("Del of a missing key = %v, %v; want false, nil", ok, err)
	}
	if _, err := c.SetNX(ctx, key, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Del(ctx, key); !ok || err != nil {
		t.Errorf("Del = %v, %v; want true, nil", ok, err)
	}
	if _, ok, _ := c.Get(ctx, key); ok {
		t.Errorf("key exists after Del")
	}
}

func driverPTTL(t *testing.T, ctx context.Context, c driver.Conn) {
	key := cleanKey(t, c)
	if ttl, ok, err := c.PTTL(ctx, key); ok || err != nil {
		t.Errorf("PTTL of a missing key = %v, %v, %v; want ok false, nil", ttl, ok, err)
	}
}

// freshScript returns a script the server has never seen.
func freshScript(body string) *driver.Script {
	return driver.NewScript("-- " + randomHex(8) + "\n" + body)
}

// unknownSHA1 returns a random SHA-1 in hex, which no script has: EVALSHA
// of it gets NOSCRIPT. It hashes nothing, so that the suite runs in FIPS
// 140 mode too.
func unknownSHA1() string { return randomHex(20) }

// driverScriptFallback: the script names a key, so that a cluster runs
// every call on the same node.
func driverScriptFallback(t *testing.T, ctx context.Context, c driver.Conn) {
	keys := []string{cleanKey(t, c)}
	if _, err := c.EvalSha(ctx, unknownSHA1(), keys); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Fatalf("EvalSha of an unknown script = %v, want an error whose text starts with NOSCRIPT", err)
	}
	s := freshScript("return 42")
	if n, err := s.Int(ctx, c, keys); n != 42 || err != nil {
		t.Fatalf("Script.Run of an unknown script = %v, %v; want 42, nil (EVAL fallback)", n, err)
	}
	sha := s.SHA1()
	if sha == "" {
		return // FIPS 140 mode, and the server refused SCRIPT LOAD: Run sends EVAL
	}
	if v, err := c.EvalSha(ctx, sha, keys); err != nil || v == nil {
		t.Errorf("EvalSha after the fallback = %v, %v; want the script cached", v, err)
	}
}

func driverScriptReplies(t *testing.T, ctx context.Context, c driver.Conn) {
	key := cleanKey(t, c)
	for _, tc := range []struct {
		name, body string
		want       any
	}{
		{"integer", "return 7", int64(7)},
		{"negative integer", "return -3", int64(-3)},
		{"string", "return 'abc'", "abc"},
		{"status", "return redis.status_reply('OK')", "OK"},
		{"false is nil", "return false", nil},
		{"no value is nil", "return nil", nil},
		{"missing key is nil", "return redis.call('GET', KEYS[1])", nil},
		{"array", "return {1, 'two', {3}}", []any{int64(1), "two", []any{int64(3)}}},
		{"argument round trip", "return ARGV[1] .. ARGV[2]", "x5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := driver.NewScript(tc.body).Run(ctx, c, []string{key}, "x", 5)
			if err != nil {
				t.Fatalf("Run(%q) = %v", tc.body, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Run(%q) = %#v (%T), want %#v (%T)", tc.body, got, got, tc.want, tc.want)
			}
		})
	}
}

func driverErrors(t *testing.T, ctx context.Context, c driver.Conn) {
	key := cleanKey(t, c)
	if _, err := driver.NewScript("return redis.error_reply('ERR boom')").Run(ctx, c, nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("script error reply = %v, want an error containing %q", err, "boom")
	}
	if _, err := driver.NewScript("return redis.call('HSET', KEYS[1], 'f', 'v')").Run(ctx, c, []string{key}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(ctx, key); ok || err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE ") {
		t.Errorf("Get of a hash = %v, %v; want an error whose text starts with WRONGTYPE, the reply's", ok, err)
	}
	if _, _, err := c.GetSet(ctx, key, "x"); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE ") {
		t.Errorf("GetSet of a hash = %v; want an error whose text starts with WRONGTYPE, the reply's", err)
	}
}

// driverCancelled: every call with a cancelled context fails with an error
// matching context.Canceled and writes nothing; so does a Pin, whose
// pinned Conn writes, for a Conn that can pin.
func driverCancelled(t *testing.T, ctx context.Context, c driver.Conn) {
	key := cleanKey(t, c)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	calls := map[string]func() error{
		"SetNX":   func() error { _, err := c.SetNX(cctx, key, "v", time.Minute); return err },
		"Get":     func() error { _, _, err := c.Get(cctx, key); return err },
		"GetSet":  func() error { _, _, err := c.GetSet(cctx, key, "v"); return err },
		"Del":     func() error { _, err := c.Del(cctx, key); return err },
		"PTTL":    func() error { _, _, err := c.PTTL(cctx, key); return err },
		"EvalSha": func() error { _, err := c.EvalSha(cctx, unknownSHA1(), nil); return err },
		"Eval":    func() error { _, err := c.Eval(cctx, "return 1", nil); return err },
	}
	if driver.Pinnable(c) == nil {
		calls["Pin"] = func() error {
			return driver.Pin(cctx, c, key, func(one driver.Conn) error { _, err := one.SetNX(cctx, key, "v", time.Minute); return err })
		}
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context = %v, want context.Canceled", name, err)
		}
	}
	if _, ok, _ := c.Get(ctx, key); ok {
		t.Errorf("a call with a cancelled context wrote the key")
	}
}

func driverAddresser(t *testing.T, _ context.Context, c driver.Conn) {
	a, ok := c.(driver.Addresser)
	if !ok {
		t.Skip("the driver does not implement the optional driver.Addresser, so errors and spans cannot name its server: implement Addr() string to have it checked")
	}
	addr := a.Addr()
	if addr == "" {
		t.Skip("Addr() is empty: the driver does not know the server's address (optional); give the driver the address to have it checked")
	}
	if strings.ContainsAny(addr, " \t\n") {
		t.Errorf("Addr() = %q, want host:port[,host:port...]", addr)
	}
}

func driverCheck(t *testing.T, _ context.Context, c driver.Conn) {
	if err := driver.Check(c); err != nil {
		t.Errorf("driver.Check = %v, want nil for a Conn that works", err)
	}
}

// driverPinner: a script and commands alike, even while other calls use the
// Conn. CLIENT ID tells connections apart: without it (the embedded server
// of locktest), the property skips.
func driverPinner(t *testing.T, ctx context.Context, c driver.Conn) {
	if err := driver.Pinnable(c); err != nil {
		t.Skipf("the driver cannot pin a connection (optional: single.WithReplicas needs it): %v", err)
	}
	if _, err := driver.Do(ctx, c, "CLIENT", "ID"); err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown") {
		t.Skipf("the server does not know CLIENT ID, with which this property tells connections apart (%v): run it on a real Redis", err)
	}
	key := cleanKey(t, c)
	err := driver.Pin(ctx, c, key, func(one driver.Conn) error {
		first, err := driver.Do(ctx, one, "CLIENT", "ID")
		if err != nil {
			return err
		}
		if _, _, err := c.Get(ctx, key); err != nil { // another call, meanwhile
			return err
		}
		if _, err := driver.NewScript(`return redis.call('SET', KEYS[1], 'v')`).Run(ctx, one, []string{key}); err != nil {
			return err
		}
		if again, err := driver.Do(ctx, one, "CLIENT", "ID"); err != nil || again != first {
			t.Errorf("CLIENT ID on the pinned Conn = %v, %v; want %v, the first call's", again, err, first)
		}
		if n, err := driver.Do(ctx, one, "WAIT", 0, 1); err != nil {
			t.Errorf("WAIT 0 1 on the pinned Conn = %v, %v; want a number of replicas", n, err)
		} else if _, ok := n.(int64); !ok {
			t.Errorf("WAIT 0 1 on the pinned Conn = %#v; want an int64", n)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Pin: got %v, want nil", err)
	}
}

// driverWatch: WATCH key, MULTI, SET key, EXEC, on keys over every master
// of a Cluster (slottedKeys), and with a first command that names no key.
// (Some Redis-compatible servers have ignored WATCH at EXEC.)
func driverWatch(t *testing.T, ctx context.Context, c driver.Conn) {
	if err := driver.Pinnable(c); err != nil {
		t.Skipf("the driver cannot pin a connection (optional: transactions need it): %v", err)
	}
	keys := slottedKeys(t, c)
	t.Run("EXEC runs when the key did not change", func(t *testing.T) {
		for _, key := range keys {
			exec, err := transaction(ctx, c, key, func() error { return nil })
			if want := []any{"OK"}; err != nil || !reflect.DeepEqual(exec, want) {
				t.Errorf("WATCH %s, MULTI, SET, EXEC = %#v, %v; want %#v, nil", key, exec, err, want)
			}
			if v, _, err := c.Get(ctx, key); v != "x" || err != nil {
				t.Errorf("%s after the transaction = %q, %v; want \"x\", nil", key, v, err)
			}
		}
	})
	t.Run("another client's change aborts EXEC", func(t *testing.T) {
		for _, key := range keys {
			exec, err := transaction(ctx, c, key, func() error {
				_, _, err := c.GetSet(ctx, key, "other")
				return err
			})
			if err != nil || exec != nil {
				t.Errorf("EXEC after another client changed %s = %#v, %v; want nil (aborted), nil", key, exec, err)
			}
			if v, _, err := c.Get(ctx, key); v != "other" || err != nil {
				t.Errorf("%s after the aborted transaction = %q, %v; want the other client's \"other\", nil", key, v, err)
			}
		}
	})
}

// slottedKeys returns four fresh keys, deleted when t ends, in four hash
// slots, which a Cluster of three masters with even shares spreads over all
// three.
func slottedKeys(t *testing.T, c driver.Conn) []string {
	keys := make([]string, 4)
	for i := range keys {
		keys[i] = Key(t) + ":{" + strconv.Itoa(i) + "}"
		t.Cleanup(func() { _, _ = c.Del(context.Background(), keys[i]) })
	}
	return keys
}

// transaction sends, within Pin(key), PING (a first command that names no
// key), WATCH key, then runs meanwhile, then sends MULTI, SET key x and
// EXEC, and returns EXEC's reply. If a command fails, it sends DISCARD and
// UNWATCH, so that the connection goes back to its pool with no
// transaction open.
func transaction(ctx context.Context, c driver.Conn, key string, meanwhile func() error) (exec any, err error) {
	err = driver.Pin(ctx, c, key, func(one driver.Conn) (err error) {
		defer func() {
			if err != nil {
				_, _ = driver.Do(ctx, one, "DISCARD")
				_, _ = driver.Do(ctx, one, "UNWATCH")
			}
		}()
		for _, step := range []func() error{
			func() error { _, err := driver.Do(ctx, one, "PING"); return err },
			func() error { _, err := driver.Do(ctx, one, "WATCH", key); return err },
			meanwhile,
			func() error { _, err := driver.Do(ctx, one, "MULTI"); return err },
			func() error { _, err := driver.Do(ctx, one, "SET", key, "x"); return err },
			func() (err error) { exec, err = driver.Do(ctx, one, "EXEC"); return err },
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	return exec, err
}

// driverSubscriber: one behaviour per subtest, each on a session of its
// own.
func driverSubscriber(t *testing.T, ctx context.Context, c driver.Conn) {
	sub, ok := c.(driver.Subscriber)
	if !ok {
		t.Skip("the driver does not implement the optional driver.Subscriber: waiters poll; implement it to have it checked")
	}
	for _, tc := range []struct {
		name string
		f    func(*testing.T, context.Context, driver.Conn, *recorder, string)
	}{
		{"SubscribeIsConfirmed", func(*testing.T, context.Context, driver.Conn, *recorder, string) {}},
		{"PublishedMessageArrives", subscriberMessage},
		{"UnsubscribeIsConfirmed", subscriberUnsubscribe},
		{"CloseEndsTheSession", subscriberClose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := listen(t, ctx, sub)
			channel := Key(t)
			if err := r.s.Subscribe(ctx, channel); err != nil {
				t.Fatalf("Subscribe(%q) = %v, want nil", channel, err)
			}
			r.want(t, ctx, "after Subscribe", driver.Event{Kind: driver.Subscribed, Channel: channel})
			tc.f(t, ctx, c, r, channel)
		})
	}
}

func subscriberMessage(t *testing.T, ctx context.Context, c driver.Conn, r *recorder, channel string) {
	if n := publish(t, ctx, c, channel, "hello"); n != 1 {
		t.Errorf("subscribers of the channel counted by the publish = %d, want 1", n)
	}
	r.want(t, ctx, "after a publish", driver.Event{Kind: driver.Message, Channel: channel, Payload: "hello"})
}

func subscriberUnsubscribe(t *testing.T, ctx context.Context, c driver.Conn, r *recorder, channel string) {
	if err := r.s.Unsubscribe(ctx, channel); err != nil {
		t.Fatalf("Unsubscribe(%q) = %v, want nil", channel, err)
	}
	r.want(t, ctx, "after Unsubscribe", driver.Event{Kind: driver.Unsubscribed, Channel: channel})
	if n := publish(t, ctx, c, channel, "late"); n != 0 {
		t.Errorf("subscribers of the channel counted by a publish after Unsubscribe = %d, want 0", n)
	}
}

func subscriberClose(t *testing.T, ctx context.Context, c driver.Conn, r *recorder, channel string) {
	if err := r.s.Close(); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	r.want(t, ctx, "after Close", driver.Event{Kind: driver.Closed})
	publish(t, ctx, c, channel, "late")
	time.Sleep(100 * time.Millisecond) // room for a wrong event to show up
	select {
	case e := <-r.events:
		t.Errorf("event after Closed: %+v, want none", e)
	default:
	}
}

// publishScript publishes ARGV[2] on the channel KEYS[1] with ARGV[1]
// (PUBLISH, or SPUBLISH for shard channels, which a script may publish on
// when they are its keys) and returns the number of subscribers that got it.
var publishScript = driver.NewScript("return redis.call(ARGV[1], KEYS[1], ARGV[2])")

// publish publishes payload on channel through c, as the lock scripts do.
func publish(t *testing.T, ctx context.Context, c driver.Conn, channel, payload string) int64 {
	t.Helper()
	cmd := "PUBLISH"
	if c.(driver.Subscriber).Sharded() {
		cmd = "SPUBLISH"
	}
	n, err := publishScript.Int(ctx, c, []string{channel}, cmd, payload)
	if err != nil {
		t.Fatalf("%s %q = %v, want nil", cmd, channel, err)
	}
	return n
}

// recorder records the events of a subscriber session.
type recorder struct {
	s      driver.Session
	events chan driver.Event
}

// listen opens a session of sub, closed when t ends.
func listen(t *testing.T, ctx context.Context, sub driver.Subscriber) *recorder {
	t.Helper()
	r := &recorder{events: make(chan driver.Event, 64)}
	s, err := sub.Listen(ctx, func(e driver.Event) {
		select { // the callback must not block
		case r.events <- e:
		default: // the test reads far fewer: it fails on what it reads first
		}
	})
	if err != nil {
		t.Fatalf("Listen = %v, want nil", err)
	}
	r.s = s
	t.Cleanup(func() { _ = s.Close() })
	return r
}

// want fails t unless the session's next event is want.
func (r *recorder) want(t *testing.T, ctx context.Context, when string, want driver.Event) {
	t.Helper()
	select {
	case got := <-r.events:
		if got != want {
			t.Fatalf("event %s = %+v, want %+v", when, got, want)
		}
	case <-ctx.Done():
		t.Fatalf("no event %s (want %+v): %v", when, want, ctx.Err())
	}
}

func driverPipeliner(t *testing.T, ctx context.Context, c driver.Conn) {
	if _, ok := c.(driver.Pipeliner); !ok {
		t.Skip("the driver does not pipeline (optional: batched refreshes then send their calls one by one)")
	}
	keys := slottedKeys(t, c)
	t.Run("each command gets its reply, in order", func(t *testing.T) {
		var cmds [][]any
		var want []any
		for i, k := range keys {
			cmds = append(cmds, []any{"SET", k, "v" + strconv.Itoa(i)}, []any{"GET", k}, []any{"INCR", k}, []any{"GET", k + ":missing"})
			want = append(want, "OK", "v"+strconv.Itoa(i), errors.New("ERR value is not an integer or out of range"), nil)
		}
		replies, err := driver.Pipeline(ctx, c, cmds)
		if err != nil || len(replies) != len(want) {
			t.Fatalf("Pipeline = %d replies, %v; want %d, nil", len(replies), err, len(want))
		}
		for i, r := range replies {
			w, isErr := want[i].(error)
			got, gotErr := r.(error)
			switch {
			case isErr && (!gotErr || !strings.Contains(got.Error(), "not an integer")):
				t.Errorf("reply %d (%v) = %#v, want an error like %q", i, cmds[i], r, w)
			case !isErr && r != want[i]:
				t.Errorf("reply %d (%v) = %#v, want %#v", i, cmds[i], r, want[i])
			}
		}
	})
	t.Run("RunEach runs a script the server lacks", func(t *testing.T) {
		s := freshScript("return KEYS[1] .. ARGV[1]")
		calls := make([]driver.Call, len(keys))
		for i, k := range keys {
			calls[i] = driver.Call{Keys: []string{k}, Args: []any{i}}
		}
		s.RunEach(ctx, c, calls)
		for i, call := range calls {
			if want := keys[i] + strconv.Itoa(i); call.Reply != want || call.Err != nil {
				t.Errorf("call %d = %#v, %v; want %q, nil", i, call.Reply, call.Err, want)
			}
		}
	})
	t.Run("a pinned Conn pipelines a transaction", func(t *testing.T) {
		if err := driver.Pinnable(c); err != nil {
			t.Skipf("the driver cannot pin a connection: %v", err)
		}
		for _, key := range keys {
			err := driver.Pin(ctx, c, key, func(one driver.Conn) error {
				read, err := driver.Pipeline(ctx, one, [][]any{{"WATCH", key}, {"GET", key}})
				if err != nil || len(read) != 2 || read[0] != "OK" {
					return fmt.Errorf("WATCH, GET = %#v, %v; want OK and a value", read, err)
				}
				exec, err := driver.Pipeline(ctx, one, [][]any{{"MULTI"}, {"SET", key, "x"}, {"EXEC"}})
				if want := []any{"OK", "QUEUED", []any{"OK"}}; err != nil || !reflect.DeepEqual(exec, want) {
					return fmt.Errorf("MULTI, SET, EXEC = %#v, %v; want %#v", exec, err, want)
				}
				return nil
			})
			if err != nil {
				t.Errorf("%s: %v", key, err)
			}
			if v, _, err := c.Get(ctx, key); v != "x" || err != nil {
				t.Errorf("%s after the transaction = %q, %v; want \"x\", nil", key, v, err)
			}
		}
	})
}
