package config

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// examples are, for each setting, URLs that set it, and the text form it
// must then have.
var examples = map[string][]struct{ url, want string }{
	"strategy": {{"setnx-getset://h:6379", "setnx-getset"}, {"REDLOCK://h:6379", "redlock"}},
	"username": {{"single://alice@h:6379", "alice"}, {"single://a%40b@h:6379", "a@b"}},
	"password": {{"single://:pw@h:6379", "pw"}, {"single://alice:p%40ss:w%2Frd+%25@h:6379", "p@ss:w/rd+%"}},
	"addrs": {
		{"single://h", "h:6379"},
		{"redlock://h1,h2:7000,[::1]:7001,10.0.0.4:6380", "h1:6379,h2:7000,[::1]:7001,10.0.0.4:6380"},
		{"single+unix:///var/run/redis%20server.sock", "/var/run/redis server.sock"},
		{"redlock://%2Frun%2Fa.sock,h2,h3", "/run/a.sock,h2:6379,h3:6379"},
	},
	"topology": {
		{"single+sentinel://s1:26379,s2:26379?master_name=mymaster", "sentinel"},
		{"setnx-getset+cluster://h1:7000,h2:7001", "cluster"},
	},
	"master_name":       {{"single+sentinel://s1:26379?master_name=my-master", "my-master"}},
	"sentinel_username": {{"single+sentinel://s1:26379?master_name=m&sentinel_username=watcher", "watcher"}},
	"sentinel_password": {{"single+sentinel://s1:26379?master_name=m&sentinel_password=s%26cret", "s&cret"}},
	"nodes": {
		{"redlock://?nodes=redis://h1:6379/2,rediss://alice:pw@h2:6380,unix:///run/redis.sock%3Fdb%3D1", "redis://h1:6379/2,rediss://alice:pw@h2:6380,unix:///run/redis.sock?db=1"},
		{"redlock://?nodes=redis%2Bsentinel://s1:26379%3Fmaster_name%3Dm%26addr%3Ds2:26379,redis%2Bcluster://c1:7000%3Faddr%3Dc2:7001,redis://h3",
			"redis+sentinel://s1:26379?master_name=m&addr=s2:26379,redis+cluster://c1:7000?addr=c2:7001,redis://h3"},
	},
	"db":                       {{"single://h:6379/5", "5"}, {"single+unix:///run/redis.sock?db=3", "3"}},
	"driver":                   {{"single://h?driver=redigo", "redigo"}, {"single://h?driver=goredis", "goredis"}},
	"tls":                      {{"single://h?tls=true", "true"}, {"single://h?tls=1", "true"}},
	"tls_ca_file":              {{"single://h?tls=true&tls_ca_file=/etc/redis/ca.pem", "/etc/redis/ca.pem"}},
	"tls_cert_file":            {{"single://h?tls=true&tls_cert_file=/c%20d.pem&tls_key_file=/k.pem", "/c d.pem"}},
	"tls_key_file":             {{"single://h?tls=true&tls_cert_file=/c.pem&tls_key_file=/k+1%26.pem", "/k 1&.pem"}},
	"tls_server_name":          {{"single://10.0.0.1?tls=true&tls_server_name=redis.internal", "redis.internal"}},
	"tls_insecure_skip_verify": {{"single://h?tls=true&tls_insecure_skip_verify=true", "true"}},
	"dial_timeout":             {{"single://h?dial_timeout=2s", "2s"}},
	"read_timeout":             {{"single://h?read_timeout=500ms", "500ms"}},
	"write_timeout":            {{"single://h?write_timeout=1.5s", "1.5s"}},
	"pool_size":                {{"single://h?pool_size=32", "32"}},
	"ttl":                      {{"single://h?ttl=45s", "45s"}, {"single://h?ttl=90s", "1m30s"}},
	"retry": {
		{"single://h?retry=none", "none"},
		{"single://h?retry=linear:100ms", "linear:100ms"},
		{"single://h?retry=exponential:10ms,1s", "exponential:10ms,1s"},
	},
	"max_attempts":    {{"single://h?retry=exponential:10ms,1s&max_attempts=5", "5"}},
	"wait":            {{"single://h?wait=poll", "poll"}, {"single://h?wait=notify", "notify"}},
	"without_scripts": {{"single://h?without_scripts=true", "true"}, {"single+cluster://h1:7000?without_scripts=1", "true"}},
	"otel":            {{"single://h?otel=true", "true"}},
	"otel_keys":       {{"single://h?otel=true&otel_keys=hashed", "hashed"}, {"single://h?otel=true&otel_keys=raw", "raw"}},
	"format":          {{"setnx-getset://h?format=ms", "ms"}, {"setnx-getset://h?format=float-seconds", "float-seconds"}},
	"safety_ttl":      {{"setnx-getset://h?safety_ttl=1m", "1m0s"}},
	"clock_skew":      {{"setnx-getset://h?safety_ttl=1m&clock_skew=2s", "2s"}},
	"replicas":        {{"single://h?replicas=1", "1"}, {"single://h?replicas=2&replica_timeout=50ms", "2"}},
	"replica_timeout": {{"single://h?replicas=1&replica_timeout=250ms", "250ms"}},
	"fence_ttl":       {{"single://h?fence_ttl=10m", "10m0s"}, {"single://h?fence_ttl=0", "0"}, {"single://h?fence_ttl=0s", "0"}},
	"quorum":          {{"redlock://h1,h2,h3?quorum=3", "3"}},
	"drift_factor":    {{"redlock://h1,h2,h3?drift_factor=0.02", "0.02"}},
	"node_timeout":    {{"redlock://h1,h2,h3?node_timeout=100ms", "100ms"}},
	"max_extensions":  {{"redlock://h1,h2,h3?max_extensions=10", "10"}},
	"restart_guard":   {{"redlock://h1,h2,h3?restart_guard=1m", "1m0s"}},
	"lease":           {{"single://h?lease=10s", "10s"}, {"single://h?lease=30ms", "30ms"}},
	"stop_grace":      {{"single://h?stop_grace=2s", "2s"}, {"single://h?lease=1s&stop_grace=499ms", "499ms"}},
	"interval":        {{"single://h?interval=250ms", "250ms"}, {"single://h?interval=1m30s", "1m30s"}},
	"identity": {
		{"single://h?identity=web-3", "web-3"},
		{"single://h?identity=web-3%20pid%3D12%26x", "web-3 pid=12&x"},
		{"redis://h?identity=web+3", "web 3"},
	},
}

