package cliutil

import (
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"m-0193a0b4", "m-0193a0b4"},
		{"élève/42", "élève/42"},
		{"", `""`},
		{"card declined", `"card declined"`},
		{"\x1b]0;pwned\x07", `"\x1b]0;pwned\a"`},
		{"\x1b[31mred\x1b[0m", `"\x1b[31mred\x1b[0m"`},
		{"k-1\nfake line", `"k-1\nfake line"`},
		{"a\rb\tc", `"a\rb\tc"`},
		{"\u009b31m", `"\u009b31m"`}, // C1 CSI
		{"abc\u202edef", `"abc\u202edef"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{`"quoted"`, `"\"quoted\""`},
		{`a\nb`, `"a\\nb"`},
	} {
		got := Quote(tc.in)
		if got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if strings.ContainsAny(got, "\x1b\n\r\x07\u009b\u202e") {
			t.Errorf("Quote(%q) = %q still holds a control character", tc.in, got)
		}
	}
}
