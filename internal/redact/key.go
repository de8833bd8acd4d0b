package redact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// KeyPrefix is how many leading characters of a key Key keeps.
const KeyPrefix = 4

// Key shortens an identifier that may be personal data (a business key is
// often an e-mail address or an account number) for a log line: its first
// KeyPrefix characters, its length and a short hash, e.g.
// "ord-…(36 B, #1a2b3c4d)". Equal keys give equal results, so log lines
// can still be correlated; the full value cannot be read back. Keys of at
// most KeyPrefix characters are hashed without a prefix.
func Key(s string) string {
	prefix, n, sum := KeyParts([]byte(s))
	return FormatKey(prefix, n, sum[:])
}

// KeyParts are what Key shows of b: its first KeyPrefix characters (none
// when b is no longer), its length in bytes and its SHA-256. A caller that
// must not hold b (relay verify's entries) keeps these and formats them
// with FormatKey.
func KeyParts(b []byte) (prefix string, n int, sum [sha256.Size]byte) {
	sum = sha256.Sum256(b)
	i := 0
	for chars := 0; i < len(b); chars++ {
		if chars == KeyPrefix {
			return string(b[:i]), len(b), sum
		}
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return "", len(b), sum
}

// FormatKey is Key from KeyParts' parts (sum: at least its first 4 bytes).
func FormatKey(prefix string, n int, sum []byte) string {
	h := hex.EncodeToString(sum[:4])
	if prefix == "" {
		return fmt.Sprintf("…(%d B, #%s)", n, h)
	}
	return fmt.Sprintf("%s…(%d B, #%s)", prefix, n, h)
}
