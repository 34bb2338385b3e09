package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locksmith-go/lock"
	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/strategy"
)

// The mutants' base locks several keys as one with the scripts below,
// until single implements strategy.Multi: then this file goes, and base
// gets single's methods.
//
// Each script checks every key of KEYS against the value ARGV[1] and
// returns a code per key: 0 held with the value, 1 gone, 2 held by another.

var (
	multiAcquire = driver.NewScript(`
for i, k in ipairs(KEYS) do
	local v = redis.call('GET', k)
	if v and v ~= ARGV[1] then return i end
end
for _, k in ipairs(KEYS) do redis.call('SET', k, ARGV[1], 'PX', ARGV[2]) end
return 0`)
	multiCheck = `
local codes, held = {}, true
for i, k in ipairs(KEYS) do
	local v = redis.call('GET', k)
	if v == ARGV[1] then codes[i] = 0 elseif v then codes[i] = 2 else codes[i] = 1 end
	held = held and codes[i] == 0
end
`
	multiRefresh = driver.NewScript(multiCheck + `
if held then for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ARGV[2]) end end
return codes`)
	multiRelease = driver.NewScript(multiCheck + `
for i, k in ipairs(KEYS) do if codes[i] == 0 then redis.call('DEL', k) end end
return codes`)
	multiTTL = driver.NewScript(multiCheck + `
if not held then return codes end
local least = -1
for _, k in ipairs(KEYS) do
	local ttl = redis.call('PTTL', k)
	if least < 0 or ttl < least then least = ttl end
end
return least`)
)

func (s base) AcquireKeys(ctx context.Context, r strategy.Request) (strategy.Grant, error) {
	i, err := multiAcquire.Int(ctx, s.conn, r.Keys, r.Value(), r.TTL.Milliseconds())
	if err == nil && i > 0 {
		err = &lock.KeyError{Key: r.Keys[i-1], Err: lock.ErrNotObtained}
	}
	return strategy.Grant{}, err
}

func (s base) RefreshKeys(ctx context.Context, keys []string, value string, ttl time.Duration) (strategy.Grant, error) {
	v, err := multiRefresh.Run(ctx, s.conn, keys, value, ttl.Milliseconds())
	if err != nil {
		return strategy.Grant{}, err
	}
	return strategy.Grant{}, keyErrors(keys, v)
}

func (s base) ReleaseKeys(ctx context.Context, keys []string, value string) error {
	v, err := multiRelease.Run(ctx, s.conn, keys, value)
	if err != nil {
		return err
	}
	return keyErrors(keys, v)
}

func (s base) TTLKeys(ctx context.Context, keys []string, value string) (time.Duration, error) {
	v, err := multiTTL.Run(ctx, s.conn, keys, value)
	if err != nil {
		return 0, err
	}
	if ms, ok := v.(int64); ok {
		return time.Duration(ms) * time.Millisecond, nil
	}
	return 0, keyErrors(keys, v)
}

// keyErrors returns the errors of the keys whose code in v, a script's
// reply, is not 0, joined.
func keyErrors(keys []string, v any) error {
	codes, ok := v.([]any)
	if !ok || len(codes) != len(keys) {
		return fmt.Errorf("unexpected reply %v", v)
	}
	var errs []error
	for i, c := range codes {
		switch c {
		case int64(1):
			errs = append(errs, &lock.KeyError{Key: keys[i], Err: lock.ErrExpired})
		case int64(2):
			errs = append(errs, &lock.KeyError{Key: keys[i], Err: lock.ErrTaken})
		}
	}
	return errors.Join(errs...)
}
