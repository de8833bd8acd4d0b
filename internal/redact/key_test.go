package redact_test

import (
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/redact"
)

func TestKey(t *testing.T) {
	long := strings.Repeat("alice@example.com/", 12)
	got := redact.Key(long)
	if strings.Contains(got, "example") || !strings.HasPrefix(got, "alic…(216 B, #") {
		t.Errorf("Key(long) = %q", got)
	}
	if redact.Key(long) != got || redact.Key(long+"x") == got {
		t.Error("Key is not a stable, distinguishing digest")
	}
	if got := redact.Key("abc"); strings.Contains(got, "abc") || !strings.HasPrefix(got, "…(3 B, #") {
		t.Errorf("Key(short) = %q", got)
	}
	if got := redact.Key("élève-42"); !strings.HasPrefix(got, "élèv…(") {
		t.Errorf("Key keeps whole characters: %q", got)
	}
}
