package harness

import "sync"

// A FencedRegister is the resource that a lock's fencing tokens guard: it
// takes a write only with a token at least that of the last write it took
// for the key, and the same token only from the same holder. It stands
// outside every fault of a run. It is safe for concurrent use.
type FencedRegister struct {
	mu     sync.Mutex
	last   map[string]fencedWrite
	counts Writes
}

// Writes counts what a FencedRegister did with the writes it was sent.
type Writes struct {
	Accepted int // taken
	// Stale counts the writes refused for a token below the last one:
	// fencing at work, against a holder that lost its lock unawares.
	Stale int
	// Collisions counts the writes refused for the last token from another
	// holder: fencing broken, as two holders were given one token.
	Collisions int
}

type fencedWrite struct {
	fence  int64
	holder string
}

// Write records a write to key by holder with its fencing token, and
// reports whether the register took it.
func (r *FencedRegister) Write(key, holder string, fence int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]fencedWrite{}
	}
	last, ok := r.last[key]
	switch {
	case ok && fence < last.fence:
		r.counts.Stale++
		return false
	case ok && fence == last.fence && holder != last.holder:
		r.counts.Collisions++
		return false
	}
	r.last[key] = fencedWrite{fence, holder}
	r.counts.Accepted++
	return true
}

// Writes returns what r did with the writes it was sent.
func (r *FencedRegister) Writes() Writes {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}

// A Counter is a resource that a lock alone guards: a holder reads it,
// works, and writes back one more. Two holders at once lose an update. It
// is safe for concurrent use.
type Counter struct {
	mu             sync.Mutex
	value, updates int
}

// Read returns the counter's value.
func (c *Counter) Read() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.value
}

// Write sets the counter to v, a value read from it plus one.
func (c *Counter) Write(v int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.value = v
	c.updates++
}

// LostUpdates returns how many of the updates written are not in the value.
func (c *Counter) LostUpdates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updates - c.value
}

// A ValueRegister is a resource that takes every write, as a plain store
// does, and counts the writes of a holder over the work of one that
// obtained the lock after it: what a compare-by-value guard (antirez's
// answer for Redlock, which has no fencing token) would have refused. It
// is safe for concurrent use.
type ValueRegister struct {
	mu        sync.Mutex
	last      map[string]int64 // the acquisition time of the last writer, per key
	overwrote int
}

// Write records a write to key by a holder that obtained the lock at
// obtained (on the run's clock).
func (r *ValueRegister) Write(key string, obtained int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]int64{}
	}
	if last, ok := r.last[key]; ok && obtained < last {
		r.overwrote++
	}
	r.last[key] = obtained
}

// StaleOverwrites returns how many writes came from a holder older than
// the last writer of their key.
func (r *ValueRegister) StaleOverwrites() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.overwrote
}
