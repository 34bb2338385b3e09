package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/redis/go-redis/v9"
)

// hold is a hold of key k by holder who, obtained at start and released at
// end (ms), valid until end unless set otherwise.
func hold(k, who string, start, end int64) Hold {
	return Hold{Key: k, Holder: who, Invoked: start, Obtained: start, Released: end, ValidUntil: end}
}

func TestCheck(t *testing.T) {
	t.Run("holds one after another overlap in no way", func(t *testing.T) {
		r := Check([]Hold{hold("k", "a", 0, 10), hold("k", "b", 10, 20), hold("k", "a", 25, 30)})
		if r.RawOverlaps != 0 || r.ValidityOverlaps != 0 {
			t.Errorf("got %v, want no overlap", r)
		}
	})
	t.Run("holds of other keys do not overlap", func(t *testing.T) {
		r := Check([]Hold{hold("k", "a", 0, 10), hold("j", "b", 5, 15)})
		if r.RawOverlaps != 0 || r.ValidityOverlaps != 0 {
			t.Errorf("got %v, want no overlap", r)
		}
	})
	t.Run("a holder paused past its validity overlaps raw, not within validity", func(t *testing.T) {
		paused := hold("k", "a", 0, 50)
		paused.ValidUntil = 10
		r := Check([]Hold{paused, hold("k", "b", 20, 30)})
		if r.RawOverlaps != 1 || r.ValidityOverlaps != 0 {
			t.Errorf("got %v, want 1 raw overlap and no validity overlap", r)
		}
		if len(r.Examples) != 1 || r.Examples[0].First.Holder != "a" || r.Examples[0].Second.Holder != "b" {
			t.Errorf("examples: got %+v, want the raw overlap of a and b", r.Examples)
		}
	})
	t.Run("a hold ends at its loss signal", func(t *testing.T) {
		lost := hold("k", "a", 0, 50)
		lost.ValidUntil, lost.Lost = 40, 15
		r := Check([]Hold{lost, hold("k", "b", 20, 30)})
		if r.ValidityOverlaps != 0 {
			t.Errorf("got %v, want no validity overlap", r)
		}
	})
	t.Run("two holders within their validity overlap", func(t *testing.T) {
		r := Check([]Hold{hold("k", "a", 0, 20), hold("k", "b", 10, 30)})
		if r.ValidityOverlaps != 1 || r.RawOverlaps != 1 {
			t.Errorf("got %v, want 1 validity overlap and 1 raw", r)
		}
		if len(r.Examples) != 1 || r.Examples[0].First.Holder != "a" {
			t.Errorf("examples: got %+v, want the overlap of a and b", r.Examples)
		}
	})
	t.Run("a long hold overlaps every hold inside it", func(t *testing.T) {
		r := Check([]Hold{hold("k", "a", 0, 100), hold("k", "b", 10, 20), hold("k", "c", 30, 40), hold("k", "d", 50, 60)})
		if r.ValidityOverlaps != 3 {
			t.Errorf("got %v, want 3 validity overlaps", r)
		}
	})
	t.Run("a hold never released lasts to its validity", func(t *testing.T) {
		crashed := hold("k", "a", 0, 0)
		crashed.ValidUntil = 10
		r := Check([]Hold{crashed, hold("k", "b", 20, 30)})
		if r.RawOverlaps != 1 || r.ValidityOverlaps != 0 {
			t.Errorf("got %v, want 1 raw overlap (a never released) and no validity overlap", r)
		}
	})
	t.Run("a hold whose validity ended before its acquire returned overlaps raw only", func(t *testing.T) {
		// A client paused after it sent the acquire: the reply says the
		// lock is its own, and its validity has passed.
		late := hold("k", "b", 30, 40)
		late.ValidUntil = 20
		r := Check([]Hold{hold("k", "a", 25, 100), late})
		if r.ValidityOverlaps != 0 || r.RawOverlaps != 1 || r.Lapsed != 1 {
			t.Errorf("got %v, want 1 lapsed on arrival, 1 raw overlap and none within validity", r)
		}
	})
	t.Run("examples stop at five", func(t *testing.T) {
		holds := []Hold{hold("k", "a", 0, 100)}
		for i := range 10 {
			holds = append(holds, hold("k", fmt.Sprint(i), int64(i+1), int64(i+2)))
		}
		if r := Check(holds); r.ValidityOverlaps != 10 || len(r.Examples) != 5 {
			t.Errorf("got %v with %d examples, want 10 overlaps and 5 examples", r, len(r.Examples))
		}
	})
}

func TestCheckFences(t *testing.T) {
	fenced := func(h Hold, fence int64) Hold { h.Fence = fence; return h }
	t.Run("increasing tokens in acquisition order are fine", func(t *testing.T) {
		r := Check([]Hold{fenced(hold("k", "a", 0, 10), 1), fenced(hold("k", "b", 10, 20), 2), fenced(hold("j", "c", 0, 10), 1)})
		if r.FencesIssuedTwice != 0 || r.FencesOutOfOrder != 0 {
			t.Errorf("got %v, want fences in order", r)
		}
	})
	t.Run("a token given to two holds is issued twice, and out of order", func(t *testing.T) {
		r := Check([]Hold{fenced(hold("k", "a", 0, 10), 7), fenced(hold("k", "b", 20, 30), 7)})
		if r.FencesIssuedTwice != 1 || r.FencesOutOfOrder != 1 {
			t.Errorf("got %v, want 1 fence issued twice and 1 out of order", r)
		}
	})
	t.Run("a lower token after a higher one is out of order", func(t *testing.T) {
		r := Check([]Hold{fenced(hold("k", "a", 0, 10), 9), fenced(hold("k", "b", 20, 30), 3)})
		if r.FencesOutOfOrder != 1 || r.FencesIssuedTwice != 0 {
			t.Errorf("got %v, want 1 fence out of order", r)
		}
	})
	t.Run("acquires on their way together may get their tokens in either order", func(t *testing.T) {
		a, b := fenced(hold("k", "a", 5, 10), 2), fenced(hold("k", "b", 12, 20), 1)
		b.Invoked = 0 // b's acquire was invoked before a's returned
		if r := Check([]Hold{a, b}); r.FencesOutOfOrder != 0 {
			t.Errorf("got %v, want no fence out of order", r)
		}
	})
	t.Run("holds without fencing are not checked", func(t *testing.T) {
		if r := Check([]Hold{hold("k", "a", 0, 10), hold("k", "b", 10, 20)}); r.FencesIssuedTwice != 0 || r.FencesOutOfOrder != 0 {
			t.Errorf("got %v, want no fence counted", r)
		}
	})
}

