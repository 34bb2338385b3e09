// Package scan walks the keys of a Redis deployment with SCAN: a server's,
// or every master's of a Cluster, for lock.Locker.List and the locksmith
// CLI.
package scan

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/locksmith-go/lock/driver"
	"github.com/locksmith-go/lock/internal/cas"
	"github.com/locksmith-go/lock/internal/glob"
	"github.com/locksmith-go/lock/internal/neterr"
)

// Prefix calls yield with each key of c's deployment that starts with
// prefix, a SCAN MATCH page of count at a time, until yield returns false or
// the scan ends. On a Cluster (CLUSTER SLOTS lists its masters) it scans
// every master in turn, over a connection pinned to it ([driver.Pin]);
// elsewhere (CLUSTER SLOTS is refused) the one server c sends to. As SCAN
// does, it may yield a key twice, and a key that was added or removed, or
// whose slot moved, during the scan may be missed. It returns an error
// matching errors.ErrUnsupported when c sends no commands of its choice
// ([driver.Commander]), cannot pin a connection on a Cluster, or talks to
// several servers that are not a Cluster (a go-redis Ring).
func Prefix(ctx context.Context, c driver.Conn, prefix string, count int, yield func(key string) bool) error {
	match := glob.Escape(prefix) + "*"
	keys, err := masters(ctx, c)
	if err != nil {
		return err
	}
	if keys == nil {
		if addr := driver.Addr(c); strings.Contains(addr, ",") {
			return fmt.Errorf("scan: %s: several servers that are not a Cluster, whose keys no one SCAN reaches: %w", addr, errors.ErrUnsupported)
		}
		_, err := walk(ctx, c, match, count, yield)
		return err
	}
	for _, key := range keys {
		more := true
		err := driver.Pin(ctx, c, key, func(one driver.Conn) (err error) {
			more, err = walk(ctx, one, match, count, yield)
			return err
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// walk scans c's keys that match match; more is false when yield stopped
// it.
func walk(ctx context.Context, c driver.Conn, match string, count int, yield func(string) bool) (more bool, err error) {
	for cursor := "0"; ; {
		next, keys, err := Page(ctx, c, cursor, match, count)
		if err != nil {
			return false, err
		}
		for _, key := range keys {
			if !yield(key) {
				return false, nil
			}
		}
		if cursor = next; cursor == "0" {
			return true, nil
		}
	}
}

// Page sends SCAN cursor MATCH match COUNT count to c, and returns the next
// cursor ("0" at the end) and the keys.
func Page(ctx context.Context, c driver.Conn, cursor, match string, count int) (next string, keys []string, err error) {
	reply, err := driver.Do(ctx, c, "SCAN", cursor, "MATCH", match, "COUNT", count)
	if err != nil {
		return "", nil, err
	}
	if r, ok := reply.([]any); ok && len(r) == 2 {
		next, ok := r[0].(string)
		batch, ok2 := r[1].([]any)
		for _, k := range batch {
			key, ok3 := k.(string)
			keys, ok2 = append(keys, key), ok2 && ok3
		}
		if ok && ok2 {
			return next, keys, nil
		}
	}
	return "", nil, fmt.Errorf("SCAN: got the reply %v, want a cursor and keys", reply)
}

// masters returns, for a Cluster, a key in a slot of each master, and nil
// for a server that refuses CLUSTER SLOTS: cluster support disabled, or the
// command unknown or denied (a Cluster client cannot work without it).
func masters(ctx context.Context, c driver.Conn) ([]string, error) {
	reply, err := driver.Do(ctx, c, "CLUSTER", "SLOTS")
	switch {
	case neterr.Final(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	ranges, _ := reply.([]any)
	var keys []string
	seen := map[string]bool{}
	for _, r := range ranges {
		lo, hi, master, ok := slotRange(r)
		if !ok {
			return nil, fmt.Errorf("CLUSTER SLOTS: got the range %v, want {first, last, {host, port, ...}, ...}", r)
		}
		if seen[master] {
			continue
		}
		seen[master] = true
		keys = append(keys, keyIn(lo, hi))
	}
	if keys == nil {
		return nil, errors.New("CLUSTER SLOTS: no slot is served")
	}
	return keys, nil
}

// slotRange reads one range of CLUSTER SLOTS's reply: its first and last
// slots, and its master's host:port.
func slotRange(r any) (lo, hi int, master string, ok bool) {
	a, _ := r.([]any)
	if len(a) < 3 {
		return 0, 0, "", false
	}
	first, ok1 := a[0].(int64)
	last, ok2 := a[1].(int64)
	node, _ := a[2].([]any)
	if !ok1 || !ok2 || len(node) < 2 || first < 0 || last < first || last >= slots {
		return 0, 0, "", false
	}
	return int(first), int(last), fmt.Sprint(node[0], ":", node[1]), true
}

// slots is the number of Redis Cluster hash slots.
const slots = 16384

// keyIn returns a key whose Cluster hash slot is from lo to hi: the first
// decimal number that is. Every slot has one below 2^17 (see the tests).
func keyIn(lo, hi int) string {
	for i := 0; ; i++ {
		key := strconv.Itoa(i)
		if s := cas.Slot(key); s >= lo && s <= hi {
			return key
		}
	}
}
