// Package bsminterop holds the interoperability tests of the single
// strategy with github.com/bsm/redislock: during a migration from it, both
// libraries run side by side on the same keys, and each must exclude the
// other, read the other's locks, and never release or extend them.
//
// The tests are kept apart from package single's because bsm/redislock
// cannot be imported in FIPS 140-only mode (GODEBUG=fips140=only): its
// package initialisation computes its scripts' SHA-1, which panics there
// before any test runs. Package single's test binary, without it, runs in
// that mode; this one runs only outside it. The package has no code of
// its own.
package bsminterop
