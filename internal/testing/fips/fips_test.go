// Package fips_test runs the conformance suite in FIPS 140-only mode
// (GODEBUG=fips140=only), where crypto/sha1 and every other algorithm that
// FIPS 140-3 does not approve panic: every strategy, over every driver, on
// real servers. It imports only the module's own packages and their
// drivers, so that no dependency's start-up hashes what this mode forbids.
package fips_test

import (
	"crypto/fips140"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/matrix"
	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// quick are the properties that the suite runs in FIPS 140-only mode
// without LOCKSMITH_FULL=1, as README's test command does, when it starts
// the child: between them they run every kind of script (an acquire that
// waits, a release, a refresh, a batch of refreshes, the queue, Inspect,
// the fencing counter, the shapes) over every driver. The full suite
// would add minutes to the command for what differs in this mode: how a
// script is named to the server.
const quick = "ExactlyOneWinner|ReleaseFreesTheLock|RefreshExtends|ManyHeldLocksStayHeld|WaitersObtainInTurn|InspectReadsTheLock|FencingTokens|MultiKeyExclusion|SemaphorePermits|ReadWriteDowngrade"

// TestFIPS140Only runs the suite in FIPS 140-only mode: itself, if the
// test binary was started in it, as CI does; otherwise again, in a child
// process of the same binary started with GODEBUG=fips140=only, so that
// README's test command checks it too. The child fails at once if a
// package's start-up panics there, as any program that imported a
// strategy did while scripts hashed themselves when they were made.
func TestFIPS140Only(t *testing.T) {
	if !fips140.Enabled() {
		run := "^TestFIPS140Only$"
		if !redistest.Full() {
			run += "/./^(" + quick + ")$"
		}
		cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v")
		cmd.Env = append(os.Environ(), "GODEBUG=fips140=only")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the suite in FIPS 140-only mode: %v\n%s", err, out)
		}
		t.Logf("the suite in FIPS 140-only mode passed: %d subtests", strings.Count(string(out), "--- PASS"))
		return
	}
	addr, real := redistest.Addr(t)
	if !real {
		t.Skip("redis-server not found: the embedded server runs in the test's own process, and hashes scripts with crypto/sha1")
	}
	servers := redistest.Start(t, 5)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	var combos []matrix.Combo
	combos = append(combos, matrix.Prefix("single", matrix.Single(addr))...)
	for _, c := range matrix.Prefix("setnx-getset", matrix.SetnxGetset(addr)) {
		if strings.HasPrefix(c.Name, "setnx-getset/ms+safety-ttl/") {
			combos = append(combos, c) // every driver; the other formats differ only in the strategy
		}
	}
	for _, c := range matrix.Prefix("redlock", matrix.Redlock(addrs)) {
		if c.Name == "redlock/mixed" {
			combos = append(combos, c) // its nodes use every driver
		}
	}
	for i := range combos {
		combos[i].Name = strings.ReplaceAll(combos[i].Name, "/", ":") // one level, for quick's pattern
	}
	matrix.Run(t, combos, 0)
}
