package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// KeySlot returns the Cluster hash slot of key (or of a shard channel).
func (c *Cluster) KeySlot(t testing.TB, key string) int {
	t.Helper()
	reply := c.Servers[0].do(t, "CLUSTER", "KEYSLOT", key)
	slot, err := strconv.Atoi(reply)
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %q = %q: %v", key, reply, err)
	}
	return slot
}

// Owner returns the master that owns slot, as s sees the cluster.
func (c *Cluster) Owner(t testing.TB, slot int) *Server {
	t.Helper()
	return c.ownerSeenBy(t, c.Servers[0], slot)
}

// ownerSeenBy returns the owner of slot in the view of s, or nil.
func (c *Cluster) ownerSeenBy(t testing.TB, s *Server, slot int) *Server {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(s.do(t, "CLUSTER", "NODES")), "\n") {
		f := strings.Fields(line) // id addr@bus flags master ping pong epoch state slots...
		if len(f) < 8 || !owns(f[8:], slot) {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		for _, srv := range c.Servers {
			if srv.Addr == addr {
				return srv
			}
		}
	}
	return nil
}

// owns reports whether slot is in ranges ("lo-hi" or "n"; "[...]" marks a
// slot being migrated, which the node still owns, and is skipped).
func owns(ranges []string, slot int) bool {
	for _, r := range ranges {
		if strings.HasPrefix(r, "[") {
			continue
		}
		lo, hi, found := strings.Cut(r, "-")
		if !found {
			hi = lo
		}
		l, err1 := strconv.Atoi(lo)
		h, err2 := strconv.Atoi(hi)
		if err1 == nil && err2 == nil && l <= slot && slot <= h {
			return true
		}
	}
	return false
}

// MoveSlot moves slot, with its keys (whose names must hold no space), to
// the master to, as a resharding does: IMPORTING on to, MIGRATING on the
// owner, MIGRATE of the keys, then NODE on to, on the other masters, and on
// the owner last (which drops its subscriptions to the slot's shard
// channels then). It returns once every master sees to as the owner.
func (c *Cluster) MoveSlot(t testing.TB, slot int, to *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	from := c.Owner(t, slot)
	if from == to {
		t.Fatalf("MoveSlot(%d): %s owns it already", slot, to.Addr)
	}
	fromID, toID := from.do(t, "CLUSTER", "MYID"), to.do(t, "CLUSTER", "MYID")
	n := strconv.Itoa(slot)
	to.do(t, "CLUSTER", "SETSLOT", n, "IMPORTING", fromID)
	from.do(t, "CLUSTER", "SETSLOT", n, "MIGRATING", toID)
	for {
		keys := strings.Fields(from.do(t, "CLUSTER", "GETKEYSINSLOT", n, "100"))
		if len(keys) == 0 {
			break
		}
		from.do(t, append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(to.Port), "", "0", "5000", "KEYS"}, keys...)...)
	}
	to.do(t, "CLUSTER", "SETSLOT", n, "NODE", toID)
	for _, s := range c.Servers {
		if s != from && s != to {
			s.do(t, "CLUSTER", "SETSLOT", n, "NODE", toID)
		}
	}
	from.do(t, "CLUSTER", "SETSLOT", n, "NODE", toID)
	// Every master must come to see to as the owner. On a loaded machine,
	// a master's view can go back to the old owner, from gossip that left
	// before the old owner's SETSLOT (CI: to itself, 30s later, still saw
	// from): such a master is told again, to first with a new epoch that
	// wins over the old claim, as redis-cli --cluster fix does.
	for _, s := range c.Servers {
		for tries := 1; c.ownerSeenBy(t, s, slot) != to; tries++ {
			if ctx.Err() != nil {
				t.Fatalf("MoveSlot(%d): %s does not see %s as the owner", slot, s.Addr, to.Addr)
			}
			if tries%100 == 0 { // a second, every second
				to.do(t, "CLUSTER", "BUMPEPOCH")
				to.do(t, "CLUSTER", "SETSLOT", n, "NODE", toID)
				s.do(t, "CLUSTER", "SETSLOT", n, "NODE", toID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
