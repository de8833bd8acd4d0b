package contract

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"pay-1", true},
		{"zahlung-ü-1", true},
		{strings.Repeat("k", MaxKeyBytes), true},
		{"", false},
		{strings.Repeat("k", MaxKeyBytes+1), false},
		{strings.Repeat("k", 3000), false},
		{"bad-\xff-utf8", false},
		{"nul-\x00-byte", false},
	} {
		err := CheckKey("business key", tc.key)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidKey)) {
			t.Errorf("CheckKey(%.20q) = %v, want ok %v", tc.key, err, tc.ok)
		}
	}
}
