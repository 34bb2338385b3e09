package redistest

import (
	"strconv"
	"strings"
)

// Version returns the server's name and version, from its INFO server
// reply info: "redis 7.0.15", "valkey 8.1.1".
func Version(info string) string {
	if v := field(info, "valkey_version"); v != "" {
		return "valkey " + v
	}
	return "redis " + field(info, "redis_version")
}

// HasSetIfEq reports whether the server of info has SET … IFEQ: Valkey
// 8.1 and later, Redis 8.4 and later.
func HasSetIfEq(info string) bool {
	if v := field(info, "valkey_version"); v != "" {
		return atLeast(v, 8, 1)
	}
	return atLeast(field(info, "redis_version"), 8, 4)
}

func field(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func atLeast(version string, major, minor int) bool {
	parts := strings.Split(version, ".")
	if len(parts) < 2 {
		return false
	}
	ma, _ := strconv.Atoi(parts[0])
	mi, _ := strconv.Atoi(parts[1])
	return ma > major || ma == major && mi >= minor
}
