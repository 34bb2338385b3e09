package conformance

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/driver/goredis"
	"github.com/locksmith-go/lock/internal/notify"
	"github.com/locksmith-go/lock/internal/reach"
	"github.com/locksmith-go/lock/internal/testing/redistest"
	"github.com/locksmith-go/lock/strategy"
	"github.com/locksmith-go/lock/strategy/single"
)

// The mutants are deliberately broken lockers and drivers, in the spirit of
// testing/fstest's tests of itself: each breaks one thing, and the suite
// must fail on it. A failing suite fails the test that runs it, so
// TestMutants runs each mutant in a child process (this test binary, with
// -test.run selecting TestMutantRun/<mutant>) and reads which properties
// failed from its -test.v output.
//
// Each mutant runs only the properties it is meant to kill, and each of
// them must fail; every property of Run and RunDriver must be killed by at
// least one mutant. A mutant targets only the properties it fails whatever
// the machine's load: acquire-overwrites also fails ExpiryFreesTheLock, but
// only when no stall outlasts the short TTL, so acquire-ignores-ttl, which
// fails it always, is the one that targets it.

// Environment of a mutant's child process.
const (
	envMutant = "LOCKSMITH_CONFORMANCE_MUTANT"      // the mutant's name
	envAddr   = "LOCKSMITH_CONFORMANCE_MUTANT_ADDR" // the server the parent started
)

// concurrentChildren bounds the child processes running at once.
const concurrentChildren = 4

// A mutant breaks one thing in single over go-redis: its strategy, its
// Locker, its constructor, or (for RunDriver) its driver.Conn.
type mutant struct {
	name  string
	kills []string // the properties that must fail

	strategy func(base) strategy.Strategy
	locker   func(*lock.Locker) *lock.Locker
	nilConn  func() (*lock.Locker, error)
	conn     func(driver.Conn) driver.Conn

	// cluster runs the driver mutant over a go-redis ClusterClient, on a
	// Cluster of three masters, for a fault only a Cluster shows.
	cluster bool

	// For the harnesses of TestMissingCapability: bare leaves Conns,
	// NewUnreachable and NewWithNilConn unset, and skip is Harness.Skip.
	bare bool
	skip map[string]string

	// poll builds Lockers that poll (lock.WithPolling), for
	// TestNotificationPropertiesSkip.
	poll bool

	// elector runs the election suite (RunElector) rather than Run.
	elector bool
}

// mutants are every mutant: these, and those of shared locks.
var mutants = slices.Concat(lockMutants, sharedMutants, electorMutants)

