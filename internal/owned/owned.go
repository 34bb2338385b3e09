// Package owned lets the config package hand a lock.Locker what it owns,
// the clients it opened, for the Locker's Close to close, without a
// method on the Locker that every program would see.
package owned

// SetClose makes close the last step of the Close of l, a *lock.Locker,
// and of the Lockers it derives. Package lock sets it.
var SetClose func(l any, close func() error)
