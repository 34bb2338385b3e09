package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/locksmith-go/lock"
)

// events reports run's steps on stderr, as JSON lines with --json and as
// text lines with -v, and watches the lock through its hooks.
type events struct {
	app *app

	locks    []string      // a lock of several names: them all, for the events that name it
	queued   atomic.Bool   // the waiter joined the lock's queue
	cleanups chan struct{} // a clean-up ended, such as a waiter's leaving
}

func newEvents(a *app) *events {
	return &events{app: a, cleanups: make(chan struct{}, 1)}
}

// emit reports the event name with its fields, given as key, value pairs;
// nil values, and nil slices and maps, are left out. Never pass it the token. Each event is one
// write, so events from the lock's goroutines (its hooks) do not mix.
func (ev *events) emit(name string, kv ...any) {
	a := ev.app
	if !a.json && (!a.verbose || a.quiet) {
		return
	}
	var fields bytes.Buffer
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		switch x := v.(type) {
		case nil:
			continue
		case []string:
			if x == nil {
				continue
			}
		case fences:
			if x == nil {
				continue
			}
		case time.Time:
			v = x.Format(time.RFC3339Nano)
		}
		if a.json {
			j, _ := json.Marshal(v)
			fmt.Fprintf(&fields, ",%q:%s", kv[i], j)
		} else {
			fmt.Fprintf(&fields, " %s=%v", kv[i], v)
		}
	}
	if !a.json {
		a.logf("%s%s", name, fields.Bytes())
		return
	}
	fmt.Fprintf(a.stderr, "{\"time\":%q,\"event\":%q%s}\n", time.Now().UTC().Format(time.RFC3339Nano), name, fields.Bytes())
}

// hooks are the lock's hooks that report the wait and the refreshes, and
// tell left when a waiter's clean-up ended.
func (ev *events) hooks() *lock.Hooks {
	return &lock.Hooks{
		Wait: func(_ context.Context, e lock.Event) {
			switch e.Op {
			case "enqueued":
				ev.queued.Store(true)
				ev.emit("queued", "rank", e.Rank)
			case "woken":
				if e.Reason != "timer" { // the timer's wake-ups are the polls of a long wait
					ev.emit("woken", "reason", e.Reason)
				}
			}
		},
		Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			err := next(ctx)
			switch {
			case e.Op == "refresh" && err == nil:
				ev.emit("refreshed", "lock", e.Key, "locks", ev.locks)
			case e.Op == "refresh":
				ev.emit("refresh_failed", "error", err.Error())
			case e.Op == "cleanup":
				select {
				case ev.cleanups <- struct{}{}:
				default: // one is pending already
				}
			}
			return err
		},
	}
}

// leaveTimeout bounds how long run waits, after giving up, for its waiter
// to leave the lock's queue: past it, the queue drops the waiter anyway,
// after its patience.
const leaveTimeout = time.Second

// left waits until a waiter that joined the lock's queue has left it:
// Obtain leaves in the background once it gave up, and run would otherwise
// close the connections under it.
func (ev *events) left() {
	if !ev.queued.Load() {
		return
	}
	select {
	case <-ev.cleanups:
	case <-time.After(leaveTimeout):
	}
}
