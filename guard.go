package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/strategy"
)

// Guard runs script, a Lua body, on the lock's server, atomically, only
// while the lock is held: its key still holds this lock's value (every key,
// for a lock of several keys), or, for a semaphore or read-write lock, this
// holder's own lease has not ended. A holder that lost its lock without
// knowing it (a pause, a slow network) then writes nothing, whatever the
// next holder does. script sees its own KEYS (keys) and ARGV (args), not
// the lock's, and Guard returns its reply as the driver decoded it (nil,
// int64, string, or []any of them), or the error the script raised.
//
//	reply, err := lk.Guard(ctx, `return redis.call('SET', KEYS[1], ARGV[1])`,
//		[]string{"{orders}:42:state"}, "paid")
//
// When the lock is not held, it writes nothing and returns an error
// matching ErrExpired or ErrTaken (both ErrNotHeld; ErrBroken after a
// [Locker.Break]), and the lock ends, as a Refresh that found it gone
// ends it. A lock past its [Lock.ValidUntil] is refused with ErrLapsed
// before anything is sent. With single.WithReplicas, the write waits for
// the replicas' acknowledgement, as the lock does, and fails with a
// *strategy.ReplicaError when too few acknowledge (the write has landed on
// the master).
//
// Every key the script touches must be in keys, so that it runs where a
// server checks the keys a script declares (Dragonfly, ElastiCache). On a
// Cluster they must be in the lock's hash slot: give them the lock key's
// hash tag ({orders}:42 guards {orders}:42:state). Guard refuses others
// with an [*ArgumentError] named "keys" that names them, sending nothing.
// An empty script gives one named "script". A strategy that cannot check a
// lock on one server atomically (redlock, whose lock lives on several;
// setnx-getset, whose values are timestamps that two holders may share)
// gives one named "lock" that matches errors.ErrUnsupported: guard the
// resource with the lock's fencing token instead (package fence).
//
// Make script a constant: each one is loaded into the server's script
// cache. On a server that refuses scripts, use [Lock.GuardCommands]. Guard
// runs one at a time with Refresh, Release, TTL and SetMetadata, through
// the Op hooks, as e.Op "guard". Its Redis and transport errors are
// wrapped as theirs are.
func (l *Lock) Guard(ctx context.Context, script string, keys []string, args ...any) (any, error) {
	if script == "" {
		return nil, &ArgumentError{Name: "script", Reason: "must not be empty"}
	}
	return l.guard(ctx, strategy.Write{Script: script, Keys: keys, Args: args})
}

// GuardCommands runs cmds, each a command name followed by its arguments,
// on the lock's server, in a transaction (WATCH, MULTI, EXEC) that runs
// only while the lock is held, as [Lock.Guard] runs its script, and
// returns their replies, one per command. It needs no Lua: use it on a
// server whose ACL or provider forbids scripts (driver.WithoutScripts),
// or where a script cannot be loaded. It costs two round trips over a
// driver that pipelines: WATCH with the lock's reads, then MULTI, the
// commands and EXEC, all on one pinned connection.
//
//	replies, err := lk.GuardCommands(ctx, []string{"{orders}:42:state"},
//		[]any{"SET", "{orders}:42:state", "paid"})
//
// keys are the keys cmds write. They are watched with the lock's keys: a
// transaction aborted by a write to one of them, or to the lock's key that
// left it held (its own refresh), runs again, a few times at most, then
// fails; one aborted because the lock was taken reports ErrTaken. As in
// any Redis transaction, a command that fails within it (a WRONGTYPE, say)
// does not undo the others: its error is returned. The errors, the
// Cluster rule for keys and the strategies refused are Guard's; no
// commands gives an [*ArgumentError] named "commands".
func (l *Lock) GuardCommands(ctx context.Context, keys []string, cmds ...[]any) ([]any, error) {
	if len(cmds) == 0 {
		return nil, &ArgumentError{Name: "commands", Reason: "must not be empty"}
	}
	for i, c := range cmds {
		if len(c) == 0 {
			return nil, &ArgumentError{Name: "commands", Reason: fmt.Sprintf("command %d is empty", i)}
		}
		if name, ok := c[0].(string); !ok || name == "" {
			return nil, &ArgumentError{Name: "commands", Reason: fmt.Sprintf("command %d: got name %T, want a string", i, c[0])}
		}
	}
	reply, err := l.guard(ctx, strategy.Write{Keys: keys, Commands: cmds})
	replies, _ := reply.([]any)
	return replies, err
}

// guard runs w under the lock, for Guard and GuardCommands.
func (l *Lock) guard(ctx context.Context, w strategy.Write) (any, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	for _, k := range w.Keys {
		if k == "" {
			return nil, &ArgumentError{Name: "keys", Reason: "must not hold an empty key"}
		}
	}
	if l == nil {
		return nil, ErrNotHeld
	}
	g, ok := l.s.(strategy.Guarder)
	if !ok {
		name, _ := describe(l.s)
		return nil, &ArgumentError{Name: "lock", Reason: "guarded writes are not supported by " + name +
			": no one server can check its locks atomically; pass the lock's fencing token to the resource instead (package fence)",
			Err: errors.ErrUnsupported}
	}
	l.ops.Lock()
	defer l.ops.Unlock()
	l.mu.Lock()
	cause, until := l.cause, l.validUntil
	l.mu.Unlock()
	switch {
	case cause != nil:
		return nil, cause
	case !time.Now().Before(until):
		l.lapse() // the timer may not have fired yet
		return nil, l.Err()
	}
	keys := []string{l.key}
	if l.many != nil {
		keys = l.many.keys
	}
	var reply any
	err := l.call(ctx, "guard", 0, func(ctx context.Context, l *Lock, value string) (err error) {
		reply, err = g.Guard(ctx, keys, value, w)
		return err
	})
	if err != nil {
		return nil, l.fail(ctx, "guard", err)
	}
	return reply, nil
}
