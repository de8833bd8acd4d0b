package contract_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

func TestCheckTopic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		topic string
		ok    bool
	}{
		{"outbox.order", true}, {"a", true}, {"A-Z_0.9", true}, {strings.Repeat("t", 249), true},
		{"", false}, {".", false}, {"..", false}, {"...", true}, {strings.Repeat("t", 250), false},
		{"no spaces", false}, {"slash/no", false}, {"é", false}, {"nul\x00", false}, {"esc\x1b[2J", false},
	} {
		err := contract.CheckTopic([]byte(tc.topic))
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, contract.ErrInvalidTopic) {
			t.Errorf("CheckTopic(%.20q): %v, want ok %v", tc.topic, err, tc.ok)
		}
	}
	// The error quotes an excerpt, never the whole name.
	huge := strings.Repeat("\x1b", 2_000_000)
	if err := contract.CheckTopic([]byte(huge)); err == nil || len(err.Error()) > 400 || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("CheckTopic(2 MB of escapes): %d bytes of error %.100q", len(err.Error()), err)
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"aé", 2, "a"}, {"aé", 3, "aé"}, {"日本", 4, "日"}, {"\xff\xff\xff\xff\xff", 2, "\xff\xff"},
	} {
		if got := string(contract.Cut([]byte(tc.in), tc.n)); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
