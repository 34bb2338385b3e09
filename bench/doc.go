// Package bench measures locksmith against a hand-written baseline and
// against its peers, bsm/redislock and go-redsync/redsync, on redis-server
// processes it starts itself. It is a module of its own, so that the peers
// never enter the library's go.mod.
//
// The package holds only benchmarks (see its _test.go files); cmd/report
// runs them several times and writes their results, medians over the
// rounds, and the targets table into README.md:
//
//	cd bench && go run ./cmd/report
package bench
