package cas

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// The operations of a lock of several keys without scripts answer as the
// scripts of multi.go do, over the keys of one server, or of one Cluster
// slot, each in one transaction on one pinned connection (the master of
// the first key's slot): WATCH every key (and the fencing counters), GET
// each, compared here (a GET, not MGET, so that a key of another type
// fails with WRONGTYPE before anything is written), then MULTI, the writes,
// EXEC: every key or none.

// AcquireKeys is the package's [AcquireKeys] without scripts: one
// transaction that sets every key, if each is free or holds value, and,
// with fenceKeys, increments each counter, as AcquireFenced does (a
// counter that does not exist starts from the server's clock). When
// another value holds a key, it returns the *strategy.KeyError of the
// first such key, wrapping strategy.ErrNotObtained, and that key's
// remaining TTL. When other clients wrote a watched key during both of the
// transaction's runs, it returns strategy.ErrNotObtained, as take does:
// they were taking the lock.
func (p *Plain) AcquireKeys(ctx context.Context, keys, fenceKeys []string, value string, ttl time.Duration) (fences []int64, holderTTL time.Duration, err error) {
	watch := append(append(make([]string, 0, len(keys)+len(fenceKeys)), keys...), fenceKeys...)
	reads := make([][]any, 0, len(keys)+len(fenceKeys)+1)
	for _, k := range keys {
		reads = append(reads, []any{"GET", k})
	}
	for _, f := range fenceKeys {
		reads = append(reads, []any{"EXISTS", f})
	}
	if fenceKeys != nil {
		reads = append(reads, []any{"TIME"})
	}
	replies, err := p.transact(ctx, keys[0], watch, reads, func(s *session, got []any) ([][]any, error) {
		cmds := make([][]any, 0, len(keys)+2*len(fenceKeys))
		for i, k := range keys {
			if v, ok := got[i].(string); ok && v != value {
				ttl, _, err := s.c.PTTL(ctx, k)
				if err != nil {
					return nil, err
				}
				holderTTL = max(ttl, 0)
				return nil, &strategy.KeyError{Key: k, Err: strategy.ErrNotObtained}
			}
			cmds = append(cmds, []any{"SET", k, value, "PX", ttl.Milliseconds()})
		}
		for j, f := range fenceKeys {
			if got[len(keys)+j] == int64(0) {
				now, err := serverTime(got[len(got)-1])
				if err != nil {
					return nil, err
				}
				cmds = append(cmds, []any{"SET", f, now})
			}
			cmds = append(cmds, []any{"INCR", f})
		}
		return cmds, nil
	})
	switch {
	case errors.Is(err, errChanged):
		return nil, 0, strategy.ErrNotObtained
	case err != nil:
		return nil, holderTTL, err
	case fenceKeys == nil:
		return nil, 0, nil
	}
	// After the SETs of the keys, each counter has its INCR's reply, an
	// integer, preceded by its SET's ("OK") when it started from the clock.
	for _, r := range replies[len(keys):] {
		if n, ok := r.(int64); ok {
			fences = append(fences, n)
		}
	}
	if len(fences) != len(fenceKeys) {
		return nil, 0, fmt.Errorf("EXEC: got %d integers, want one per fencing counter, %d", len(fences), len(fenceKeys))
	}
	return fences, 0, nil
}

// PExpireKeys is the package's [PExpireKeys] without scripts: one
// transaction that sets the TTL of every key if each holds value, and
// changes nothing otherwise. (SET IFEQ, which would spare the transaction,
// extends one key at a time: not all or none.)
func (p *Plain) PExpireKeys(ctx context.Context, keys []string, value string, ttl time.Duration) error {
	reads := make([][]any, len(keys))
	for i, k := range keys {
		reads[i] = []any{"GET", k}
	}
	_, err := p.transact(ctx, keys[0], keys, reads, func(_ *session, got []any) ([][]any, error) {
		cmds := make([][]any, len(keys))
		for i, k := range keys {
			cmds[i] = []any{"PEXPIRE", k, ttl.Milliseconds()}
		}
		return cmds, ownersOf(keys, got, value)
	})
	return err
}

// ownersOf returns nil if every one of keys holds value, as the replies
// of their GETs, got, say, and otherwise the *strategy.KeyError of each
// that does not, wrapping what ownerOf found, joined in the order of keys.
func ownersOf(keys []string, got []any, value string) error {
	var errs []error
	for i, k := range keys {
		err := ownerOf(got[i], value)
		switch {
		case errors.Is(err, strategy.ErrNotHeld):
			errs = append(errs, &strategy.KeyError{Key: k, Err: err})
		case err != nil:
			return err
		}
	}
	return errors.Join(errs...)
}

// DeleteKeys is the package's [DeleteKeys] without scripts: a Delete of
// each key, which deletes it only if it holds value (DELEX IFEQ, DELIFEQ,
// or a transaction, as the server offers). A release needs no more than
// that: unlike an acquisition or a refresh, it has nothing to undo when
// some keys are not ours. It returns the first error that is not about a
// key (a transport error), after trying every key, so that the caller tries
// again; otherwise the errors of the keys found gone or taken.
func (p *Plain) DeleteKeys(ctx context.Context, keys []string, value string) error {
	var lost []error
	var failed error
	for _, k := range keys {
		err := p.Delete(ctx, k, value)
		switch {
		case errors.Is(err, strategy.ErrNotHeld):
			lost = append(lost, &strategy.KeyError{Key: k, Err: err})
		case err != nil && failed == nil:
			failed = err
		}
	}
	if failed != nil {
		return failed
	}
	return errors.Join(lost...)
}

// PTTLKeys is the package's [PTTLKeys] without scripts: a snapshot, MULTI,
// GET and PTTL of each key, EXEC, compared here.
func (p *Plain) PTTLKeys(ctx context.Context, keys []string, value string) (time.Duration, error) {
	cmds := make([][]any, 0, 2*len(keys))
	for _, k := range keys {
		cmds = append(cmds, []any{"GET", k}, []any{"PTTL", k})
	}
	replies, err := resend(ctx, func() (replies []any, err error) {
		err = p.session(ctx, keys[0], func(s *session) (err error) {
			replies, err = s.exec(ctx, cmds)
			return err
		})
		return replies, err
	})
	if err != nil {
		return 0, err
	}
	// The replies hold the values, and so tokens: never show them in an error.
	least := time.Duration(-1)
	var errs []error
	for i, k := range keys {
		ms, ok := replies[2*i+1].(int64)
		if !ok {
			return 0, fmt.Errorf("PTTL: got reply %T, want an integer", replies[2*i+1])
		}
		ttl, exists := driver.FromPTTL(ms)
		v, _ := replies[2*i].(string)
		switch {
		case !exists:
			errs = append(errs, &strategy.KeyError{Key: k, Err: strategy.ErrExpired})
		case v != value:
			errs = append(errs, &strategy.KeyError{Key: k, Err: strategy.ErrTaken})
		case ttl >= 0 && (least < 0 || ttl < least):
			least = ttl
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return least, nil
}