var lockMutants = []mutant{
	// Strategies.
	{name: "acquire-overwrites", kills: []string{"ExactlyOneWinner", "MutualExclusion", "CallerChosenToken", "KeyOfAnotherType", "BatchMutualExclusion"},
		strategy: func(b base) strategy.Strategy { return overwrites{b} }},
	{name: "acquire-ignores-ttl", kills: []string{"ExpiryFreesTheLock", "NotHeldAfterExpiry", "TTLReportsRemaining"},
		strategy: func(b base) strategy.Strategy { return immortal{b} }},
	{name: "release-without-owner-check", kills: []string{"NonOwnerCannotTouch", "ExpiredAndTakenDiffer"},
		strategy: func(b base) strategy.Strategy { return plainDel{b} }},
	{name: "refresh-without-owner-check", kills: []string{"NonOwnerCannotTouch", "LossCancelsTheHolder"},
		strategy: func(b base) strategy.Strategy { return plainPExpire{b} }},
	{name: "refresh-does-nothing", kills: []string{"RefreshExtends", "AutoRefresh"},
		strategy: func(b base) strategy.Strategy { return noRefresh{b} }},
	{name: "release-does-nothing", kills: []string{"ReleaseFreesTheLock", "DoHoldsAndReleases", "BatchReleaseLeavesNothing"},
		strategy: func(b base) strategy.Strategy { return noRelease{b} }},
	{name: "ttl-in-the-wrong-unit", kills: []string{"TTLReportsRemaining"},
		strategy: func(b base) strategy.Strategy { return ttlTimes1000{b} }},
	{name: "expired-and-taken-swapped", kills: []string{"ExpiredAndTakenDiffer", "LossCancelsTheHolder", "DoHoldsAndReleases"},
		strategy: func(b base) strategy.Strategy { return swapped{b} }},
	{name: "batch-refresh-does-nothing", kills: []string{"ManyHeldLocksStayHeld", "AutoRefresh"},
		strategy: func(b base) strategy.Strategy { return noBatchRefresh{b} }},
	{name: "batch-refresh-without-owner-check", kills: []string{"BatchReportsEachLoss", "LossCancelsTheHolder"},
		strategy: func(b base) strategy.Strategy { return plainBatchPExpire{b} }},
	{name: "guard-unchecked", kills: []string{"GuardedWriteNeedsTheLock", "GuardedWriteRacesAnAcquire", "GuardedWriteChecksEveryKey"},
		strategy: func(b base) strategy.Strategy { return unguarded{b, false} }},
	{name: "guard-commands-unchecked", kills: []string{"GuardedCommandsNeedTheLock"},
		strategy: func(b base) strategy.Strategy { return unguarded{b, true} }},
	{name: "guard-checks-then-writes", kills: []string{"GuardedWriteRacesAnAcquire"},
		strategy: func(b base) strategy.Strategy { return checksThenWrites{b} }},
	{name: "guard-checks-the-first-key", kills: []string{"GuardedWriteChecksEveryKey"},
		strategy: func(b base) strategy.Strategy { return firstKeyGuard{b} }},
	{name: "metadata-dropped", kills: []string{"MetadataRoundTrips"},
		strategy: func(b base) strategy.Strategy { return noMetadata{b} }},
	{name: "stamp-dropped", kills: []string{"WaiterNamesTheHolder", "InspectReadsTheLock"},
		strategy: func(b base) strategy.Strategy { return noStamp{b} }},
	{name: "chosen-token-ignored", kills: []string{"CallerChosenToken"},
		strategy: func(b base) strategy.Strategy { return ownToken{b} }},
	{name: "errors-show-the-value", kills: []string{"TokenStaysSecret"},
		strategy: func(b base) strategy.Strategy { return leaky{b} }},
	{name: "fails-open", kills: []string{"UnreachableRedisIsError", "KeyOfAnotherType"},
		strategy: func(b base) strategy.Strategy { return failsOpen{b} }},
	{name: "fence-does-not-increase", kills: []string{"FencingTokens"},
		strategy: func(b base) strategy.Strategy { return constantFence{b} }},
	{name: "fence-restarts-from-one", kills: []string{"FencesSurviveCounterLoss"},
		strategy: func(b base) strategy.Strategy { return fenceFromOne{b} }},
	{name: "inspect-sees-nothing", kills: []string{"InspectReadsTheLock"},
		strategy: func(b base) strategy.Strategy { return blindInspect{b} }},
	{name: "break-ignores-the-fingerprint", kills: []string{"BreakIsGuarded"},
		strategy: func(b base) strategy.Strategy { return blindBreak{b} }},
	{name: "release-sends-no-message", kills: []string{"ReleaseWakesTheHead"},
		strategy: func(b base) strategy.Strategy { return silentRelease{b} }},
	{name: "queue-serves-newest-first", kills: []string{"WaitersObtainInTurn"},
		strategy: func(b base) strategy.Strategy { return newestFirst{b} }},
	{name: "holder-ttl-unreported", kills: []string{"LostMessageCostsOnePoll"},
		strategy: func(b base) strategy.Strategy { return noHolderTTL{b} }},
	{name: "patience-ignored", kills: []string{"DeadWaiterDoesNotStall"},
		strategy: func(b base) strategy.Strategy { return patient{b} }},
	{name: "leave-does-nothing", kills: []string{"CancelledWaiterLeavesNothing"},
		strategy: func(b base) strategy.Strategy { return stays{b} }},
	{name: "mutex-held-across-a-hook", kills: []string{"SurvivesHookPanics"},
		strategy: func(b base) strategy.Strategy { return reportsUnderLock{b, new(sync.Mutex)} }},
	{name: "acquire-keys-one-by-one", kills: []string{"MultiKeyAllOrNothing"},
		strategy: func(b base) strategy.Strategy { return oneByOne{b} }},
	{name: "acquire-keys-overwrites-all-but-the-first", kills: []string{"MultiKeyExclusion"},
		strategy: func(b base) strategy.Strategy { return overwritesTheRest{b} }},
	{name: "refresh-keys-extends-what-it-can", kills: []string{"MultiKeyRefreshAllOrNothing"},
		strategy: func(b base) strategy.Strategy { return extendsWhatItCan{b} }},
	{name: "refresh-keys-checks-the-first-only", kills: []string{"MultiKeyRefreshAllOrNothing", "MultiKeyLossEndsTheLock"},
		strategy: func(b base) strategy.Strategy { return checksTheFirst{b} }},
	{name: "release-keys-deletes-whatever-is-there", kills: []string{"MultiKeyReleaseReportsEachKey"},
		strategy: func(b base) strategy.Strategy { return deletesWhatever{b} }},
	{name: "release-keys-deletes-the-first-only", kills: []string{"MultiKeyLeavesNothing"},
		strategy: func(b base) strategy.Strategy { return releasesTheFirst{b} }},

	// Lockers: a Locker's defaults, or hooks that break what the caller sees.
	{name: "errors-flattened", kills: []string{"ContextEndsTheWait", "InvalidArguments"},
		locker: func(l *lock.Locker) *lock.Locker { return l.With(lock.WithHooks(&lock.Hooks{Obtain: flattened})) }},
	{name: "retry-ignored", kills: []string{"RetryPolicies"},
		locker: func(l *lock.Locker) *lock.Locker { return l.With(lock.WithHooks(&lock.Hooks{Attempt: onlyTheFirst})) }},
	{name: "token-not-random", kills: []string{"TokensAreUnique"},
		locker: func(l *lock.Locker) *lock.Locker { return l.With(lock.WithToken("not-random-0123456789a")) }},

	// Constructors.
	{name: "constructor-accepts-nil", kills: []string{"NilDriver"},
		nilConn: func() (*lock.Locker, error) {
			l, _ := single.New(nil) // the error dropped
			return l, nil
		}},

	// Drivers.
	{name: "setnx-overwrites", kills: []string{"SetNX"},
		conn: func(c driver.Conn) driver.Conn { return setOverwrites{c} }},
	{name: "missing-key-found", kills: []string{"Get", "GetSet", "Del", "PTTL"},
		conn: func(c driver.Conn) driver.Conn { return missingFound{c} }},
	{name: "noscript-hidden", kills: []string{"ScriptFallback"},
		conn: func(c driver.Conn) driver.Conn { return noscriptHidden{c} }},
	{name: "integers-as-strings", kills: []string{"ScriptReplies"},
		conn: func(c driver.Conn) driver.Conn { return intsAsStrings{c} }},
	{name: "errors-swallowed", kills: []string{"ErrorsPassThrough"},
		conn: func(c driver.Conn) driver.Conn { return swallowed{c} }},
	{name: "context-ignored", kills: []string{"CancelledContext"},
		conn: func(c driver.Conn) driver.Conn { return noContext{c} }},
	{name: "addr-malformed", kills: []string{"Addresser"},
		conn: func(c driver.Conn) driver.Conn { return badAddr{c} }},
	{name: "refuses-itself", kills: []string{"Check"},
		conn: func(c driver.Conn) driver.Conn { return selfRefusing{c} }},
	{name: "message-payload-lost", kills: []string{"Subscriber"},
		conn: func(c driver.Conn) driver.Conn { return payloadLost{c} }},
	{name: "pin-switches-connections", kills: []string{"Pinner"},
		conn: func(c driver.Conn) driver.Conn { return switching{c} }},
	{name: "watch-dropped", kills: []string{"WatchAbortsExec"},
		conn: func(c driver.Conn) driver.Conn { return unwatched{c} }},
	{name: "pin-ignores-the-key", kills: []string{"WatchAbortsExec"}, cluster: true,
		conn: func(c driver.Conn) driver.Conn { return keyless{c} }},
	{name: "pipeline-drops-errors", kills: []string{"Pipeliner"},
		conn: func(c driver.Conn) driver.Conn { return errorsDropped{c} }},
}

