package cas

import "strings"

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// Slot returns the Redis Cluster hash slot of key, as the Cluster computes
// it: CRC16 (XMODEM) of its hash tag, or of the whole key when it has none,
// modulo [Slots]. Keys of one slot live on one master, and one script can
// name them all.
func Slot(key string) int {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	return int(crc16(key) % Slots)
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
