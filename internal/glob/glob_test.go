package glob_test

import (
	"testing"

	"github.com/locksmith-go/lock/internal/glob"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"lock:42":    "lock:42",
		"{lock:*}:q": `{lock:\*}:q`,
		`a?b[c]d\e`:  `a\?b\[c\]d\\e`,
		"":           "",
	} {
		if got := glob.Escape(in); got != want {
			t.Errorf("Escape(%q): got %q, want %q", in, got, want)
		}
	}
}
