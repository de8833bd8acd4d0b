package relaycli

import (
	"net/url"
	"regexp"
	"strings"
)

// redacted replaces a password wherever the CLI prints text.
const redacted = "xxxxx"

// minSecretLen is the shortest password scrubbed from free text: replacing
// every "a" of an error for a one-letter password would make it unreadable,
// and such a password protects nothing anyway.
const minSecretLen = 4

// scrubber removes known secrets (the database and SASL passwords) from text
// the CLI prints: the error line and every log record. It is the last line of
// defence; the engine and pgx already avoid printing passwords.
type scrubber struct {
	secrets []string
}

// add registers a secret, also in its URL-escaped forms.
func (s *scrubber) add(secret string) {
	if len(secret) < minSecretLen {
		return
	}
	for _, v := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
		s.secrets = append(s.secrets, v)
	}
}

// addURL registers the password of a URL or key=value connection string
// that pgconn may not have parsed.
func (s *scrubber) addURL(conn string) {
	if u, err := url.Parse(conn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			s.add(pw)
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(conn, -1) {
		s.add(strings.Trim(m[2], "'"))
	}
}

// String returns in without any registered secret.
func (s *scrubber) String(in string) string {
	for _, v := range s.secrets {
		in = strings.ReplaceAll(in, v, redacted)
	}
	return in
}

var kvPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]+)`)

// redactURL returns a connection string, URL or key=value form, with its
// password replaced, for logs.
func redactURL(conn string) string {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return "(unparsable database URL)"
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", redacted)
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return kvPassword.ReplaceAllString(conn, "${1}"+redacted)
}
