package strategy

import (
	"crypto/sha256"
	"encoding/hex"
)

// TokenLen is the length of a token: 22 base64url characters, 128 random
// bits, as the lock package makes them (and bsm/redislock too). A stored
// value is the token followed by the Locker's stamp ([Request].Stamp) and
// the holder's metadata, if any, which keeps the layout of bsm/redislock.
const TokenLen = 22

// SplitValue splits a stored value into the holder's token and metadata:
// the token is the first [TokenLen] characters, when they are base64url
// characters. Any other value (shorter, or of another form, such as a
// legacy timestamp) is a token on its own, with no metadata. The metadata
// it returns starts with the Locker's stamp, which lock.Locker.Inspect
// reads into State.HeldFor and State.Trace.
func SplitValue(value string) (token, metadata string) {
	if len(value) < TokenLen {
		return value, ""
	}
	for i := range TokenLen {
		if !isBase64URL(value[i]) {
			return value, ""
		}
	}
	return value[:TokenLen], value[TokenLen:]
}

// IsToken reports whether token has the form of a token: [TokenLen]
// base64url characters.
func IsToken(token string) bool {
	t, m := SplitValue(token)
	return len(t) == TokenLen && m == ""
}

func isBase64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// FingerprintLen is the length of a fingerprint ([Fingerprint]): 16
// hexadecimal digits.
const FingerprintLen = 16

// Fingerprint returns a fingerprint of a token that can be shown where the
// token must not be: the first 8 bytes of its SHA-256, in lower-case hex
// ([FingerprintLen] characters). It tells holders apart, and cannot be
// turned back into the token.
func Fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:FingerprintLen/2])
}
