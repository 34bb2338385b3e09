// Package fips_test runs the conformance suite in FIPS 140-only mode
// (GODEBUG=fips140=only), where crypto/sha1 and every other algorithm that
// FIPS 140-3 does not approve panic: every strategy, over every driver, on
// real servers. It imports only the module's own packages and their
// drivers, so that no dependency's start-up hashes what this mode forbids.
package fips_test

import (
	"crypto/fips140"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/locktest"
)

// quick are the properties that the suite runs in FIPS 140-only mode when
// the test starts a child for it, as in README's test command: between
// them they run every kind of script (an acquire that waits, a release, a
// refresh, a batch of refreshes, the queue, Inspect, the fencing counter,
// the shapes) over every driver. The whole suite would add minutes to the
// command, and load the machine that runs it beside the other packages,
// for what differs in this mode: how a script is named to the server. CI
// runs the whole suite in a step of its own, with the test binary started
// in FIPS 140-only mode.
const quick = "ExactlyOneWinner|ReleaseFreesTheLock|RefreshExtends|ManyHeldLocksStayHeld|WaitersObtainInTurn|InspectReadsTheLock|FencingTokens|MultiKeyExclusion|SemaphorePermits|ReadWriteDowngrade"

// TestFIPS140Only runs the conformance suite in FIPS 140-only mode: the
// whole suite, if the test binary was started in that mode, as CI's step
// does (GODEBUG=fips140=only go test ./internal/testing/fips/); otherwise
// the quick properties, in a child process of the same binary started with
// GODEBUG=fips140=only, so that README's test command checks this mode
// too. The child fails at once if a package's start-up panics there, as
// any program that imported a strategy did while scripts hashed themselves
// when they were made. The strategies run one after another, each over
// every driver at once, as their own packages run them.
func TestFIPS140Only(t *testing.T) {
	if !fips140.Enabled() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFIPS140Only$/./^("+quick+")$", "-test.v")
		cmd.Env = append(os.Environ(), "GODEBUG=fips140=only")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the suite in FIPS 140-only mode: %v\n%s", err, out)
		}
		t.Logf("the suite in FIPS 140-only mode passed: %d subtests", strings.Count(string(out), "--- PASS"))
		return
	}
	if _, err := locktest.StartServer(); !errors.Is(err, locktest.ErrFIPSOnly) {
		t.Errorf("locktest.StartServer in FIPS 140-only mode = %v, want ErrFIPSOnly", err)
	}
	if _, err := redistest.Binary(); err != nil && !redistest.Required() {
		t.Skipf("redis-server not found (%v): the embedded server runs in the test's own process, and hashes scripts with crypto/sha1", err)
	}
	servers := redistest.Start(t, 6)
	addr := servers[5].Addr
	servers = servers[:5]
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	var setnxGetset, redlock []matrix.Combo
	for _, c := range matrix.SetnxGetset(addr) {
		if strings.HasPrefix(c.Name, "ms+safety-ttl/") {
			setnxGetset = append(setnxGetset, c) // every driver; the other formats differ only in the strategy
		}
	}
	for _, c := range matrix.Redlock(addrs) {
		if c.Name == "mixed" {
			redlock = append(redlock, c) // its nodes use every driver
		}
	}
	for _, s := range []struct {
		name   string
		combos []matrix.Combo
	}{
		{"single", matrix.Single(addr)},
		{"setnx-getset", setnxGetset},
		{"redlock", redlock},
	} {
		combos := matrix.Prefix(s.name, s.combos)
		for i := range combos {
			combos[i].Name = strings.ReplaceAll(combos[i].Name, "/", ":") // one level, for quick's pattern
		}
		matrix.Run(t, combos, 0)
	}
}