// controls are the harnesses of the mutants, unbroken: they pass every
// property, so that a mutant's failures are its mutation's.
var controls = []mutant{
	{name: "unbroken"},
	{name: "unbroken-driver", conn: func(c driver.Conn) driver.Conn { return c }},
	electorControl,
}

// rootOnly are the properties that only the lock package's own code can
// break, so that no mutant of a strategy, a driver, a Locker's defaults or
// its hooks can: the lock package's own tests check what they check, and
// the suite runs them for every strategy all the same.
var rootOnly = map[string]string{
	"NilContext":             "every call refuses a nil ctx before a strategy or a hook sees it",
	"MultiKeyOppositeOrders": "ObtainMany sorts the keys before a strategy sees them (lock's TestObtainManyKeys)",
	// Refused before the Obtain hooks run: an option or the keys.
	"MultiKeyInvalidArguments":     "ObtainMany checks its keys before a strategy or a hook sees them (lock's TestObtainManyInvalidKeys)",
	"SharedInvalidArguments":       "the shape options are checked before a strategy or a hook sees them (lock's TestSharedRefused, TestSharedShapesConflict)",
	"GuardedWriteInvalidArguments": "Guard and GuardCommands check their arguments before a strategy or a hook sees them (lock's TestGuardRefuses)",
}

// TestMutants: every mutant fails the properties it targets, every property
// of the suite is targeted by at least one mutant, and the controls pass.
func TestMutants(t *testing.T) {
	t.Run("every property is killed by a mutant", func(t *testing.T) {
		killed := map[string]bool{}
		for _, m := range mutants {
			for _, p := range m.kills {
				killed[p] = true
			}
		}
		var all []string
		for _, p := range properties {
			all = append(all, p.name)
		}
		for _, p := range driverProperties {
			if slices.Contains(all, p.name) {
				t.Fatalf("%s is the name of a property of both Run and RunDriver: the kill matrix cannot tell them apart", p.name)
			}
			all = append(all, p.name)
		}
		for _, p := range electorProperties {
			all = append(all, p.name) // TestElectorPropertiesKilled checks the names apart
		}
		for _, p := range all {
			if _, ok := rootOnly[p]; ok {
				continue
			}
			if !killed[p] {
				t.Errorf("property %s is killed by no mutant: add a mutant that breaks it", p)
			}
			delete(killed, p)
		}
		for p := range killed {
			t.Errorf("mutants target %s, which is not a property of the suite", p)
		}
	})

	addr, real := redistest.Addr(t)
	var cluster string // the masters' addresses, comma-separated
	if real {
		cluster = strings.Join(redistest.StartCluster(t, 3).Addrs(), ",")
	}
	children := slices.Concat(mutants, controls)
	outputs := make([]string, len(children))
	errs := make([]error, len(children))
	var (
		wg  sync.WaitGroup
		sem = make(chan struct{}, concurrentChildren)
	)
	start := time.Now()
	for i, m := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if m.cluster {
				if !real {
					return
				}
				outputs[i], errs[i] = runChild(m, cluster)
				return
			}
			outputs[i], errs[i] = runChild(m, addr)
		}()
	}
	wg.Wait()
	t.Logf("%d mutants and %d controls in %v", len(mutants), len(controls), time.Since(start).Round(time.Millisecond))

	for i, c := range controls {
		i += len(mutants)
		t.Run(c.name, func(t *testing.T) {
			if errs[i] != nil {
				t.Errorf("the suite on the unbroken harness = %v, want it to pass; the child's output:\n%s", errs[i], outputs[i])
			}
			if c.conn != nil || c.elector {
				return // RunDriver's, RunElector's
			}
			skipped := propertiesThat("SKIP", c.name, outputs[i])
			for _, p := range multiKeyProperties() {
				if skipped[p] {
					t.Errorf("%s on the unbroken harness, whose strategy locks several keys as one: skipped, want it to run", p)
				}
			}
			for _, p := range sharedProperties() {
				if skipped[p] {
					t.Errorf("%s on the unbroken harness, whose strategy shares locks: skipped, want it to run", p)
				}
			}
		})
	}

	for i, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			if m.cluster && !real {
				t.Skip("the mutant needs a Redis Cluster, which the embedded server cannot be")
			}
			failed, skipped := failedProperties(m.name, outputs[i]), propertiesThat("SKIP", m.name, outputs[i])
			for _, p := range m.kills {
				if skipped[p] && !real {
					t.Skipf("%s skipped on the embedded server, which cannot serve it: the mutant needs a real Redis", p)
				}
				if !failed[p] {
					t.Errorf("%s under mutant %s: passed, want it to fail", p, m.name)
				}
			}
			if t.Failed() {
				t.Logf("the child's output:\n%s", outputs[i])
				return
			}
			t.Logf("failed %s", strings.Join(slices.Sorted(maps.Keys(failed)), ", "))
		})
	}
}

