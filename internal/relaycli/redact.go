package relaycli

import (
	"net/url"
	"strings"
	"sync"

	"github.com/pgoutbox/pgoutbox/internal/redact"
)

// redacted replaces a password wherever the CLI prints text.
const redacted = redact.Placeholder

// minSecretLen is the shortest password scrubbed from free text: replacing
// every "a" of an error for a one-letter password would make it unreadable,
// and such a password protects nothing anyway.
const minSecretLen = 4

// scrubber removes known secrets (the database and SASL passwords) from text
// the CLI prints: the error line and every log record. It is the last line of
// defence; the engine (internal/redact) and pgx already avoid printing
// passwords.
type scrubber struct {
	// mu guards secrets: relay run --config learns new ones on a reload
	// while log records and /status are scrubbed.
	mu      sync.RWMutex
	secrets []string
	// exposed names the secret flags given on the command line, for
	// warnSecretFlags.
	exposed []string
}

// add registers a secret, also in its URL-escaped forms.
func (s *scrubber) add(secret string) {
	if len(secret) < minSecretLen {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets = append(s.secrets, secret, url.QueryEscape(secret), url.PathEscape(secret))
}

// addURL registers every secret of a connection string (password,
// sslpassword, tokens; URL or keyword/value form), since pgconn's errors may
// quote them.
func (s *scrubber) addURL(conn string) {
	for _, v := range redact.Secrets(conn) {
		s.add(v)
	}
}

// String returns in without any registered secret, nor the base64 of any
// Basic credential (an Authorization header a server echoed).
func (s *scrubber) String(in string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.secrets {
		in = strings.ReplaceAll(in, v, redacted)
	}
	return redact.BasicCredentials(in)
}
