package cas

import (
	"slices"
	"strings"
	"sync"
)

// slots is the number of Redis Cluster hash slots.
const slots = 16384

// Slot returns the Redis Cluster hash slot of key, as the Cluster computes
// it: CRC16 (XMODEM) of its hash tag, or of the whole key when it has none,
// modulo slots. Keys of one slot live on one master, and one script can
// name them all.
func Slot(key string) int {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	return int(crc16(key) % slots)
}

// hashTag returns the part of key that Redis Cluster hashes, when it is not
// the whole key: from the first '{' to the first '}' after it, when that
// part is not empty.
func hashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	n := strings.IndexByte(key[open+1:], '}')
	if n <= 0 {
		return "", false
	}
	return key[open+1 : open+1+n], true
}

// crc16 is the CRC16 of Redis Cluster: XMODEM, polynomial 0x1021, initial
// value 0.
func crc16(s string) uint16 {
	var crc uint16
	for i := range len(s) {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slotGroups returns the indexes of keys grouped by Cluster hash slot, in
// the order of the slots, each group's in the order of keys: the keys that
// one script can name on a Cluster.
func slotGroups(keys []string) [][]int {
	at := make([]int, len(keys))
	slot := make([]int, len(keys))
	for i, k := range keys {
		at[i], slot[i] = i, Slot(k)
	}
	slices.SortStableFunc(at, func(a, b int) int { return slot[a] - slot[b] })
	var gs [][]int
	for i, j := range at {
		if i == 0 || slot[j] != slot[at[i-1]] {
			gs = append(gs, nil)
		}
		gs[len(gs)-1] = append(gs[len(gs)-1], j)
	}
	return gs
}

// slotWorkers is how many scripts of one call, one per Cluster hash slot,
// eachSlot sends at once.
const slotWorkers = 16

// eachSlot runs f(i) for each i from 0 to n-1, up to slotWorkers at once,
// and returns when every call has: the scripts of n hash slots, side by
// side. One call runs on the caller's goroutine.
func eachSlot(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, slotWorkers)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

// Groups returns the indexes of keys in groups that one script each can
// name: one group of every key, or, over a Cluster client (sharded),
// slotGroups'.
func Groups(keys []string, sharded bool) [][]int {
	if sharded {
		return slotGroups(keys)
	}
	at := make([]int, len(keys))
	for i := range at {
		at[i] = i
	}
	return [][]int{at}
}

// scatter runs call for each group of gs, the indexes of n items (as
// Groups returns them), as eachSlot does, and returns each item's error and
// whether its call got an answer. call returns one error per item of its
// group, and the group's: an item's error is its own, else the group's
// (nil, or a failure of the whole group, such as too few replicas
// acknowledging); when the call got no answer (no errors per item), the
// group's error is each item's. An empty group is not called.
func scatter(n int, gs [][]int, call func(at []int) ([]error, error)) (errs []error, answered []bool) {
	errs, answered = make([]error, n), make([]bool, n)
	eachSlot(len(gs), func(g int) {
		if len(gs[g]) != 0 {
			es, err := call(gs[g])
			spread(errs, answered, gs[g], es, err)
		}
	})
	return errs, answered
}

// spread sets errs and answered of the items at from their call's answer,
// as scatter says.
func spread(errs []error, answered []bool, at []int, es []error, err error) {
	for k, j := range at {
		answered[j] = es != nil
		if es != nil && es[k] != nil {
			errs[j] = es[k]
		} else {
			errs[j] = err
		}
	}
}

// pick returns the elements of all at the indexes at, in increasing order:
// all itself when at is every index.
func pick[T any](all []T, at []int) []T {
	if len(at) == len(all) {
		return all
	}
	out := make([]T, len(at))
	for k, j := range at {
		out[k] = all[j]
	}
	return out
}
