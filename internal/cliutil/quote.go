package cliutil

import (
	"strconv"
	"unicode/utf8"
)

// Quote returns s for a terminal: as it is when every character is
// printable and none is a space, a double quote or a backslash, else in
// Go's double-quoted form (strconv.Quote), which escapes control
// characters, invalid UTF-8 and invisible format characters such as a
// right-to-left override. Values that come from Kafka, a handler or an
// external API (message IDs, business keys, last errors) go through it, so
// they can neither send terminal escape sequences (colours, cursor moves,
// the window title) nor break a line into lines that look like output.
func Quote(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == utf8.RuneError || r == ' ' || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
