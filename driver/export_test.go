package driver

import "testing"

// InFIPSMode makes Script act, until t ends, as in FIPS 140 mode, where
// crypto/sha1 may not be used. Tests that call it must not run in
// parallel.
func InFIPSMode(t testing.TB) {
	old := fipsMode
	t.Cleanup(func() { fipsMode = old })
	fipsMode = func() bool { return true }
}
