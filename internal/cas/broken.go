package cas

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// A Break leaves a mark beside each value it deletes, so that the holder
// whose lock it was can tell, when it next finds its key gone, that the
// lock was broken rather than expired: the holder's Refresh, Release and
// TTL then report strategy.ErrBroken, which matches ErrExpired. The mark of
// the holder whose token has fingerprint fp is the companion key
// "broken:" + fp (see Companion), written with SET NX PX for what was left
// of the lock's TTL (brokenTTL when the key had no expiry): past it the
// holder's validity has ended, and it lapses without asking the server.
//
// The mark is evidence, not authority, and costs nothing while locks are
// held: it is read only when a call finds its key gone, in one more round
// trip. It is written after the delete, so that it never names a holder
// that was not broken; a holder that finds its key gone in between, or a
// mark that could not be written (an ACL that denies the key), leaves the
// holder to report ErrExpired.

// brokenTTL is the life of the mark of a key that had no expiry.
const brokenTTL = time.Minute

// brokenMark returns the name of the mark that a Break of value leaves
// beside key; false when key has no companion names (see Companion).
func brokenMark(key, value string) (string, bool) {
	token, _ := strategy.SplitValue(value)
	return Companion(key, "broken:"+strategy.Fingerprint(token))
}

// isBrokenMark reports whether key is named as a mark of brokenMark.
func isBrokenMark(key string) bool {
	i := strings.LastIndex(key, ":broken:")
	if i < 0 {
		return false
	}
	fp := key[i+len(":broken:"):]
	return hasHashTag(key[:i]) && len(fp) == strategy.FingerprintLen && strings.Trim(fp, "0123456789abcdef") == ""
}

// MarkBroken leaves the mark of a Break that deleted value from key, which
// had ttl left (0 or less: no expiry), over c. A mark that cannot be
// written is left out: the Break happened all the same.
func MarkBroken(ctx context.Context, c driver.Conn, key, value string, ttl time.Duration) {
	mark, ok := brokenMark(key, value)
	if !ok || ctx.Err() != nil {
		return
	}
	if ttl <= 0 {
		ttl = brokenTTL
	}
	_, _ = c.SetNX(ctx, mark, "1", max(ttl, time.Millisecond))
}

// broken returns err, the error of an operation on the held lock l, with
// each of its keys that it found gone, and whose mark names l's value,
// reported broken: strategy.ErrBroken for a lock of one key, and in the
// *strategy.KeyError of each such key for a lock of several. It reads the
// marks only when err says a key is gone, and leaves err as it is when
// they cannot be read.
func (s Server) broken(ctx context.Context, l Lock, err error) error {
	if !errors.Is(err, strategy.ErrExpired) || ctx.Err() != nil {
		return err
	}
	if l.Keys == nil {
		return brokenOne(ctx, s.Conn, l.Key, l.Value, err)
	}
	kes := strategy.KeyErrors(err)
	var keys, values []string
	for _, ke := range kes {
		if ke.Err == strategy.ErrExpired {
			keys, values = append(keys, ke.Key), append(values, l.Value)
		}
	}
	if keys == nil {
		return err
	}
	found, errs := marked(ctx, s.Conn, keys, values), make([]error, len(kes))
	j := 0
	for i, ke := range kes {
		errs[i] = ke
		if ke.Err == strategy.ErrExpired {
			if found[j] {
				errs[i] = &strategy.KeyError{Key: ke.Key, Err: strategy.ErrBroken}
			}
			j++
		}
	}
	return errors.Join(errs...)
}

// brokenOne is broken for a lock of one key, over c.
func brokenOne(ctx context.Context, c driver.Conn, key, value string, err error) error {
	if err == strategy.ErrExpired && ctx.Err() == nil && marked(ctx, c, []string{key}, []string{value})[0] {
		return strategy.ErrBroken
	}
	return err
}

// brokenEach is broken for the locks of a batch, whose errors are errs:
// one lock of one key each, b.keys[i] with the value b.ours(i)[0].
func (s Server) brokenEach(ctx context.Context, b Batch, errs []error) {
	var at []int
	var keys, values []string
	for i, err := range errs {
		if err == strategy.ErrExpired {
			at, keys, values = append(at, i), append(keys, b.keys[i]), append(values, b.ours(i)[0])
		}
	}
	if at == nil || ctx.Err() != nil {
		return
	}
	for k, found := range marked(ctx, s.Conn, keys, values) {
		if found {
			errs[at[k]] = strategy.ErrBroken
		}
	}
}

// marked reports, for each of keys, whether the mark of a Break of the
// value of the same index is there, in one round trip over c
// (driver.Pipeline); none is when the marks cannot be read.
func marked(ctx context.Context, c driver.Conn, keys, values []string) []bool {
	found := make([]bool, len(keys))
	cmds := make([][]any, 0, len(keys))
	var at []int
	for i, k := range keys {
		if mark, ok := brokenMark(k, values[i]); ok {
			cmds, at = append(cmds, []any{"EXISTS", mark}), append(at, i)
		}
	}
	if len(cmds) == 0 {
		return found
	}
	replies, err := driver.Pipeline(ctx, c, cmds)
	if err != nil {
		return found
	}
	for j, r := range replies {
		n, _ := r.(int64)
		found[at[j]] = n == 1
	}
	return found
}
