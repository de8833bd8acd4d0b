package tableformat

import (
	"strings"
	"unicode/utf16"
)

// TraceHeaders reads the W3C trace context out of a Debezium
// tracingspancontext value: the span context serialized as a
// java.util.Properties file (Debezium's outbox extensions write it with
// Properties.store: a date comment, then "traceparent=00-…", with '=',
// ':', '#' and '!' escaped by a backslash). It reads the file as
// Properties.load does (see readProperties) and keeps traceparent and
// tracestate, the values Java would load, with no surrounding whitespace
// (W3C trace context values have none); nil when there is neither.
func TraceHeaders(text []byte) map[string]string {
	var out map[string]string
	readProperties(string(text), func(k, v string) {
		if k != "traceparent" && k != "tracestate" {
			return
		}
		if out == nil {
			out = make(map[string]string, 2)
		}
		out[k] = strings.Trim(v, " \t\f\r\n")
	})
	return out
}

// readProperties calls fn with each key and value of text, a
// java.util.Properties file, in order (a later value of a key replaces
// the earlier one, as in Java), as Properties.load reads it: natural lines
// end at \n, \r or \r\n; leading whitespace is skipped; a line whose first
// other character is '#' or '!' is a comment; a line ending in an odd
// number of backslashes continues on the next one (whose leading
// whitespace is dropped); the key ends at the first unescaped '=', ':' or
// whitespace, and whitespace around one '=' or ':' is the separator; \t,
// \n, \r, \f and \uXXXX are escapes, and a backslash before any other
// character stands for that character.
func readProperties(text string, fn func(key, value string)) {
	for len(text) > 0 {
		var line string
		line, text = logicalLine(text)
		if line == "" {
			continue
		}
		key, value := splitProperty(line)
		fn(unescapeProperty(key), unescapeProperty(value))
	}
}

// isPropertySpace reports whether c is whitespace to Properties.load.
func isPropertySpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// logicalLine returns the first logical line of text, continuations
// joined, without its leading whitespace ("" for a blank or comment line),
// and the rest of text.
func logicalLine(text string) (line, rest string) {
	var b strings.Builder
	for first := true; ; first = false {
		natural, rest, ended := naturalLine(strings.TrimLeft(text, " \t\f"))
		text = rest
		if first && natural != "" && (natural[0] == '#' || natural[0] == '!') {
			return "", text
		}
		if n := len(natural) - len(strings.TrimRight(natural, "\\")); ended && n%2 == 1 {
			b.WriteString(natural[:len(natural)-1])
			continue
		}
		b.WriteString(natural)
		return b.String(), text
	}
}

// naturalLine splits text after its first line end (\n, \r or \r\n);
// ended reports whether there was one.
func naturalLine(text string) (line, rest string, ended bool) {
	i := strings.IndexAny(text, "\r\n")
	if i < 0 {
		return text, "", false
	}
	rest = text[i+1:]
	if text[i] == '\r' && strings.HasPrefix(rest, "\n") {
		rest = rest[1:]
	}
	return text[:i], rest, true
}

// splitProperty splits a logical line into its key and value, both still
// escaped.
func splitProperty(line string) (key, value string) {
	i := 0
	for escaped := false; i < len(line); i++ {
		c := line[i]
		if escaped {
			escaped = false
			continue
		}
		if c == '\\' {
			escaped = true
			continue
		}
		if c == '=' || c == ':' || isPropertySpace(c) {
			break
		}
	}
	key = line[:i]
	skip := func() {
		for i < len(line) && isPropertySpace(line[i]) {
			i++
		}
	}
	skip()
	if i < len(line) && (line[i] == '=' || line[i] == ':') {
		i++
		skip()
	}
	return key, line[i:]
}

// unescapeProperty resolves the escapes of a key or value. A malformed
// \uXXXX (Java refuses the file) is read as the letter u.
func unescapeProperty(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, ok := hex4(s[i+1:])
			if !ok {
				b.WriteByte('u')
				continue
			}
			i += 4
			if utf16.IsSurrogate(r) && strings.HasPrefix(s[i+1:], "\\u") {
				if r2, ok := hex4(s[i+3:]); ok {
					if pair := utf16.DecodeRune(r, r2); pair != '\uFFFD' {
						r = pair
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// hex4 reads the four hexadecimal digits s starts with.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}
