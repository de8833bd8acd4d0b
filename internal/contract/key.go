package contract

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyBytes bounds the length in bytes of a message ID and of a business
// key. Postgres refuses a btree entry over about 2.7 kB (2704 bytes with the
// default 8 kB page); the inbox's unique indexes hold the consumer name next to
// each key, so 1024 bytes leaves room for both with a wide margin.
const MaxKeyBytes = 1024

// ErrInvalidKey is wrapped by every error of CheckKey.
var ErrInvalidKey = errors.New("invalid key")

// CheckKey reports why s cannot serve as a message ID or business key: it
// must be non-empty, valid UTF-8, free of NUL bytes and at most MaxKeyBytes
// long. what names the key in the error ("message ID", "business key").
// Postgres text refuses NUL and invalid UTF-8 (SQLSTATE 22021) and a longer
// key can overflow the unique indexes (54000), so such a key could never be
// claimed.
func CheckKey(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidKey, what)
	case len(s) > MaxKeyBytes:
		return fmt.Errorf("%w: %s is %d bytes long (at most %d)", ErrInvalidKey, what, len(s), MaxKeyBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidKey, what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalidKey, what)
	}
	return nil
}
