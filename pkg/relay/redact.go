package relay

import (
	"net/url"
	"regexp"
	"strings"
)

// redactedPassword replaces a password in RedactURL's output.
const redactedPassword = "xxxxx"

// keywordPassword matches password=... in a keyword/value connection string,
// quoted (with doubled or backslash-escaped quotes) or not.
var keywordPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.|'')*'|[^\s]*)`)

// RedactURL returns the database URL or keyword/value connection string s
// with its password replaced by "xxxxx", for logs and error messages. A URL
// that does not parse is replaced whole, since it may still hold a password.
func RedactURL(s string) string {
	if !strings.Contains(s, "://") {
		return keywordPassword.ReplaceAllString(s, "${1}"+redactedPassword)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable database URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redactedPassword)
		}
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", redactedPassword)
		u.RawQuery = q.Encode()
	}
	return u.String()
}
