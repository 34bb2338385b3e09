// Package reach lets the module's other packages reach what a *lock.Locker
// keeps to itself, without methods that every program would see: config
// hands a Locker the clients it opened, for its Close to close, and the
// conformance suite's mutants take the strategy a Locker runs. Package
// lock sets the functions.
package reach

import "github.com/locksmith-go/lock/strategy"

// SetClose makes close the last step of the Close of l, a *lock.Locker,
// and of the Lockers it derives.
var SetClose func(l any, close func() error)

// Strategy returns the strategy of l, a *lock.Locker.
var Strategy func(l any) strategy.Strategy
