package strategy

import "context"

// Guarder is an optional interface of a [Strategy] that can run a write on
// the lock's own server, atomically with the check that the lock is still
// held (lock.Lock.Guard and lock.Lock.GuardCommands): a holder that lost
// its lock without knowing it (a pause, a slow network) then writes
// nothing. The lock package calls it only for a lock that the Strategy
// itself obtained (or, for a shared lock, the [SharedStrategy] that
// obtained it), with a Write of a script or of commands, never both. A
// Strategy that cannot check a lock atomically on one server, such as
// Redlock, does not implement it.
type Guarder interface {
	// Guard runs w on the server that holds keys, the lock's keys (one,
	// or every member of a lock of several keys), only while each holds
	// value: for a shared lock, while value's own lease lasts. Otherwise it
	// writes nothing and returns [ErrExpired] when a key is gone and
	// [ErrTaken] when another value holds it (for several keys, one
	// [*KeyError] per key, joined, as [Multi.RefreshKeys] reports them).
	// It returns the script's reply, or, for commands, their replies as
	// an []any. It refuses, with an [*ArgumentError] named "keys" and
	// writing nothing, w's keys that the server holding the lock cannot
	// name in the same script or transaction (another Cluster hash slot).
	Guard(ctx context.Context, keys []string, value string, w Write) (any, error)
}

// Write is a write that [Guarder.Guard] runs under the lock: a Lua script,
// or, for servers that refuse scripts, commands for a transaction.
type Write struct {
	// Script is the Lua body of the write. It sees its own KEYS (Keys)
	// and ARGV (Args), not the lock's.
	Script string
	// Keys are the keys the write touches, declared to the script or
	// watched by the transaction.
	Keys []string
	// Args are the script's arguments.
	Args []any
	// Commands are the commands of a transaction, each a command name
	// followed by its arguments; used when Script is empty.
	Commands [][]any
}
