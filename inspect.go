package lock

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/locksmith-go/lock/strategy"
)

// Inspect reads the lock through the strategy, within the Op hooks.
func (l *locker) Inspect(ctx context.Context, key string, opts ...Option) (State, error) {
	if err := checkCall(ctx, key); err != nil {
		return State{}, err
	}
	return l.read(ctx, "inspect", key, opts, l.s.Inspect)
}

// Break breaks the lock through the strategy, within the Op hooks.
func (l *locker) Break(ctx context.Context, key, fingerprint string, opts ...Option) (State, error) {
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
func (l *locker) read(ctx context.Context, op, key string, opts []Option, do func(ctx context.Context, key string) (State, error)) (State, error) {
	o, err := l.options(opts)
	if err != nil {
		return State{}, err
	}
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
	if err != nil {
		return st, opError(ctx, op, key, err)
	}
	return st, nil
}
