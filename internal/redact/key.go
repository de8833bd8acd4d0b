package redact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:4])
	n := 0
	for i := range s {
		if n == KeyPrefix {
			return fmt.Sprintf("%s…(%d B, #%s)", s[:i], len(s), h)
		}
		n++
	}
	return fmt.Sprintf("…(%d B, #%s)", len(s), h)
}
