package locktest

import (
	"strings"
	"time"
)

// ExpireNow removes key at once, as the end of its TTL would, and reports
// whether it was there: the holder's next Refresh, TTL or Release, or its
// auto-refresh, finds the lock gone (lock.ErrExpired), and another Obtain
// takes it. No release message wakes the waiters, as after an expiry. An
// operator's DEL, or a legacy client's, looks the same to the holder.
func (s *Server) ExpireNow(key string) bool { return s.m.Del(key) }

// Overwrite sets key, a lock's key, to value, keeping its TTL, as another
// holder that took the lock would: the holder's next call finds the lock
// taken (lock.ErrTaken). It reports whether key was there; a key that was
// not is set with no TTL. A lock that is not a plain string key (a
// semaphore's or a read-write lock's) is replaced by the string.
func (s *Server) Overwrite(key, value string) bool {
	ttl, there := s.m.TTL(key), s.m.Exists(key)
	_ = s.m.Set(key, value) // a string: never refused
	if ttl > 0 {
		s.m.SetTTL(key, ttl)
	}
	return there
}

// FastForward moves the server's clock d ahead, for good: every TTL is d
// shorter, and TIME d later, from the next command on, as if d had passed
// on the server alone. A lock whose TTL it passes is gone to the next
// command, without a sleep. The clients' clocks do not move: a holder's
// ValidUntil is on its own monotonic clock, so it learns of the loss from
// its next call (lock.ErrExpired), not from its deadline (lock.ErrLapsed).
// A negative d is ignored: the clock never goes back.
func (s *Server) FastForward(d time.Duration) {
	if d <= 0 {
		return
	}
	c := s.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ahead += d
	c.last = c.last.Add(d)
	c.m.SetTime(c.last)
}

// Pause makes the server hold every command it receives, on every
// connection, until Resume: as a redis-server stopped with SIGSTOP, it
// keeps its connections open and answers nothing, so that calls end with
// their context (lock.ErrNoAnswer), and the commands they sent run when
// the server resumes. Close resumes it. Pausing a paused server does
// nothing.
func (s *Server) Pause() {
	c := s.clock
	c.faults.Lock()
	defer c.faults.Unlock()
	if c.paused == nil {
		c.paused = make(chan struct{})
	}
}

// Resume lets a paused server answer again, the commands it held first.
// Resuming a server that is not paused does nothing.
func (s *Server) Resume() {
	c := s.clock
	c.faults.Lock()
	defer c.faults.Unlock()
	if c.paused != nil {
		close(c.paused)
		c.paused = nil
	}
}

// Refuse makes the server refuse command (in any case: "EVALSHA", "SET"),
// whether a client or a script sends it, as an ACL that denies it would,
// with Redis's words: NOPERM User default has no permissions to run the
// '<command>' command; a script that calls it fails with an error that
// holds those words. A strategy meets what it meets on such a server: single, refused EVALSHA
// and EVAL, locks without scripts. Call undo to lift the refusal;
// refusals of one command count, so it is refused until each is undone.
func (s *Server) Refuse(command string) (undo func()) {
	name := strings.ToLower(command)
	c := s.clock
	c.faults.Lock()
	c.refused[name]++
	c.faults.Unlock()
	done := false
	return func() {
		c.faults.Lock()
		defer c.faults.Unlock()
		if !done {
			done = true
			c.refused[name]--
		}
	}
}

// noPerm is the error of an ACL that denies cmd, as Redis 7.2 and Valkey
// word it.
func noPerm(cmd string) string {
	return "NOPERM User default has no permissions to run the '" + strings.ToLower(cmd) + "' command"
}
