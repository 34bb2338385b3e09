//go:build !race

package single_test

// race reports that the race detector is on.
const race = false
