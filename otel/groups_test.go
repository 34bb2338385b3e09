package lockotel_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/locksmith-go/lock"
	lockotel "github.com/locksmith-go/lock/otel"
)

// obtainReleaseAll obtains and releases a lock of each key in turn.
func obtainReleaseAll(t *testing.T, l *lock.Locker, keys ...string) {
	t.Helper()
	ctx := context.Background()
	for _, key := range keys {
		lk, err := l.Obtain(ctx, key, time.Minute)
		if err != nil {
			t.Fatalf("Obtain(%q) = %v, want a lock", key, err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release(%q) = %v, want nil", key, err)
		}
	}
}

// wantBy checks md's data points summed by the value of attr (see by).
func wantBy(t *testing.T, md metricdata.Metrics, attr attribute.Key, want map[string]int64) {
	t.Helper()
	if got := by(md, attr); !maps.Equal(got, want) {
		t.Errorf("%s by %s = %v, want %v", md.Name, attr, got, want)
	}
}

// TestGroups: every metric carries locksmith.lock.group, the key's prefix
// by default or the group function's, and never more than 100 groups.
func TestGroups(t *testing.T) {
	const group attribute.Key = "locksmith.lock.group"
	t.Run("the default group is the prefix up to the first ':' or '{'", func(t *testing.T) {
		rec := newRecording(t)
		obtainReleaseAll(t, rec.wrap(lock.New(&memory{})), "report:daily", "report:weekly", "orders{42}", "orders{42}:lines", "a:b{c}")
		m := rec.metrics(t)
		for _, name := range []string{"locksmith.lock.acquire.duration", "locksmith.lock.attempts", "locksmith.lock.hold.duration"} {
			wantBy(t, m[name], group, map[string]int64{"report": 2, "orders": 2, "a": 1})
		}
		wantBy(t, m["locksmith.lock.active"], group, map[string]int64{"report": 0, "orders": 0, "a": 0})
	})
	t.Run("a key without a prefix is _ungrouped", func(t *testing.T) {
		rec := newRecording(t)
		obtainReleaseAll(t, rec.wrap(lock.New(&memory{})), "plain", "{user:7}:lock", ":leading")
		wantBy(t, rec.metrics(t)["locksmith.lock.attempts"], group, map[string]int64{"_ungrouped": 3})
	})
	t.Run("WithGroups names the groups; an empty name is _ungrouped", func(t *testing.T) {
		rec := newRecording(t, lockotel.WithGroups(func(key string) string {
			if strings.HasSuffix(key, "!") {
				return ""
			}
			return strings.ToUpper(key[:1])
		}))
		obtainReleaseAll(t, rec.wrap(lock.New(&memory{})), "apple", "avocado", "banana", "cherry!")
		wantBy(t, rec.metrics(t)["locksmith.lock.attempts"], group, map[string]int64{"A": 2, "B": 1, "_ungrouped": 1})
	})
	t.Run("a nil group function is the default", func(t *testing.T) {
		rec := newRecording(t, lockotel.WithGroups(nil))
		obtainReleaseAll(t, rec.wrap(lock.New(&memory{})), "report:daily")
		wantBy(t, rec.metrics(t)["locksmith.lock.attempts"], group, map[string]int64{"report": 1})
	})
	t.Run("beyond 100 groups, the others are _overflow", func(t *testing.T) {
		rec := newRecording(t, lockotel.WithGroups(func(key string) string { return key }))
		var keys []string
		for i := range 120 {
			keys = append(keys, fmt.Sprintf("job-%d", i))
		}
		l := rec.wrap(lock.New(&memory{}))
		obtainReleaseAll(t, l, keys...)
		obtainReleaseAll(t, l, "job-0", "job-119") // an admitted group stays; a late one stays out
		got := by(rec.metrics(t)["locksmith.lock.attempts"], group)
		if len(got) != 101 || got["_overflow"] != 21 || got["job-0"] != 2 || got["job-99"] != 1 {
			t.Errorf("attempts by group: %d groups, _overflow %d, job-0 %d, job-99 %d; want 101, 21, 2, 1", len(got), got["_overflow"], got["job-0"], got["job-99"])
		}
	})
}

// TestQueueAndHandoff: a waiter that joins a queue at rank 2 records a
// queue length of 2, and the attempt that obtains the lock after its wait
// records one handoff; an Obtain that does not wait records neither.
func TestQueueAndHandoff(t *testing.T) {
	rec := newRecording(t)
	l := rec.wrap(lock.New(&queueFake{rank: 2, refusals: 2}))
	ctx := context.Background()
	lk, err := l.Obtain(ctx, "jobs:1", time.Minute, lock.WithRetry(lock.Linear(time.Millisecond)))
	if err != nil {
		t.Fatalf("Obtain = %v, want a lock", err)
	}
	_ = lk.Release(ctx)
	obtainReleaseAll(t, l, "jobs:2") // no wait: no handoff, no queue

	m := rec.metrics(t)
	wantUnits(t, m, map[string]string{"locksmith.lock.handoff.duration": "s", "locksmith.lock.queue.length": "{waiter}"})
	wantBy(t, m["locksmith.lock.handoff.duration"], "locksmith.lock.group", map[string]int64{"jobs": 1})
	wantBy(t, m["locksmith.lock.queue.length"], "locksmith.lock.group", map[string]int64{"jobs": 1})
	if got, want := sumOf(m["locksmith.lock.queue.length"]), int64(2); got != want {
		t.Errorf("queue length recorded = %d, want %d", got, want)
	}
}
