package redact

import (
	"errors"
	"strings"
)

// param is one name=value pair of a keyword/value connection string.
type param struct {
	name string
	// raw is the value as written, quotes and backslashes included; value
	// is what libpq reads from it.
	raw, value string
}

// errKeywords says a keyword/value string does not parse; it names nothing
// of the string, which may hold a secret.
var errKeywords = errors.New("malformed keyword/value connection string")

// isSpace is libpq's isspace in the C locale, as pgconn uses.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// parseKeywords reads a keyword/value connection string as libpq's
// conninfo_parse (and pgconn's parseKeywordValueSettings) do: a name is a
// run of non-space bytes followed, after optional space, by '='; a value
// is either quoted with single quotes, or runs to the next space; in both,
// a backslash takes the next byte literally (so \' and \\), and a quote is
// never doubled. It returns the pairs read before a fault with the error,
// and for an unterminated quote a last pair holding the rest of the string.
func parseKeywords(s string) ([]param, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errKeywords
	}
	var out []param
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			return out, nil
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		name := s[start:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) || s[i] != '=' || name == "" {
			return out, errKeywords
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		start = i
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if c == '\\' {
					if i < len(s) {
						v.WriteByte(s[i])
						i++
					}
					continue
				}
				if c == '\'' {
					closed = true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				out = append(out, param{name: name, raw: s[start:], value: s[start+1:]})
				return out, errKeywords
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				c := s[i]
				i++
				if c == '\\' {
					if i == len(s) {
						break // libpq drops a trailing backslash
					}
					c = s[i]
					i++
				}
				v.WriteByte(c)
			}
		}
		out = append(out, param{name: name, raw: s[start:i], value: v.String()})
	}
}

// quote writes a value so that libpq reads it back unchanged: bare when it
// can be, else in single quotes with \ and ' escaped.
func quote(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}
