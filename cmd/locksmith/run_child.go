package main

import (
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/locksmith-go/lock"
)

// supervise waits for the command c to exit, while lk is held: it forwards
// signals to c's process group, stops the group at --max-runtime, and stops
// it before the lease could pass to anyone else when the lock is lost (see
// run's help). Once c exited, it kills what is left of the group, since that
// would run on without the lock, and reaps c.
func (r *runner) supervise(lk *lock.Lock, c *child, sigs <-chan os.Signal) (*os.ProcessState, error) {
	grace := r.f.killGrace
	d := lk.ValidUntil() // the validity deadline; kept after the lock zeroes it on loss
	var (
		killBy time.Time // when SIGKILL is due, but for D - margin; zero: not stopping
		killed bool
		ints   int // SIGINTs received
	)
	var maxRuntime <-chan time.Time
	if r.f.maxRuntime > 0 {
		t := time.NewTimer(r.f.maxRuntime)
		defer t.Stop()
		maxRuntime = t.C
	}
	send := func(sig syscall.Signal, why string) {
		if err := c.signal(sig); err != nil {
			r.warnf("sending %s to the command: %v", signalName(sig), err)
		}
		r.events.emit("signal", "signal", signalName(sig), "why", why, "pid", c.pid)
	}
	// stop starts stopping the group: SIGKILL follows within the grace.
	stop := func(now time.Time) {
		if by := now.Add(grace); killBy.IsZero() || by.Before(killBy) {
			killBy = by
		}
	}
	lose := func(now time.Time, reason string) {
		if r.res.Outcome == "lost" {
			return
		}
		r.res.Outcome, r.res.LossReason = "lost", reason
		lostAt, valid := wall(now), wall(d)
		r.res.LostAt, r.res.ValidUntil = &lostAt, &valid
		r.events.emit("lost", "lock", r.name, "locks", r.events.locks, "reason", reason, "valid_until", valid)
		send(syscall.SIGTERM, "lost")
		stop(now)
	}
	done := lk.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// The deadline moves with each successful refresh; read it before
		// every decision (a timer armed for an older one just wakes the
		// loop early). It is zero once the lock is lost: keep the last.
		if v := lk.ValidUntil(); !v.IsZero() {
			d = v
		}
		kill, why := d.Add(-killMargin), "validity" // SIGKILL before the validity deadline, always
		if !killBy.IsZero() && killBy.Before(kill) {
			kill, why = killBy, "kill-grace"
		}
		term := d.Add(-grace - killMargin) // SIGTERM while refreshes fail
		next := kill
		if r.res.Outcome != "lost" && term.Before(next) {
			next = term
		}
		var due <-chan time.Time
		if !killed {
			timer.Reset(time.Until(next))
			due = timer.C
		}
		select {
		case <-c.exited:
			if err := c.signal(syscall.SIGKILL); err != nil {
				r.warnf("killing what is left of the command's process group: %v", err)
			}
			st, err := c.reap()
			r.events.emit("exited", "pid", c.pid, "status", st.String())
			return st, err
		case sig := <-sigs:
			s := sig.(syscall.Signal)
			send(s, "forwarded")
			if terminating(sig) {
				stop(time.Now())
				if s == syscall.SIGINT {
					if ints++; ints > 1 {
						killBy = time.Now() // a second SIGINT kills at once
					}
				}
			}
		case <-maxRuntime:
			maxRuntime = nil
			if r.res.Outcome == "" {
				r.res.Outcome = "max_runtime"
			}
			send(syscall.SIGTERM, "max-runtime")
			stop(time.Now())
		case <-done:
			done = nil
			err := lk.Err()
			switch {
			case errors.Is(err, lock.ErrBroken):
				lose(time.Now(), "broken")
			case errors.Is(err, lock.ErrExpired):
				lose(time.Now(), "expired")
			case errors.Is(err, lock.ErrTaken):
				lose(time.Now(), "taken")
			default: // lapsed: D passed, and SIGKILL was due before it
				lose(time.Now(), "lapsed")
				killBy = time.Now()
			}
		case now := <-due:
			if v := lk.ValidUntil(); v.After(d) {
				continue // refreshed since the timer was armed
			}
			if r.res.Outcome != "lost" && !now.Before(term) {
				lose(now, "unconfirmed")
			}
			if !now.Before(kill) {
				send(syscall.SIGKILL, why)
				killed = true
			}
		}
	}
}