// TestEverySettingRoundTrips: each setting survives URL -> Config -> URL,
// String, JSON and the environment.
func TestEverySettingRoundTrips(t *testing.T) {
	for _, s := range settings {
		if len(examples[s.name]) == 0 {
			t.Errorf("setting %s has no example: add one to examples", s.name)
		}
		for _, ex := range examples[s.name] {
			t.Run(s.name+"/"+ex.url, func(t *testing.T) {
				c, err := ParseURL(ex.url)
				if err != nil {
					t.Fatalf("ParseURL(%q): %v", ex.url, err)
				}
				if got := s.get(&c); got != ex.want {
					t.Fatalf("%s of %q = %q, want %q", s.name, ex.url, got, ex.want)
				}
				roundTrips(t, c)
			})
		}
	}
}

// roundTrips checks that c survives every form.
func roundTrips(t *testing.T, c Config) {
	t.Helper()
	u := c.url(true)
	if again, err := ParseURL(u); err != nil || !reflect.DeepEqual(again, c) {
		t.Fatalf("ParseURL(%q) = %#v, %v; want %#v", u, again.url(true), err, u)
	}
	shown := c // as String and JSON show it
	for _, s := range settings {
		if v := s.get(&c); s.redact != nil && v != "" {
			_ = s.set(&shown, s.redact(v)) // sets it, but refuses the placeholder
		}
	}
	if got, want := c.String(), shown.url(true); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}

	b, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	want, _ := json.Marshal(shown)
	if !bytes.Equal(b, want) {
		t.Fatalf("json.Marshal = %s, want %s", b, want)
	}
	var fields map[string]any // with the secrets put back
	_ = json.Unmarshal(b, &fields)
	for name, v := range map[string]string{"password": c.Password, "sentinel_password": c.SentinelPassword} {
		if v != "" {
			fields[name] = v
		}
	}
	if len(c.Nodes) > 0 {
		fields["nodes"] = c.Nodes
	}
	b, _ = json.Marshal(fields)
	var fromJSON Config
	if err := json.Unmarshal(b, &fromJSON); err != nil || !reflect.DeepEqual(fromJSON, c) {
		t.Fatalf("json.Unmarshal(%s) = %#v, %v; want %#v", b, fromJSON.url(true), err, u)
	}

	const prefix = "LOCKSMITH_TEST_"
	t.Run("env", func(t *testing.T) {
		for _, s := range settings {
			if v := s.get(&c); v != "" {
				t.Setenv(prefix+strings.ToUpper(s.name), v)
			}
		}
		if got, err := FromEnv(prefix); err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("FromEnv = %#v, %v; want %#v", got.url(true), err, u)
		}
	})
	t.Run("env URL", func(t *testing.T) {
		t.Setenv(prefix+"URL", u)
		if got, err := FromEnv(prefix); err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("FromEnv = %#v, %v; want %#v", got.url(true), err, u)
		}
	})
}

// TestDocsListEverySetting: the settings table of docs/config.md has a
// row for each setting, with its environment variable, so that no setting
// goes undocumented.
func TestDocsListEverySetting(t *testing.T) {
	b, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Every setting\n")
	if !ok {
		t.Fatal(`docs/config.md has no section "## Every setting"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]string{}
	for line := range strings.SplitSeq(section, "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			rows[name] = line
		}
	}
	for _, s := range settings {
		row, ok := rows[s.name]
		if !ok {
			t.Errorf("docs/config.md: no row for setting %s", s.name)
			continue
		}
		if env := "`LOCKSMITH_" + strings.ToUpper(s.name) + "`"; !strings.Contains(row, env) {
			t.Errorf("docs/config.md: the row of %s does not name %s", s.name, env)
		}
	}
}

// TestExplicitStandalone: topology standalone written out is the default:
// it validates with a Unix socket, prints as the default does, and reads
// back as unset.
func TestExplicitStandalone(t *testing.T) {
	c := Config{Strategy: "single", Topology: "standalone", Addrs: []string{"/run/redis.sock"}}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate = %v, want nil", err)
	}
	if got, want := c.String(), "single+unix:///run/redis.sock"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	c.Topology = ""
	if got, err := ParseURL(c.String()); err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("ParseURL(%q) = %q, %v; want %q", c.String(), got, err, c)
	}
}
