package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Placeholder replaces each secret value in URL's output.
const Placeholder = "xxxxx"

// Unparsable replaces a whole URL that does not parse, since it may still
// hold a secret.
const Unparsable = "(unparsable database URL)"

// secretName matches a parameter name that holds a secret.
var secretName = regexp.MustCompile(`(?i)password|secret|token`)

// keywordParam matches one name=value pair of a keyword/value connection
// string: the value quoted (with doubled or backslash-escaped quotes), or
// unquoted up to the next unescaped white space, as libpq reads it.
var keywordParam = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)('(?:[^'\\]|\\.|'')*'?|(?:\\.|[^\s\\])*\\?)`)

// IsSecret reports whether a connection parameter named name holds a
// secret.
func IsSecret(name string) bool { return secretName.MatchString(name) }

// URL returns the database URL or keyword/value connection string s with
// every secret value replaced by Placeholder. A URL that does not parse is
// replaced whole by Unparsable.
func URL(s string) string {
	if !strings.Contains(s, "://") {
		return keywordParam.ReplaceAllStringFunc(s, func(m string) string {
			p := keywordParam.FindStringSubmatch(m)
			if !IsSecret(p[1]) {
				return m
			}
			return p[1] + p[2] + Placeholder
		})
	}
	u, err := url.Parse(s)
	if err != nil {
		return Unparsable
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Placeholder)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Unparsable
	}
	changed := false
	for k, vs := range q {
		if IsSecret(k) {
			for i := range vs {
				vs[i] = Placeholder
			}
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Secrets returns the secret values s holds (the URL's password, and every
// secret parameter's value in either form), unquoted and unescaped, so a
// caller can also scrub them from free text such as a driver's error.
func Secrets(s string) []string {
	var out []string
	if !strings.Contains(s, "://") {
		for _, p := range keywordParam.FindAllStringSubmatch(s, -1) {
			if !IsSecret(p[1]) || p[3] == "" {
				continue
			}
			out = append(out, p[3])
			if v := unquote(p[3]); v != p[3] {
				out = append(out, v)
			}
		}
		return out
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
	}
	q, _ := url.ParseQuery(u.RawQuery)
	for k, vs := range q {
		if IsSecret(k) {
			out = append(out, vs...)
		}
	}
	return out
}

// unquote undoes keyword/value quoting: a backslash-escaped quote ('a\'b')
// and a doubled one (two single quotes between a and b) both give a'b.
func unquote(v string) string {
	if len(v) < 2 || v[0] != '\'' || v[len(v)-1] != '\'' {
		return v
	}
	v = v[1 : len(v)-1]
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '\\' && i+1 < len(v):
			i++
		case v[i] == '\'' && i+1 < len(v) && v[i+1] == '\'':
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
