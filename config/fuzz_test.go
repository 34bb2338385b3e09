package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseURL checks, for any input, that ParseURL never panics; that
// what it accepts is valid and survives the URL, String and JSON forms; and
// that a password put in the input's user information appears nowhere: not
// in an error, String, a fmt verb, log/slog or JSON. The seed corpus is in
// testdata/fuzz/FuzzParseURL, with the examples of every setting.
func FuzzParseURL(f *testing.F) {
	for _, exs := range examples {
		for _, ex := range exs {
			f.Add(ex.url)
		}
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if c, err := ParseURL(raw); err == nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("ParseURL(%q) accepted a Config that Validate refuses: %v", raw, err)
			}
			u := c.url(true)
			again, err := ParseURL(u)
			if err != nil || !reflect.DeepEqual(again, c) {
				t.Fatalf("ParseURL(%q) = %q; ParseURL of that = %q, %v", raw, u, again.url(true), err)
			}
			if c.String() == u { // no secret to redact: JSON reads back what it writes
				b, err := json.Marshal(c)
				var fromJSON Config
				if err != nil || json.Unmarshal(b, &fromJSON) != nil || !reflect.DeepEqual(fromJSON, c) {
					t.Fatalf("ParseURL(%q) = %q; its JSON %s reads back as %q", raw, u, b, fromJSON.url(true))
				}
			}
		}
		passwordStaysSecret(t, raw)
	})
}

// secretPassword is a password that no message would contain by chance.
const secretPassword = "s3ntinel-Pw-9f2cQ"

// passwordStaysSecret puts secretPassword in raw's user information, when
// raw has none, and in its query as the Sentinels' password and in nodes'
// URLs, and checks that nothing printed shows it: an error, String, any
// fmt verb, log/slog, JSON.
func passwordStaysSecret(t *testing.T, raw string) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || strings.Contains(raw, secretPassword) {
		return
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	var secrets []string // raw, with the secret put in
	if !strings.Contains(rest[:end], "@") {
		secrets = append(secrets, scheme+"://user:"+secretPassword+"@"+rest)
	}
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	if !strings.Contains(raw, "#") {
		secrets = append(secrets, raw+sep+"sentinel_password="+secretPassword,
			raw+sep+"nodes="+url.QueryEscape("redis://u:"+secretPassword+"@h1,redis+sentinel://s1?master_name=m&password="+secretPassword))
	}
	for _, withSecret := range secrets {
		c, err := ParseURL(withSecret)
		var printed []string
		if err != nil {
			printed = append(printed, err.Error())
		} else {
			var logs bytes.Buffer
			slog.New(slog.NewTextHandler(&logs, nil)).Info("text", "config", c, "nested", struct{ C Config }{c})
			slog.New(slog.NewJSONHandler(&logs, nil)).Info("json", "config", c, "nested", struct{ C Config }{c})
			b, _ := json.Marshal(struct{ C Config }{c})
			printed = append(printed, c.String(), logs.String(), string(b),
				fmt.Sprintf("%v %+v %#v %s %q %x", c, c, c, c, c, c),
				fmt.Sprintf("%v %+v %#v", &c, struct{ C Config }{c}, struct{ C *Config }{&c}))
		}
		for _, p := range printed {
			if strings.Contains(p, secretPassword) {
				t.Fatalf("ParseURL(%q): the password shows in %q", withSecret, p)
			}
		}
	}
}
