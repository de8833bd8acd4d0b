package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Placeholder replaces each secret value in URL's output.
const Placeholder = "xxxxx"

// Unparsable replaces a whole connection string that does not parse, since
// it may still hold a secret.
const Unparsable = "(unparsable connection string)"

// secretName matches a parameter name that holds a secret.
var secretName = regexp.MustCompile(`(?i)password|secret|token`)

// keywordName is the shape of a parameter name URL echoes. libpq and pgconn
// take any run of non-space bytes before '=' as a name; one that is not an
// identifier (a URL of another scheme, say "mysql://u:pw@h/db?x=1") could
// carry a secret, so URL reports the string as unparsable instead.
var keywordName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// IsSecret reports whether a connection parameter named name holds a
// secret.
func IsSecret(name string) bool { return secretName.MatchString(name) }

// isURL reports whether s is in the URL form. pgconn (like libpq) decides
// by the scheme prefix alone; anything else is a keyword/value string, even
// when a value holds "://" (options='-c x=https://y').
func isURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// URL returns the database URL or keyword/value connection string s with
// every secret value replaced by Placeholder. The keyword/value form comes
// back normalised (one space between parameters, values quoted only where
// needed). A string that does not parse is replaced whole by Unparsable.
func URL(s string) string {
	if !isURL(s) {
		params, err := parseKeywords(s)
		if err != nil {
			return Unparsable
		}
		var b strings.Builder
		for i, p := range params {
			if !keywordName.MatchString(p.name) {
				return Unparsable
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p.name)
			b.WriteByte('=')
			if IsSecret(p.name) {
				b.WriteString(Placeholder)
			} else {
				b.WriteString(quote(p.value))
			}
		}
		return b.String()
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
// secret parameter's value in either form), so a caller can also scrub them
// from free text such as a driver's error. Keyword/value secrets come both
// as written (quotes and escapes included) and as read. A keyword/value
// string that does not parse gives the secrets before the fault, and an
// unterminated quoted secret gives the rest of the string.
func Secrets(s string) []string {
	var out []string
	if !isURL(s) {
		params, _ := parseKeywords(s)
		for _, p := range params {
			if !IsSecret(p.name) || p.raw == "" {
				continue
			}
			out = append(out, p.raw)
			if p.value != p.raw && p.value != "" {
				out = append(out, p.value)
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
