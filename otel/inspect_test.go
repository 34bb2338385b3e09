package lockotel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/conformance"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	lockotel "github.com/locksmith-go/lock/otel"
	"github.com/locksmith-go/lock/strategy"
)

// TestInspectSpan: Inspect gets a lock.inspect span with the attributes of
// the other spans, and nothing of the holder: no token, no fingerprint.
func TestInspectSpan(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	rec := newRecording(t, lockotel.WithKeys(lockotel.KeysRaw))
	l := rec.wrap(singleLocker(t, addr))
	key := conformance.Key(t)
	lk, err := l.Obtain(ctx, key, time.Minute, lock.WithMetadata("host=web-3"))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)

	var ran bool
	own := lock.WithHooks(&lock.Hooks{Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
		ran = true
		return next(ctx)
	}})
	st, err := l.Inspect(ctx, key, own)
	if err != nil || !st.Held {
		t.Fatalf("Inspect = %+v, %v; want held", st, err)
	}
	if !ran {
		t.Errorf("the caller's hook ran = false, want true: the wrapper passes options on")
	}
	s := only(t, rec.ended("lock.inspect"), "lock.inspect")
	a := attrs(s)
	if s.SpanKind() != trace.SpanKindClient || s.Status().Code != codes.Unset {
		t.Errorf("kind, status = %v, %v; want client, unset", s.SpanKind(), s.Status().Code)
	}
	if a["locksmith.lock.strategy"].AsString() != "single" || a["server.address"].AsString() != addr || a["locksmith.lock.key"].AsString() != key {
		t.Errorf("strategy, server.address, key = %q, %q, %q; want single, %s, the key", a["locksmith.lock.strategy"].AsString(),
			a["server.address"].AsString(), a["locksmith.lock.key"].AsString(), addr)
	}
	text := fmt.Sprint(s.Attributes(), s.Events(), s.Status())
	for name, secret := range map[string]string{"token": lk.Token(), "fingerprint": strategy.Fingerprint(lk.Token()), "metadata": "host=web-3"} {
		if strings.Contains(text, secret) {
			t.Errorf("the span shows the holder's %s, want it left out", name)
		}
	}
}

// TestInspectSpanError: a failed read sets the span's status and
// error.type, as the other spans do.
func TestInspectSpanError(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	ctx := context.Background()
	rec := newRecording(t)
	key := conformance.Key(t)
	if _, err := srv.Command(ctx, "HSET", key, "f", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.wrap(singleLocker(t, srv.Addr)).Inspect(ctx, key); err == nil {
		t.Fatal("Inspect of a hash = nil, want WRONGTYPE")
	}
	s := only(t, rec.ended("lock.inspect"), "lock.inspect")
	if got := attrs(s)["error.type"].AsString(); got != "WRONGTYPE" || s.Status().Code != codes.Error {
		t.Errorf("error.type, status = %q, %v; want WRONGTYPE, error", got, s.Status().Code)
	}
	if strings.Contains(s.Status().Description, key) {
		t.Errorf("status %q shows the key, want it omitted by the default key policy", s.Status().Description)
	}
}

// TestInspectNodeEvents: each Redlock node's answer to Inspect is a
// lock.node event of the lock.inspect span.
func TestInspectNodeEvents(t *testing.T) {
	l, servers := redlockOneNodeDown(t)
	rec := newRecording(t)
	if _, err := rec.wrap(l).Inspect(context.Background(), conformance.Key(t)); err != nil {
		t.Fatal(err)
	}
	s := only(t, rec.ended("lock.inspect"), "lock.inspect")
	got := nodeEvents(s)
	want := []string{servers[0].Addr + "=ok", servers[1].Addr + "=ok", servers[2].Addr + "=refused"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("node events = %v, want %v", got, want)
	}
}

// TestBreakSpan: Break gets a lock.break span, with nothing of the holder
// nor of the fingerprint it was given.
func TestBreakSpan(t *testing.T) {
	addr, _ := redistest.Addr(t)
	ctx := context.Background()
	rec := newRecording(t, lockotel.WithKeys(lockotel.KeysRaw))
	l := rec.wrap(singleLocker(t, addr))
	key := conformance.Key(t)
	lk, err := l.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fp := strategy.Fingerprint(lk.Token())
	if _, err := l.Break(ctx, key, fp); err != nil {
		t.Fatalf("Break = %v, want nil", err)
	}
	s := only(t, rec.ended("lock.break"), "lock.break")
	if a := attrs(s); a["locksmith.lock.key"].AsString() != key || s.Status().Code != codes.Unset {
		t.Errorf("key, status = %q, %v; want the key, unset", a["locksmith.lock.key"].AsString(), s.Status().Code)
	}
	text := fmt.Sprint(s.Attributes(), s.Events(), s.Status())
	for name, secret := range map[string]string{"token": lk.Token(), "fingerprint": fp} {
		if strings.Contains(text, secret) {
			t.Errorf("the span shows the holder's %s, want it left out", name)
		}
	}
}
