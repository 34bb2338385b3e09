package config_test

import (
	"strings"
	"testing"

	"github.com/locksmith-go/lock/config"
)

// TestUnknownSettingNamesTheClosest: an unknown setting's error names the
// setting it is likely a misspelling of, and not every setting.
func TestUnknownSettingNamesTheClosest(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"a letter doubled", "tll", "ttl"},
		{"two letters swapped", "qourum", "quorum"},
		{"a letter left out", "retr", "retry"},
		{"a letter added", "drivers", "driver"},
		{"two letters off", "pasword1", "password"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.ParseURL("single://h?" + c.got + "=1")
			want := `lock: invalid setting "` + c.got + `": unknown: did you mean "` + c.want + `"?`
			if err == nil || err.Error() != want {
				t.Errorf("ParseURL(...?%s=1) = %v, want %s", c.got, err, want)
			}
		})
	}
}

// TestEnvironmentMisspelling: a variable with the prefix whose name is a
// misspelling of a setting's is an error that names both; the other
// variables with the prefix, such as those of the locksmith CLI and of
// the test suites, are left alone.
func TestEnvironmentMisspelling(t *testing.T) {
	for _, c := range []struct{ name, variable, want string }{
		{"a letter doubled", "TLL", "TTL"},
		{"a letter left out", "ADDR", "ADDRS"},
		{"two letters off", "PASSWD", "PASSWORD"},
		{"lower case", "ttl", "TTL"},
		{"the URL", "URI", "URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envPrefix+"URL", "single://h")
			t.Setenv(envPrefix+c.variable, "10s")
			checkBad(t, badCase{load: func() error { _, err := config.FromEnv(envPrefix); return err },
				setting: envPrefix + c.variable, reason: "is not a setting: did you mean " + envPrefix + c.want + "?"})
		})
	}

	t.Run("the variables of the CLI and of the test suites are no settings and are left alone", func(t *testing.T) {
		const prefix = "LOCKSMITH_"
		t.Setenv(prefix+"URL", "single://h")
		for _, v := range []string{"FULL", "REQUIRE_REDIS", "REQUIRE_REDISPY", "REDIS_SERVER", "BENCH_CONTENDER",
			"LOCK", "LOCKS", "FENCE", "FENCES", "PERMIT", "LEASE_MS", "HELD", "HANDLE", "TEST_CRASHED_HOLDER",
			"CONFORMANCE_MUTANT", "CONFORMANCE_MUTANT_ADDR", strings.TrimPrefix(envPrefix, prefix) + "TTL"} {
			t.Setenv(prefix+v, "1")
		}
		if _, err := config.FromEnv(prefix); err != nil {
			t.Errorf("FromEnv = %v, want nil", err)
		}
	})

	t.Run("an empty misspelt variable is unset, as an empty setting's", func(t *testing.T) {
		t.Setenv(envPrefix+"URL", "single://h")
		t.Setenv(envPrefix+"TLL", "")
		if _, err := config.FromEnv(envPrefix); err != nil {
			t.Errorf("FromEnv = %v, want nil", err)
		}
	})
}

// TestRedlockOfTwoNodes: redlock over 2 nodes, whose quorum of 2 survives
// the loss of neither, is refused unless the quorum is set; 1 node (for
// tests, or the first step of a move) and 3 are accepted.
func TestRedlockOfTwoNodes(t *testing.T) {
	for _, c := range []badCase{
		{"2 addrs", fromURL("redlock://h1,h2"), "addrs", "lists 2 redlock nodes, whose quorum of 2 needs both for every lock"},
		{"2 nodes", fromJSON(`{"strategy": "redlock", "nodes": ["redis://h1", "redis://h2"]}`), "nodes", "set quorum=2 to run on 2 all the same"},
	} {
		t.Run(c.name+" are refused", func(t *testing.T) { checkBad(t, c) })
	}
	for _, u := range []string{"redlock://h1", "redlock://h1,h2?quorum=2", "redlock://h1,h2,h3", "redlock://h1,h2,h3,h4"} {
		t.Run(u+" is accepted", func(t *testing.T) {
			if _, err := config.ParseURL(u); err != nil {
				t.Errorf("ParseURL(%q) = %v, want nil", u, err)
			}
		})
	}
}