func TestFencedRegister(t *testing.T) {
	var r FencedRegister
	steps := []struct {
		holder string
		fence  int64
		want   bool
	}{
		{"a", 1, true},
		{"a", 1, true},  // the same holder again
		{"b", 2, true},  // a newer holder
		{"a", 1, false}, // the old holder, unaware of its loss: stale
		{"c", 2, false}, // another holder with b's token: a collision
		{"c", 3, true},
	}
	for _, s := range steps {
		if got := r.Write("k", s.holder, s.fence); got != s.want {
			t.Errorf("Write(k, %s, %d) = %v, want %v", s.holder, s.fence, got, s.want)
		}
	}
	if got, want := r.Writes(), (Writes{Accepted: 4, Stale: 1, Collisions: 1}); got != want {
		t.Errorf("Writes() = %+v, want %+v", got, want)
	}
	if !r.Write("j", "a", 1) {
		t.Errorf("Write(j, a, 1) = false, want true: each key has its own last token")
	}
}

func TestCounter(t *testing.T) {
	t.Run("updates one after another are all kept", func(t *testing.T) {
		var c Counter
		for range 3 {
			c.Write(c.Read() + 1)
		}
		if got := c.LostUpdates(); got != 0 {
			t.Errorf("LostUpdates() = %d, want 0", got)
		}
	})
	t.Run("two holders at once lose an update", func(t *testing.T) {
		var c Counter
		a, b := c.Read(), c.Read()
		c.Write(a + 1)
		c.Write(b + 1)
		if got := c.LostUpdates(); got != 1 {
			t.Errorf("LostUpdates() = %d, want 1", got)
		}
	})
	t.Run("it is safe for concurrent use", func(t *testing.T) {
		var c Counter
		var mu sync.Mutex // the lock that guards it
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					mu.Lock()
					c.Write(c.Read() + 1)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if got, lost := c.Read(), c.LostUpdates(); got != 800 || lost != 0 {
			t.Errorf("Read() = %d, LostUpdates() = %d, want 800 and 0", got, lost)
		}
	})
}

// BenchmarkCheck checks a history of a million holds of 16 keys, in turn
// per key, a few of them overlapping.
func BenchmarkCheck(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	holds := make([]Hold, 1_000_000)
	next := make(map[string]int64)
	for i := range holds {
		k := fmt.Sprint("k", rng.IntN(16))
		start := next[k] + rng.Int64N(1000)
		end := start + 1 + rng.Int64N(10_000)
		next[k] = end
		if rng.IntN(10_000) == 0 {
			start -= 5 // an overlap
		}
		holds[i] = hold(k, fmt.Sprint("c", i%8), start, end)
		holds[i].Fence = int64(i + 1)
	}
	b.ResetTimer()
	for b.Loop() {
		Check(holds)
	}
}

func TestLive(t *testing.T) {
	holds := []Hold{{Obtained: 10}, {Obtained: 30}, {Obtained: 70}}
	t.Run("a heal's wait ends at the first hold after it", func(t *testing.T) {
		l := Live(holds, []int64{5, 25}, nil)
		if want := []time.Duration{5, 5}; !slices.Equal(l.Waits, want) || l.Cut != 0 || l.Never != 0 {
			t.Errorf("got %+v, want waits %v", l, want)
		}
	})
	t.Run("a heal that the next fault follows before any hold is cut short", func(t *testing.T) {
		l := Live(holds, []int64{40}, []int64{0, 50})
		if len(l.Waits) != 0 || l.Cut != 1 {
			t.Errorf("got %+v, want 1 cut short and no wait", l)
		}
	})
	t.Run("a heal that no hold follows is never followed", func(t *testing.T) {
		l := Live(holds, []int64{80}, []int64{0})
		if len(l.Waits) != 0 || l.Never != 1 {
			t.Errorf("got %+v, want 1 never followed", l)
		}
	})
	t.Run("Over counts the waits above a bound", func(t *testing.T) {
		l := Live(holds, []int64{0, 5, 25}, nil)
		if got := l.Over(5); got != 1 {
			t.Errorf("Over(5) of waits %v: got %d, want 1", l.Waits, got)
		}
	})
}

func TestLeaks(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	for key, ttl := range map[string]time.Duration{"lock": time.Minute, "immortal": 0, "{lock}:fence": 0} {
		if err := admin.Set(ctx, key, "v", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	noTTL, left, err := Leaks(ctx, admin)
	slices.Sort(left)
	if err != nil || !slices.Equal(noTTL, []string{"immortal"}) || !slices.Equal(left, []string{"immortal", "lock"}) {
		t.Errorf("Leaks = %q, %q, %v; want [immortal] without an expiry, [immortal lock] left, and the fencing counter kept", noTTL, left, err)
	}
}