// runChild runs m's targeted properties (all of them for a control) in a
// child process and returns its output, and its error when it failed.
func runChild(m mutant, addr string) (string, error) {
	run := "^TestMutantRun$/^" + regexp.QuoteMeta(m.name) + "$"
	if len(m.kills) > 0 {
		run += "/^(" + strings.Join(m.kills, "|") + ")$"
	}
	cmd := exec.Command(os.Args[0], "-test.run", run, "-test.v", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), envMutant+"="+m.name, envAddr+"="+addr)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// failedProperties returns the properties that the output of mutant's
// child reports failed.
func failedProperties(mutant, output string) map[string]bool {
	return propertiesThat("FAIL", mutant, output)
}

// propertiesThat returns the properties that the output of mutant's child
// reports with verdict: FAIL or SKIP.
func propertiesThat(verdict, mutant, output string) map[string]bool {
	re := regexp.MustCompile(`--- ` + verdict + `: TestMutantRun/` + regexp.QuoteMeta(mutant) + `/([^/\s]+)`)
	found := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(output, -1) {
		found[m[1]] = true
	}
	return found
}

// TestMutantRun runs the suite against the mutant that envMutant names, on
// the server at envAddr. TestMutants runs it in a child process; it does
// nothing in a run of its own.
func TestMutantRun(t *testing.T) {
	name, addr := os.Getenv(envMutant), os.Getenv(envAddr)
	if name == "" {
		t.Skip("runs only in the child processes of TestMutants")
	}
	all := slices.Concat(mutants, controls, incomplete(), []mutant{polling, oneKeyOnly, unshared})
	i := slices.IndexFunc(all, func(m mutant) bool { return m.name == name })
	if i < 0 {
		t.Fatalf("no mutant named %q", name)
	}
	m := all[i]
	t.Run(m.name, func(t *testing.T) {
		if m.conn != nil {
			open := newConn
			if m.cluster {
				open = newClusterConn
			}
			RunDriver(t, func(t *testing.T) driver.Conn { return m.conn(open(t, addr)) })
			return
		}
		if m.elector {
			notify.SetLinger(100 * time.Millisecond) // CancelledCampaignLeavesNothing waits for it
			RunElector(t, m.electorHarness(t, addr))
			return
		}
		Run(t, m.harness(addr))
	})
}

// newConn opens a go-redis connection to addr, closed when t ends.
func newConn(t testing.TB, addr string) driver.Conn {
	return goredis.New(redistest.GoRedis(t, addr, 3))
}

// newClusterConn opens a go-redis connection to the Cluster whose masters
// addrs lists, comma-separated, closed when t ends.
func newClusterConn(t testing.TB, addrs string) driver.Conn {
	return goredis.New(redistest.GoRedisCluster(t, strings.Split(addrs, ",")))
}

// harness is single over go-redis on addr, broken as m says, with short
// runs.
func (m mutant) harness(addr string) Harness {
	build := func(t *testing.T, addr string) *lock.Locker {
		conn := newConn(t, addr)
		l, err := single.New(conn)
		if err != nil {
			t.Fatalf("single.New: %v", err)
		}
		s := reach.Strategy(l).(singleStrategy)
		var st strategy.Strategy = s
		if m.strategy != nil {
			st = m.strategy(base{s, conn})
		}
		var defaults []lock.Option
		if m.poll {
			defaults = append(defaults, lock.WithPolling())
		}
		l = lock.New(st, defaults...)
		if m.locker != nil {
			l = m.locker(l)
		}
		return l
	}
	h := Harness{
		NewLocker:      func(t *testing.T) *lock.Locker { return build(t, addr) },
		Conns:          func(t *testing.T) []driver.Conn { return []driver.Conn{newConn(t, addr)} },
		NewUnreachable: func(t *testing.T) *lock.Locker { return build(t, redistest.ClosedAddr(t)) },
		NewWithNilConn: func() (*lock.Locker, error) { return single.New(nil) },
		Goroutines:     4,
		Acquisitions:   200,
	}
	if m.nilConn != nil {
		h.NewWithNilConn = m.nilConn
	}
	if m.bare {
		h.Conns, h.NewUnreachable, h.NewWithNilConn = nil, nil, nil
	}
	h.Skip = m.skip
	return h
}

// needs maps each property that needs an optional Harness field to the
// field.
func needs() map[string]string {
	m := map[string]string{}
	for _, p := range properties {
		if p.needs != "" {
			m[p.name] = p.needs
		}
	}
	return m
}

// incomplete returns the harnesses of TestMissingCapability, unbroken:
// without the optional fields; the same with the properties that need them
// named in Harness.Skip; and with a Harness.Skip that names no property.
func incomplete() []mutant {
	var names []string
	skip := map[string]string{}
	for p := range needs() {
		names = append(names, p)
		skip[p] = "the harness cannot provide it"
	}
	slices.Sort(names)
	return []mutant{
		{name: "no-capabilities", kills: names, bare: true},
		{name: "no-capabilities-skipped", kills: names, bare: true, skip: skip},
		{name: "skip-names-no-property", kills: []string{"ReleaseFreesTheLock"}, skip: map[string]string{"NoSuchProperty": "a typo"}},
	}
}

