package config_test

import (
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// TestConfigAloneLinksNeitherRedigoNorOTel: a program that imports config
// alone (testdata/configonly) compiles neither redigo, nor rueidis, nor the
// OpenTelemetry API, as go list -deps tells, and refuses driver=redigo,
// driver=rueidis and otel=true with errors that name the import they need;
// importing config/redigoconfig, config/rueidisconfig and config/otelconfig
// links them in.
func TestConfigAloneLinksNeitherRedigoNorOTel(t *testing.T) {
	t.Run("the errors name the imports", func(t *testing.T) {
		args := []string{"run", "./testdata/configonly", "single://h?driver=redigo", "single://h?driver=rueidis", "single://h?otel=true", "single://h"}
		if raceEnabled() {
			// Built as this test was, the program's packages come from the
			// build cache, instead of being compiled once more.
			args = slices.Insert(args, 1, "-race")
		}
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go run: %v\n%s", err, out)
		}
		want := []string{
			`lock: invalid driver: unknown "redigo"; known: goredis; redigo is not linked into this program: import _ "github.com/locksmith-go/lock/config/redigoconfig"`,
			`lock: invalid driver: unknown "rueidis"; known: goredis; rueidis is not linked into this program: import _ "github.com/locksmith-go/lock/config/rueidisconfig"`,
			`lock: invalid otel: needs the OpenTelemetry instrumentation linked into this program: import _ "github.com/locksmith-go/lock/config/otelconfig"`,
			"<nil>",
		}
		if got := strings.Split(strings.TrimSpace(string(out)), "\n"); !slices.Equal(got, want) {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	const (
		redigo  = "github.com/gomodule/redigo/redis"
		rueidis = "github.com/redis/rueidis"
		otel    = "go.opentelemetry.io/otel"
	)
	for _, c := range []struct {
		imports   []string
		want, not []string
	}{
		{[]string{"./testdata/configonly"},
			[]string{"github.com/redis/go-redis/v9", "github.com/locksmith-go/lock/strategy/redlock"}, []string{redigo, rueidis, otel}},
		{[]string{"github.com/locksmith-go/lock/config", "github.com/locksmith-go/lock/config/redigoconfig"},
			[]string{redigo}, []string{rueidis, otel}},
		{[]string{"github.com/locksmith-go/lock/config", "github.com/locksmith-go/lock/config/rueidisconfig"},
			[]string{rueidis}, []string{redigo, otel}},
		{[]string{"github.com/locksmith-go/lock/config", "github.com/locksmith-go/lock/config/otelconfig"},
			[]string{otel}, []string{redigo, rueidis}},
	} {
		t.Run(strings.Join(c.imports, "+"), func(t *testing.T) {
			out, err := exec.Command("go", append([]string{"list", "-deps"}, c.imports...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			for _, p := range c.want {
				if !slices.Contains(deps, p) {
					t.Errorf("go list -deps: got no %s, want it", p)
				}
			}
			for _, p := range c.not {
				for _, d := range deps {
					if d == p || strings.HasPrefix(d, p+"/") {
						t.Errorf("go list -deps: got %s, want none of %s", d, p)
					}
				}
			}
		})
	}
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	return ok && slices.Contains(info.Settings, debug.BuildSetting{Key: "-race", Value: "true"})
}
