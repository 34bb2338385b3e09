package conformance

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// The election suite's mutants break single under an Elector, each in one
// way; TestMutants runs them with the others, in child processes, where
// RunElector runs their targeted properties.
var electorMutants = []mutant{
	{name: "elect-acquire-overwrites", elector: true, kills: []string{"OneLeaderPerTerm"},
		strategy: func(b base) strategy.Strategy { return overwritesFenced{b} }},
	{name: "elect-fence-does-not-increase", elector: true, kills: []string{"OneLeaderPerTerm", "TermsIncrease", "TermsIncreaseAcrossRestart"},
		strategy: func(b base) strategy.Strategy { return constantFence{b} }},
	{name: "elect-validity-past-the-expiry", elector: true, kills: []string{"LossBeforeNextLeader", "LossBeforeNextLeaderWhenPaused"},
		strategy: func(b base) strategy.Strategy { return lateValidity{b} }},
	{name: "elect-refresh-does-nothing", elector: true, kills: []string{"NoReleaseWhileLeadRuns"},
		strategy: func(b base) strategy.Strategy { return noRefresh{b} }},
	{name: "elect-inspect-fence-off-by-one", elector: true, kills: []string{"ObserversSeeEveryTerm"},
		strategy: func(b base) strategy.Strategy { return fencePlusOne{b} }},
	{name: "elect-leave-does-nothing", elector: true, kills: []string{"CancelledCampaignLeavesNothing"},
		strategy: func(b base) strategy.Strategy { return stays{b} }},
	{name: "elect-release-without-owner-check", elector: true, kills: []string{"ResignIsIdempotent"},
		strategy: func(b base) strategy.Strategy { return plainDel{b} }},
	{name: "elect-release-sends-no-message", elector: true, kills: []string{"HandoverWakesTheNext"},
		strategy: func(b base) strategy.Strategy { return silentRelease{b} }},
	{name: "elect-relabel-does-nothing", elector: true, kills: []string{"ProclaimKeepsTheTerm"},
		strategy: func(b base) strategy.Strategy { return noRelabel{b} }},
	{name: "elect-release-does-nothing", elector: true, kills: []string{"RunReturnsLeadsError"},
		strategy: func(b base) strategy.Strategy { return noRelease{b} }},
}

// electorControl is the election suite on the unbroken strategy.
var electorControl = mutant{name: "elect-unbroken", elector: true}

// electorHarness is the election suite's harness of m: single over
// go-redis, broken as m says, on a server of the child's own where the
// machine has redis-server (so that the suite may pause and restart it),
// else on addr.
func (m mutant) electorHarness(t *testing.T, addr string) ElectorHarness {
	h := ElectorHarness{
		Conn:    func(t *testing.T) driver.Conn { return newConn(t, addr) },
		Counter: func(key string) string { k, _ := single.FenceKey(key); return k },
		Skip: map[string]string{
			"LossBeforeNextLeaderWhenPaused": "the server is not the child's own: it cannot pause it",
			"TermsIncreaseAcrossRestart":     "the server is not the child's own: it cannot restart it",
		},
	}
	if _, err := redistest.Binary(); err == nil {
		srv := redistest.Start(t, 1, "--appendonly", "yes", "--appendfsync", "always")[0]
		addr = srv.Addr
		h.Pause = func(t *testing.T, d time.Duration) { srv.Pause(); time.Sleep(d); srv.Resume() }
		h.Restart = func(t *testing.T) {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		h.Skip = nil
	}
	h.NewLocker = func(t *testing.T) *lock.Locker { return m.harness(addr).NewLocker(t) }
	return h
}

// TestElectorPropertiesKilled: every property of RunElector is killed by
// a mutant, and every mutant's target is one.
func TestElectorPropertiesKilled(t *testing.T) {
	killed := map[string]bool{}
	for _, m := range electorMutants {
		for _, p := range m.kills {
			killed[p] = true
		}
	}
	for _, p := range electorProperties {
		if !killed[p.name] {
			t.Errorf("property %s is killed by no mutant: add a mutant that breaks it", p.name)
		}
		delete(killed, p.name)
	}
	for p := range killed {
		t.Errorf("mutants target %s, which is not a property of the election suite", p)
	}
	names := slices.Collect(func(yield func(string) bool) {
		for _, p := range electorProperties {
			if !yield(p.name) {
				return
			}
		}
	})
	for _, p := range properties {
		if slices.Contains(names, p.name) {
			t.Errorf("%s names a property of both Run and RunElector: the kill matrix cannot tell them apart", p.name)
		}
	}
	if !strings.HasPrefix(electorControl.name, "elect-") {
		t.Errorf("the election control %q, want a name of the election mutants' form", electorControl.name)
	}
}

// overwritesFenced acquires with SET PX, without NX, and issues a fencing
// token all the same: two candidates lead at once.
type overwritesFenced struct{ base }

func (s overwritesFenced) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	if _, err := setPX.Run(ctx, s.conn, []string{r.Key}, r.Value(), r.TTL.Milliseconds()); err != nil {
		return strategy.Grant{}, err
	}
	k, _ := single.FenceKey(r.Key)
	n, err := driver.Do(ctx, s.conn, "INCR", k)
	fence, _ := n.(int64)
	return strategy.Grant{Fence: fence}, err
}

// lateValidity claims a validity a lease longer than the server keeps the
// key: the leader hears of its loss after the next leader is in.
type lateValidity struct{ base }

func (s lateValidity) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	g, err := s.singleStrategy.Acquire(ctx, r)
	g.Drift = -r.TTL
	return g, err
}

func (s lateValidity) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	g, err := s.singleStrategy.Refresh(ctx, key, value, ttl)
	g.Drift = -ttl
	return g, err
}

func (lateValidity) Batches() bool { return false }

// fencePlusOne reads the counter one too high.
type fencePlusOne struct{ base }

func (s fencePlusOne) Inspect(ctx context.Context, key string) (strategy.State, error) {
	st, err := s.singleStrategy.Inspect(ctx, key)
	st.Fence++
	return st, err
}

// noRelabel reports a Relabel that wrote nothing.
type noRelabel struct{ base }

func (noRelabel) Relabel(context.Context, string, string, string, time.Duration) (strategy.Grant, error) {
	return strategy.Grant{}, nil
}