// TestMissingCapability: a property that needs a Harness field that is not
// set fails, naming the field; named in Harness.Skip, it skips with the
// reason, and Run lists it; a name in Harness.Skip that is no property
// fails the run.
func TestMissingCapability(t *testing.T) {
	addr, _ := redistest.Addr(t)
	cases := incomplete()
	bare, skipped, typo := cases[0], cases[1], cases[2]

	t.Run("fails, naming the field", func(t *testing.T) {
		out, err := runChild(bare, addr)
		if err == nil {
			t.Errorf("a run without Conns, NewUnreachable and NewWithNilConn passed, want it to fail")
		}
		failed := failedProperties(bare.name, out)
		for p, field := range needs() {
			if !failed[p] {
				t.Errorf("%s without Harness.%s: passed, want it to fail", p, field)
			}
			if want := p + " needs Harness." + field + ", which is not set"; !strings.Contains(out, want) {
				t.Errorf("the run's output lacks %q", want)
			}
		}
		if t.Failed() {
			t.Logf("the child's output:\n%s", out)
		}
	})

	t.Run("named in Harness.Skip, skips with the reason and is listed", func(t *testing.T) {
		out, err := runChild(skipped, addr)
		if err != nil {
			t.Errorf("a run that skips what it cannot check = %v, want it to pass", err)
		}
		for p := range needs() {
			if want := "--- SKIP: TestMutantRun/" + skipped.name + "/" + p + " "; !strings.Contains(out, want) {
				t.Errorf("the run's output lacks %q", want)
			}
		}
		if want := "Harness.Skip: the harness cannot provide it"; !strings.Contains(out, want) {
			t.Errorf("the run's output lacks the reason, %q", want)
		}
		want := fmt.Sprintf("%d of %d properties skipped, as Harness.Skip asks: ", len(needs()), len(properties))
		if !strings.Contains(out, want) {
			t.Errorf("the run's output lacks Run's list of skips, %q", want)
		}
		if t.Failed() {
			t.Logf("the child's output:\n%s", out)
		}
	})

	t.Run("a name in Harness.Skip that is no property fails the run", func(t *testing.T) {
		out, err := runChild(typo, addr)
		if err == nil {
			t.Errorf("a run whose Harness.Skip names no property passed, want it to fail")
		}
		for _, want := range []string{
			`Harness.Skip names "NoSuchProperty", which is not a property of the suite`,
			"the properties are " + properties[0].name + ", " + properties[1].name + ", ",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the run's output lacks %q\n%s", want, out)
			}
		}
	})
}

// The broken strategies: each embeds the real one and breaks one method.

// singleStrategy is what single's strategy implements, and so what a
// broken one embeds.
type singleStrategy interface {
	strategy.Strategy
	strategy.Multi
	strategy.Sharer
	strategy.Batcher
	strategy.Breaker
	strategy.Notifier
	strategy.Relabeler
	strategy.Fencer
	strategy.Guarder
	driver.Addresser
	fmt.Stringer
}

// base is the real strategy, with the connection it runs on, which the
// broken methods use.
type base struct {
	singleStrategy
	conn driver.Conn
}

