package cas

import "testing"

func TestIsCompanion(t *testing.T) {
	for key, want := range map[string]bool{
		"{orders:42}:q":      true, // the queue of orders:42
		"{orders:42}:w":      true,
		"{orders:42}:fence":  true,
		"{orders:42}:fences": true,
		"{orders:42}:shared": true,
		"{orders}:42:q":      true, // the queue of {orders}:42, whose hash tag it keeps
		"{orders}:42:fence":  true,
		"orders:42":          false,
		"orders:42:q":        false, // no hash tag: no companion is named so
		"orders:fence":       false,
		"{orders}:42":        false,
		"{}:q":               false, // an empty hash tag is none
		"{orders:42}:wake":   false, // a channel's name, never a key

		"{orders:42}:broken:0123456789abcdef": true, // the mark of a Break
		"{orders}:42:broken:0123456789abcdef": true,
		"orders:42:broken:0123456789abcdef":   false,
		"{orders:42}:broken:0123456789":       false, // no fingerprint
		"{orders:42}:broken:0123456789ABCDEF": false, // fingerprints are lower case
	} {
		if got := IsCompanion(key); got != want {
			t.Errorf("IsCompanion(%q) = %v, want %v", key, got, want)
		}
	}
	for _, key := range []string{"orders:42", "{orders}:42"} {
		if name, _ := brokenMark(key, "token"); !IsCompanion(name) {
			t.Errorf("IsCompanion(brokenMark(%q, ...)) = IsCompanion(%q) = false, want true", key, name)
		}
		for _, s := range companions {
			name, _ := Companion(key, s)
			if !IsCompanion(name) {
				t.Errorf("IsCompanion(Companion(%q, %q)) = IsCompanion(%q) = false, want true", key, s, name)
			}
		}
	}
}
