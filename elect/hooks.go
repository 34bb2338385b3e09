package elect

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locksmith-go/lock"
)

// Hooks intercept what an Elector does, for instrumentation: the otel
// package implements them. Install them with [WithHooks]. Every field is
// optional. A wrapping hook must call next exactly once and return what it
// returned; it may pass on a derived context. Beneath them, the Locker's
// own hooks (lock.Hooks) see each attempt, refresh and release.
type Hooks struct {
	// Campaign wraps a whole Campaign, waiting included.
	Campaign func(ctx context.Context, e *Elector, next func(context.Context) (*Term, error)) (*Term, error)
	// Elected reports a term that began, within its Campaign. handover is
	// how long the leadership was vacant before it, as this candidate saw
	// it: from the release that woke it, or from the end of the lease of
	// the leader it last found, to its election; zero when it found no
	// leader before.
	Elected func(ctx context.Context, t *Term, handover time.Duration)
	// Ended reports, once per term, that it ended, with its error
	// (Term.Err), after Run's lead returned when it ran: overrun is then
	// by how much lead returned past the end of the lease (zero when in
	// time).
	Ended func(t *Term, err error, overrun time.Duration)
	// Resign wraps the deletion of a term's key: Term.Resign's, and the
	// release that Run makes after lead returned.
	Resign func(ctx context.Context, t *Term, next func(context.Context) error) error
}

// hookList is an Elector's hooks, outermost first.
type hookList []*Hooks

func (e *Elector) hookList() hookList { return e.hooks }

func (hs hookList) campaign(ctx context.Context, e *Elector, next func(context.Context) (*Term, error)) (*Term, error) {
	for i := len(hs) - 1; i >= 0; i-- {
		if h := hs[i].Campaign; h != nil {
			inner := next
			next = func(ctx context.Context) (*Term, error) { return h(ctx, e, inner) }
		}
	}
	return next(ctx)
}

func (hs hookList) resign(ctx context.Context, t *Term, next func(context.Context) error) error {
	for i := len(hs) - 1; i >= 0; i-- {
		if h := hs[i].Resign; h != nil {
			inner := next
			next = func(ctx context.Context) error { return h(ctx, t, inner) }
		}
	}
	return next(ctx)
}

func (hs hookList) elected(ctx context.Context, t *Term, handover time.Duration) {
	for _, h := range hs {
		if h.Elected != nil {
			h.Elected(ctx, t, handover)
		}
	}
}

func (hs hookList) ended(t *Term, err error, overrun time.Duration) {
	for _, h := range hs {
		if h.Ended != nil {
			h.Ended(t, err, overrun)
		}
	}
}

// watcher sees, through the lock's hooks, what a term's lock does: the
// leaders its campaign met, the wake-up that ended the wait, the
// refreshes' outcome and the release.
type watcher struct {
	term     atomic.Pointer[Term] // once elected
	released atomic.Bool          // a release of ours deleted the key
	refresh  atomic.Pointer[error]

	mu      sync.Mutex
	vacated time.Time // when the leader it last met would have been gone: the end of its lease, or its release's message
}

// hooks returns the lock hooks of the campaign's Obtain.
func (w *watcher) hooks() *lock.Hooks {
	return &lock.Hooks{
		Attempt: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			err := next(ctx)
			var held *lock.NotObtainedError
			if errors.As(err, &held) && held.Holder.Held && held.Holder.TTL > 0 {
				w.mu.Lock()
				w.vacated = time.Now().Add(held.Holder.TTL)
				w.mu.Unlock()
			}
			return err
		},
		Wait: func(ctx context.Context, e lock.Event) {
			if e.Op == "woken" && e.Reason == "message" {
				w.mu.Lock()
				if now := time.Now(); !w.vacated.IsZero() && now.Before(w.vacated) {
					w.vacated = now
				}
				w.mu.Unlock()
			}
		},
		Op: func(ctx context.Context, e lock.Event, next func(context.Context) error) error {
			switch e.Op {
			case "refresh":
				err := next(ctx)
				w.refresh.Store(&err)
				return err
			case "release":
				t := w.term.Load()
				if t == nil {
					return next(ctx)
				}
				return t.e.hookList().resign(ctx, t, func(ctx context.Context) error {
					err := next(ctx)
					if err == nil {
						w.released.Store(true)
					}
					return err
				})
			}
			return next(ctx)
		},
	}
}

// lastRefresh returns the last refresh's error, nil if it succeeded or
// none was made.
func (w *watcher) lastRefresh() error {
	if err := w.refresh.Load(); err != nil {
		return *err
	}
	return nil
}

// handover returns how long the leadership was vacant before elected,
// as the campaign saw it; zero when it met no leader.
func (w *watcher) handover(elected time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.vacated.IsZero() || !elected.After(w.vacated) {
		return 0
	}
	return elected.Sub(w.vacated)
}
