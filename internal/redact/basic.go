package redact

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
)

// basicCredential is what may be an HTTP Basic credential: the scheme and
// a base64 token, as an Authorization header, or a server or proxy echoing
// one in an error, shows it.
var basicCredential = regexp.MustCompile(`(?i)\b(basic)(\s+|%20|\+)([A-Za-z0-9+/_-]{4,}={0,2})`)

// BasicCredentials returns s with the base64 of every Basic credential it
// holds (a token that decodes to "user:password", RFC 7617) replaced by
// Placeholder: base64 is an encoding, not a secret's protection.
func BasicCredentials(s string) string {
	if !strings.Contains(strings.ToLower(s), "basic") {
		return s
	}
	return basicCredential.ReplaceAllStringFunc(s, func(m string) string {
		parts := basicCredential.FindStringSubmatch(m)
		if !isCredential(parts[3]) {
			return m
		}
		return parts[1] + parts[2] + Placeholder
	})
}

// isCredential reports whether token is the base64 (standard or URL
// alphabet, padded or not) of "user:password".
func isCredential(token string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		b, err := enc.DecodeString(token)
		if err != nil {
			b, err = enc.WithPadding(base64.NoPadding).DecodeString(strings.TrimRight(token, "="))
		}
		if err == nil && bytes.IndexByte(b, ':') >= 0 {
			return true
		}
	}
	return false
}
