// Package glob escapes text for Redis's glob-style patterns (SCAN's MATCH,
// KEYS, PUBSUB CHANNELS, PSUBSCRIBE), so that a key or a channel matches as
// it is.
package glob

import "strings"

// escaper escapes the characters that Redis's patterns give a meaning.
var escaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

// Escape returns s with every character that a Redis pattern reads (* ? [
// ] \) escaped with a backslash: a pattern that matches s alone.
func Escape(s string) string { return escaper.Replace(s) }