var setPX = driver.NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])`)

// overwrites acquires with SET PX, without NX: it takes a held lock.
type overwrites struct{ base }

func (s overwrites) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	_, err := setPX.Run(ctx, s.conn, []string{r.Key}, r.Value(), r.TTL.Milliseconds())
	return strategy.Grant{}, err
}

// immortal acquires with SET NX and no expiry: the TTL is ignored.
type immortal struct{ base }

func (s immortal) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	ok, err := s.conn.SetNX(ctx, r.Key, r.Value(), 0)
	if err == nil && !ok {
		err = lock.ErrNotObtained
	}
	return strategy.Grant{}, err
}

// plainDel releases with DEL, without checking the owner.
type plainDel struct{ base }

func (s plainDel) Release(ctx context.Context, key, _ string) error {
	ok, err := s.conn.Del(ctx, key)
	if err == nil && !ok {
		err = lock.ErrExpired
	}
	return err
}

var pexpire = driver.NewScript(`return redis.call('PEXPIRE', KEYS[1], ARGV[1])`)

// plainPExpire refreshes with PEXPIRE, without checking the owner: it
// extends another owner's lock.
type plainPExpire struct{ base }

func (s plainPExpire) Refresh(ctx context.Context, key, _ string, ttl time.Duration) (strategy.Grant, error) {
	n, err := pexpire.Int(ctx, s.conn, []string{key}, ttl.Milliseconds())
	if err == nil && n == 0 {
		err = lock.ErrExpired
	}
	return strategy.Grant{}, err
}

// The mutants whose Refresh is broken do not batch, so that auto-refresh
// runs their Refresh.
func (plainPExpire) Batches() bool { return false }
func (noRefresh) Batches() bool    { return false }
func (swapped) Batches() bool      { return false }
func (leaky) Batches() bool        { return false }

// noBatchRefresh reports every lock of a batch refreshed, without sending
// anything.
type noBatchRefresh struct{ base }

func (noBatchRefresh) RefreshBatch(_ context.Context, batch []strategy.Refresh) {
	for i := range batch {
		batch[i].Err = nil
	}
}

// plainBatchPExpire refreshes each lock of a batch with PEXPIRE, without
// checking the owner, and reports it refreshed.
type plainBatchPExpire struct{ base }

func (s plainBatchPExpire) RefreshBatch(ctx context.Context, batch []strategy.Refresh) {
	for i, r := range batch {
		_, batch[i].Err = pexpire.Int(ctx, s.conn, []string{r.Key}, r.TTL.Milliseconds())
	}
}

// noRefresh reports success without refreshing.
type noRefresh struct{ base }

func (noRefresh) Refresh(context.Context, string, string, time.Duration) (strategy.Grant, error) {
	return strategy.Grant{}, nil
}

// noRelease reports success without releasing.
type noRelease struct{ base }

func (noRelease) Release(context.Context, string, string) error { return nil }

// ttlTimes1000 reads PTTL's milliseconds as seconds.
type ttlTimes1000 struct{ base }

func (s ttlTimes1000) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	d, err := s.singleStrategy.TTL(ctx, key, value)
	return d * 1000, err
}

// unguarded runs guarded scripts (or, with commands set, guarded
// commands) without checking the lock.
type unguarded struct {
	base
	commands bool
}

func (s unguarded) Guard(ctx context.Context, keys []string, value string, w strategy.Write) (any, error) {
	if (w.Script == "") != s.commands {
		return s.singleStrategy.Guard(ctx, keys, value, w)
	}
	return s.write(ctx, w)
}

// write runs w on the base's conn, unchecked.
func (b base) write(ctx context.Context, w strategy.Write) (any, error) {
	if w.Script != "" {
		return driver.NewScript(w.Script).Run(ctx, b.conn, w.Keys, w.Args...)
	}
	var replies []any
	for _, c := range w.Commands {
		r, err := driver.Do(ctx, b.conn, c...)
		if err != nil {
			return nil, err
		}
		replies = append(replies, r)
	}
	return replies, nil
}

// checksThenWrites checks the lock with TTL, and writes a while later,
// unchecked: another holder may come between.
type checksThenWrites struct{ base }

func (s checksThenWrites) Guard(ctx context.Context, keys []string, value string, w strategy.Write) (any, error) {
	if _, err := s.TTL(ctx, keys[0], value); err != nil {
		return nil, err
	}
	time.Sleep(100 * time.Millisecond)
	return s.write(ctx, w)
}

// firstKeyGuard checks the first key of a lock of several keys only.
type firstKeyGuard struct{ base }

func (s firstKeyGuard) Guard(ctx context.Context, keys []string, value string, w strategy.Write) (any, error) {
	return s.singleStrategy.Guard(ctx, keys[:1], value, w)
}

// swapped reports an expired lock as taken, and a taken one as expired.
type swapped struct{ base }

func swap(err error) error {
	switch {
	case errors.Is(err, lock.ErrExpired):
		return lock.ErrTaken
	case errors.Is(err, lock.ErrTaken):
		return lock.ErrExpired
	}
	return err
}

func (s swapped) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	g, err := s.singleStrategy.Refresh(ctx, key, value, ttl)
	return g, swap(err)
}

func (s swapped) Release(ctx context.Context, key, value string) error {
	return swap(s.singleStrategy.Release(ctx, key, value))
}

func (s swapped) TTL(ctx context.Context, key, value string) (time.Duration, error) {
	d, err := s.singleStrategy.TTL(ctx, key, value)
	return d, swap(err)
}

// noMetadata stores the token without the metadata.
type noMetadata struct{ base }

func (s noMetadata) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	r.Metadata = ""
	g, err := s.singleStrategy.Acquire(ctx, r)
	g.Value = r.Token
	return g, err
}

// noStamp stores the token and the metadata without the Locker's stamp.
type noStamp struct{ base }

func (s noStamp) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	r.Stamp = ""
	g, err := s.singleStrategy.Acquire(ctx, r)
	g.Value = r.Value()
	return g, err
}

// ownToken replaces a token chosen with WithToken by a random one.
type ownToken struct{ base }

func (s ownToken) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	if r.CallerToken {
		r.Token = rand.Text()
	}
	g, err := s.singleStrategy.Acquire(ctx, r)
	g.Value = r.Value()
	return g, err
}

// leaky puts the value, and so the token, in its errors.
type leaky struct{ base }

func (s leaky) Refresh(ctx context.Context, key, value string, ttl time.Duration) (strategy.Grant, error) {
	g, err := s.singleStrategy.Refresh(ctx, key, value, ttl)
	if err != nil {
		err = fmt.Errorf("refresh %s=%s: %w", key, value, err)
	}
	return g, err
}

func (s leaky) Release(ctx context.Context, key, value string) error {
	if err := s.singleStrategy.Release(ctx, key, value); err != nil {
		return fmt.Errorf("release %s=%s: %w", key, value, err)
	}
	return nil
}

// failsOpen grants the lock when Redis fails.
type failsOpen struct{ base }

func (s failsOpen) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	g, err := s.singleStrategy.Acquire(ctx, r)
	if err != nil && !errors.Is(err, lock.ErrNotObtained) {
		return strategy.Grant{}, nil
	}
	return g, err
}

// constantFence issues the same fencing token every time.
type constantFence struct{ base }

func (s constantFence) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	g, err := s.singleStrategy.Acquire(ctx, r)
	if r.Fencing && err == nil {
		g.Fence = 1
	}
	return g, err
}

// fenceFromOne starts a missing fencing counter from 0, not from the
// server's clock: the first token after the counter's loss is 1.
type fenceFromOne struct{ base }

func (s fenceFromOne) Acquire(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	if r.Fencing {
		f, err := single.FenceKey(r.Key)
		if err != nil {
			return strategy.Grant{Undone: true}, err
		}
		if _, err := driver.Do(ctx, s.conn, "SET", f, 0, "NX"); err != nil {
			return strategy.Grant{Undone: true}, err
		}
	}
	return s.singleStrategy.Acquire(ctx, r)
}

// oneByOne takes the keys one by one, and leaves those it took when it
// finds one held.
type oneByOne struct{ base }

func (s oneByOne) AcquireKeys(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	for _, k := range r.Keys {
		one := r
		one.Key, one.Keys = k, nil
		if _, err := s.base.Acquire(ctx, one); err != nil {
			if errors.Is(err, lock.ErrNotObtained) {
				err = &lock.KeyError{Key: k, Err: err}
			}
			return strategy.Grant{}, err
		}
	}
	return strategy.Grant{}, nil
}

// overwritesTheRest takes the first key if it is free, and sets the others
// whoever holds them.
type overwritesTheRest struct{ base }

func (s overwritesTheRest) AcquireKeys(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	first := r
	first.Keys = nil
	if _, err := s.base.Acquire(ctx, first); err != nil {
		if errors.Is(err, lock.ErrNotObtained) {
			err = &lock.KeyError{Key: r.Key, Err: err}
		}
		return strategy.Grant{}, err
	}
	for _, k := range r.Keys[1:] {
		if _, err := setPX.Run(ctx, s.conn, []string{k}, r.Value(), r.TTL.Milliseconds()); err != nil {
			return strategy.Grant{}, err
		}
	}
	return strategy.Grant{}, nil
}

// extendsWhatItCan refreshes the keys one by one: those it still holds are
// extended even when another is lost.
type extendsWhatItCan struct{ base }

func (s extendsWhatItCan) RefreshKeys(ctx context.Context, keys []string, value string, ttl time.Duration) (strategy.Grant, error) {
	var errs []error
	for _, k := range keys {
		if _, err := s.base.Refresh(ctx, k, value, ttl); err != nil {
			errs = append(errs, &lock.KeyError{Key: k, Err: err})
		}
	}
	return strategy.Grant{}, errors.Join(errs...)
}

// checksTheFirst refreshes the first key if it holds the value, and
// extends the others whoever holds them, if anyone does.
type checksTheFirst struct{ base }

func (s checksTheFirst) RefreshKeys(ctx context.Context, keys []string, value string, ttl time.Duration) (strategy.Grant, error) {
	if _, err := s.base.Refresh(ctx, keys[0], value, ttl); err != nil {
		return strategy.Grant{}, &lock.KeyError{Key: keys[0], Err: err}
	}
	for _, k := range keys[1:] {
		if _, err := pexpire.Run(ctx, s.conn, []string{k}, ttl.Milliseconds()); err != nil {
			return strategy.Grant{}, err
		}
	}
	return strategy.Grant{}, nil
}

// deletesWhatever deletes every key, whoever holds it, and reports
// nothing.
type deletesWhatever struct{ base }

func (s deletesWhatever) ReleaseKeys(ctx context.Context, keys []string, _ string) error {
	for _, k := range keys {
		if _, err := s.conn.Del(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// releasesTheFirst releases the first key only.
type releasesTheFirst struct{ base }

func (s releasesTheFirst) ReleaseKeys(ctx context.Context, keys []string, value string) error {
	return s.base.Release(ctx, keys[0], value)
}

// The broken Lockers' hooks.

// flattened formats Obtain's errors with %v, so that errors.Is and
// errors.As no longer see ErrNotObtained, the context's cause or an
// *ArgumentError.
func flattened(ctx context.Context, e lock.Event, next func(context.Context) (*lock.Lock, error)) (*lock.Lock, error) {
	lk, err := next(ctx)
	if err != nil {
		return nil, fmt.Errorf("obtain %q: %v", e.Key, err)
	}
	return lk, nil
}

// onlyTheFirst fails every attempt after the first, as if the caller's
// retry policy were NoRetry: the error ends the Obtain.
func onlyTheFirst(ctx context.Context, e lock.Event, next func(context.Context) error) error {
	if e.Attempt > 1 {
		return errors.New("retry ignored")
	}
	return next(ctx)
}

// The broken drivers: each embeds the real connection and breaks one
// thing.

// setOverwrites sets the key whether or not it exists.
type setOverwrites struct{ driver.Conn }

func (c setOverwrites) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if _, err := c.Conn.Del(ctx, key); err != nil {
		return false, err
	}
	return c.Conn.SetNX(ctx, key, value, ttl)
}

// missingFound reports a missing key as found: the nil reply is not
// normalised.
type missingFound struct{ driver.Conn }

func (c missingFound) Get(ctx context.Context, key string) (string, bool, error) {
	v, _, err := c.Conn.Get(ctx, key)
	return v, err == nil, err
}

func (c missingFound) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	v, _, err := c.Conn.GetSet(ctx, key, value)
	return v, err == nil, err
}

func (c missingFound) Del(ctx context.Context, key string) (bool, error) {
	_, err := c.Conn.Del(ctx, key)
	return err == nil, err
}

func (c missingFound) PTTL(ctx context.Context, key string) (time.Duration, bool, error) {
	d, _, err := c.Conn.PTTL(ctx, key)
	return d, err == nil, err
}

// noscriptHidden replaces EVALSHA's errors by its own, so that NOSCRIPT is
// not recognised and scripts never fall back to EVAL.
type noscriptHidden struct{ driver.Conn }

func (c noscriptHidden) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	v, err := c.Conn.EvalSha(ctx, sha1, keys, args...)
	if err != nil {
		return nil, errors.New("evalsha failed")
	}
	return v, nil
}

// errorsDropped pipelines, but answers nil for a command that failed.
type errorsDropped struct{ driver.Conn }

func (c errorsDropped) Pipeline(ctx context.Context, cmds [][]any) ([]any, error) {
	replies, err := driver.Pipeline(ctx, c.Conn, cmds)
	for i, r := range replies {
		if _, ok := r.(error); ok {
			replies[i] = nil
		}
	}
	return replies, err
}

// intsAsStrings returns script integers as strings.
type intsAsStrings struct{ driver.Conn }

func stringify(v any) any {
	switch v := v.(type) {
	case int64:
		return fmt.Sprint(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = stringify(e)
		}
		return out
	}
	return v
}

func (c intsAsStrings) Eval(ctx context.Context, script string, keys []string, args ...any) (any, error) {
	v, err := c.Conn.Eval(ctx, script, keys, args...)
	return stringify(v), err
}

func (c intsAsStrings) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	v, err := c.Conn.EvalSha(ctx, sha1, keys, args...)
	return stringify(v), err
}

// swallowed reports an error of GET and GETSET as a missing key.
type swallowed struct{ driver.Conn }

func (c swallowed) Get(ctx context.Context, key string) (string, bool, error) {
	v, ok, err := c.Conn.Get(ctx, key)
	if err != nil {
		return "", false, nil
	}
	return v, ok, nil
}

func (c swallowed) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	v, ok, err := c.Conn.GetSet(ctx, key, value)
	if err != nil {
		return "", false, nil
	}
	return v, ok, nil
}

// noContext runs every command with context.Background.
type noContext struct{ driver.Conn }

func (c noContext) SetNX(_ context.Context, key, value string, ttl time.Duration) (bool, error) {
	return c.Conn.SetNX(context.Background(), key, value, ttl)
}

func (c noContext) Get(_ context.Context, key string) (string, bool, error) {
	return c.Conn.Get(context.Background(), key)
}

func (c noContext) GetSet(_ context.Context, key, value string) (string, bool, error) {
	return c.Conn.GetSet(context.Background(), key, value)
}

func (c noContext) Del(_ context.Context, key string) (bool, error) {
	return c.Conn.Del(context.Background(), key)
}

func (c noContext) PTTL(_ context.Context, key string) (time.Duration, bool, error) {
	return c.Conn.PTTL(context.Background(), key)
}

func (c noContext) EvalSha(_ context.Context, sha1 string, keys []string, args ...any) (any, error) {
	return c.Conn.EvalSha(context.Background(), sha1, keys, args...)
}

func (c noContext) Eval(_ context.Context, script string, keys []string, args ...any) (any, error) {
	return c.Conn.Eval(context.Background(), script, keys, args...)
}

// badAddr names its server with a space in the address.
type badAddr struct{ driver.Conn }

func (badAddr) Addr() string { return "127.0.0.1 6379" }

// selfRefusing works, but its Validate says it does not, so strategy
// constructors would refuse it.
type selfRefusing struct{ driver.Conn }

func (selfRefusing) Validate() error { return errors.New("refused for no reason") }

// payloadLost relays the messages its sessions read without their payload.
type payloadLost struct{ driver.Conn }

func (c payloadLost) Listen(ctx context.Context, on func(driver.Event)) (driver.Session, error) {
	return c.Conn.(driver.Subscriber).Listen(ctx, func(e driver.Event) {
		e.Payload = ""
		on(e)
	})
}

func (c payloadLost) Sharded() bool { return c.Conn.(driver.Subscriber).Sharded() }

// switching pins two connections and sends each command of the pinned Conn
// over the other one than the last.
type switching struct{ driver.Conn }

func (c switching) Do(ctx context.Context, args ...any) (any, error) {
	return driver.Do(ctx, c.Conn, args...)
}

func (c switching) Pinnable() error { return driver.Pinnable(c.Conn) }

func (c switching) Pin(ctx context.Context, key string, f func(driver.Conn) error) error {
	return driver.Pin(ctx, c.Conn, key, func(a driver.Conn) error {
		return driver.Pin(ctx, c.Conn, key, func(b driver.Conn) error {
			return f(&alternating{a: a, b: b})
		})
	})
}

// alternating sends its commands (Do) over a and b in turn.
type alternating struct {
	a, b driver.Conn
	n    int
}

func (c *alternating) next() driver.Conn {
	c.n++
	if c.n%2 == 1 {
		return c.a
	}
	return c.b
}

func (c *alternating) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return c.a.SetNX(ctx, key, value, ttl)
}
func (c *alternating) Get(ctx context.Context, key string) (string, bool, error) {
	return c.a.Get(ctx, key)
}
func (c *alternating) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	return c.a.GetSet(ctx, key, value)
}
func (c *alternating) Del(ctx context.Context, key string) (bool, error) { return c.a.Del(ctx, key) }
func (c *alternating) PTTL(ctx context.Context, key string) (time.Duration, bool, error) {
	return c.a.PTTL(ctx, key)
}
func (c *alternating) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) (any, error) {
	return c.a.EvalSha(ctx, sha1, keys, args...)
}
func (c *alternating) Eval(ctx context.Context, src string, keys []string, args ...any) (any, error) {
	return c.a.Eval(ctx, src, keys, args...)
}
func (c *alternating) Do(ctx context.Context, args ...any) (any, error) {
	return driver.Do(ctx, c.next(), args...)
}

// unwatched pins Conns that never send WATCH, and reply OK to it, as a
// server that ignores WATCH at EXEC behaves.
type unwatched struct{ driver.Conn }

func (c unwatched) Do(ctx context.Context, args ...any) (any, error) {
	return driver.Do(ctx, c.Conn, args...)
}

func (c unwatched) Pinnable() error { return driver.Pinnable(c.Conn) }

func (c unwatched) Pin(ctx context.Context, key string, f func(driver.Conn) error) error {
	return driver.Pin(ctx, c.Conn, key, func(one driver.Conn) error { return f(watchless{one}) })
}

// watchless is a pinned Conn that drops WATCH.
type watchless struct{ driver.Conn }

func (c watchless) Do(ctx context.Context, args ...any) (any, error) {
	if name, _ := args[0].(string); strings.EqualFold(name, "WATCH") {
		return "OK", nil
	}
	return driver.Do(ctx, c.Conn, args...)
}

// keyless pins the connection of the server that holds another key (the
// empty one) than the key asked for, as a driver that pins any connection
// of a Cluster's does.
type keyless struct{ driver.Conn }

func (c keyless) Do(ctx context.Context, args ...any) (any, error) {
	return driver.Do(ctx, c.Conn, args...)
}

func (c keyless) Pinnable() error { return driver.Pinnable(c.Conn) }

func (c keyless) Pin(ctx context.Context, _ string, f func(driver.Conn) error) error {
	return driver.Pin(ctx, c.Conn, "", f)
}

// checkSkips runs the suite on the harness of m, whose strategy lacks a
// capability (what), and fails t unless the run passes and each of the
// properties m names skips, giving reason.
func checkSkips(t *testing.T, m mutant, what, reason string) {
	t.Helper()
	addr, _ := redistest.Addr(t)
	out, err := runChild(m, addr)
	if err != nil {
		t.Errorf("the suite on %s = %v, want it to pass", what, err)
	}
	for _, p := range m.kills {
		if want := "--- SKIP: TestMutantRun/" + m.name + "/" + p + " "; !strings.Contains(out, want) {
			t.Errorf("the run's output lacks %q", want)
		}
	}
	if strings.Count(out, reason) != len(m.kills) {
		t.Errorf("the run's output gives the reason, %q, %d times, want %d", reason, strings.Count(out, reason), len(m.kills))
	}
	if t.Failed() {
		t.Logf("the child's output:\n%s", out)
	}
}
