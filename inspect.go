package lock

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/locksmith-go/lock/strategy"
)

// Inspect reads the state of the lock on key without holding it or
// changing it: whether it is held, for how long yet, by whom (a
// fingerprint of the holder's token, never the token, and its
// metadata), and what else the strategy can tell (see [State]). Invalid
// arguments give an [*ArgumentError]; Redis and transport errors are
// wrapped with the operation's name, "inspect" (matching [ErrNoAnswer]
// when Redis did not answer, as Obtain's do). A multi-node strategy
// that could not tell returns what it read, with its error.
//
// Of the options, only [WithHooks] applies: the Op hooks wrap the read
// (e.Op "inspect"), and the Node hooks see each node's answer, so that
// wrappers such as the otel package instrument it as they do Obtain.
// The others are ignored.
func (l *Locker) Inspect(ctx context.Context, key string, opts ...Option) (State, error) {
	if err := checkCall(ctx, key); err != nil {
		return State{}, err
	}
	return l.read(ctx, "inspect", key, opts, l.s.Inspect)
}

// Break deletes the lock on key without its holder's token, for an operator
// whose holder is gone: if the holder's fingerprint (the State.Fingerprint
// that Inspect read) is fingerprint, or whoever holds it when fingerprint is
// "". It deletes as the holder's Release would, waking the waiters, with a
// compare-and-delete of the value it read, so it never deletes a holder that
// came after that reading. It returns the State it read before. When the
// lock is free, the error matches [ErrExpired]; when another holder holds
// it, [ErrTaken], and nothing is deleted; both match [ErrNotHeld]. A
// fingerprint that is neither "" nor 16 hexadecimal digits (a token passed
// by mistake, say) gives an [*ArgumentError] named "fingerprint", and
// nothing is sent. A strategy that cannot break locks gives an error
// matching errors.ErrUnsupported. A live holder finds its lock gone at its
// next Refresh ([ErrExpired]); only fencing ([WithFencing]) protects the
// resource from what it does until then.
//
// Of the options, only [WithHooks] applies: the Op hooks wrap it (e.Op
// "break"), and the Node hooks see each node's answer.
func (l *Locker) Break(ctx context.Context, key, fingerprint string, opts ...Option) (State, error) {
	if err := checkCall(ctx, key); err != nil {
		return State{}, err
	}
	b, ok := l.s.(strategy.Breaker)
	if !ok {
		name, _ := describe(l.s)
		return State{}, fmt.Errorf("lock: break %q: the %s strategy cannot break locks: %w", key, name, errors.ErrUnsupported)
	}
	fingerprint, err := checkFingerprint(fingerprint)
	if err != nil {
		return State{}, err
	}
	return l.read(ctx, "break", key, opts, func(ctx context.Context, key string) (State, error) {
		return b.Break(ctx, key, fingerprint)
	})
}

// checkCall checks the ctx and key of Inspect or Break.
func checkCall(ctx context.Context, key string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	return checkKey(key)
}

// checkFingerprint checks Break's fingerprint: "" (whoever holds the lock),
// or the 16 hexadecimal digits of a fingerprint (strategy.Fingerprint),
// which it returns in lower case, as Inspect shows them. Anything else,
// such as a token passed by mistake, could never match a holder.
func checkFingerprint(fingerprint string) (string, error) {
	if fingerprint == "" {
		return "", nil
	}
	_, err := hex.DecodeString(fingerprint)
	if err == nil && len(fingerprint) == strategy.FingerprintLen {
		return strings.ToLower(fingerprint), nil
	}
	got := fmt.Sprintf("got %d characters", len(fingerprint))
	switch {
	case strategy.IsToken(fingerprint):
		got = "got a token: pass its fingerprint (strategy.Fingerprint), never the token"
	case len(fingerprint) == strategy.FingerprintLen:
		got += ", not all of them hexadecimal digits"
	}
	return "", &ArgumentError{Name: "fingerprint", Reason: fmt.Sprintf("must be the %d hexadecimal digits that Inspect shows (State.Fingerprint), or empty to break whoever holds the lock; %s", strategy.FingerprintLen, got)}
}

// read runs do, the inspection or break named op, within the Op hooks,
// once its caller has checked ctx and key (checkCall).
func (l *Locker) read(ctx context.Context, op, key string, opts []Option, do func(ctx context.Context, key string) (State, error)) (State, error) {
	o, err := l.options(opts)
	if err != nil {
		return State{}, err
	}
	if err := l.enter(); err != nil {
		return State{}, err
	}
	defer l.life.bg.Done()
	if ctx.Err() != nil {
		return State{}, notSent(ctx, op, key)
	}
	var st State
	read := func(ctx context.Context) (err error) {
		st, err = do(ctx, key)
		return err
	}
	if len(o.hooks) == 0 {
		err = read(ctx)
	} else {
		err = o.hooks.wrap(ctx, l.s, o.hooks.event(l.s, op, key), opHook, read)
	}
	unstamp(&st)
	if err != nil {
		return st, opError(ctx, op, key, err)
	}
	return st, nil
}
