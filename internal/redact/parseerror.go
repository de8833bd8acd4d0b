package redact

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnparsable is wrapped by ParseError's errors.
var ErrUnparsable = errors.New("cannot parse the connection string")

// connWord splits a connection string into the words its reader might
// quote back: runs of bytes between separators of either form.
var connWord = regexp.MustCompile("[^\\s=&?/:@'\"\\\\,`]+")

// quoted is a double-quoted or back-quoted part of a parser's message
// (pgconn quotes the whole string in back quotes).
var quoted = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`")

// connKeywords are the words of a connection string that are never
// secret and that parse errors name: keeping them keeps the reason
// readable.
var connKeywords = map[string]bool{
	"postgres": true, "postgresql": true, "host": true, "hostaddr": true, "port": true, "user": true, "dbname": true,
	"password": true, "sslmode": true, "sslpassword": true, "sslrootcert": true, "sslcert": true, "sslkey": true,
	"connect_timeout": true, "target_session_attrs": true, "application_name": true, "options": true,
}

// ParseError is err, the error of parsing the connection string conn
// (pgconn.ParseConfig), without any part of conn: pgconn redacts the
// password as far as it could parse it, but a malformed string
// (password='Sec ret1 …, unterminated) leaves part of the secret in the
// string it quotes and in its reason (missing "=" after "ret1"). The
// result keeps the reason with every quoted part and every word of conn
// that is not a connection keyword replaced by "…", and says which form
// was tried.
func ParseError(conn string, err error) error {
	if err == nil {
		return nil
	}
	inner := err
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		if u := pce.Unwrap(); u != nil {
			inner = u
		}
	}
	reason := quoted.ReplaceAllStringFunc(inner.Error(), func(q string) string {
		switch {
		case q == `"="`:
			return q
		case q[0] == '`':
			return "`…`"
		}
		return `"…"`
	})
	words := map[string]bool{}
	for _, w := range connWord.FindAllString(conn, -1) {
		if !connKeywords[strings.ToLower(w)] {
			words[w] = true
		}
	}
	reason = connWord.ReplaceAllStringFunc(reason, func(w string) string {
		if words[w] {
			return "…"
		}
		return w
	})
	form := "keyword/value pairs (host=H dbname=D; quote a value holding spaces: password='a b')"
	if isURL(conn) {
		form = "a URL (postgres://USER:PASSWORD@HOST:PORT/DB; percent-encode special characters: a space is %20)"
	}
	return fmt.Errorf("%w as %s: %s (the string is not shown: it may hold a password)", ErrUnparsable, form, reason)
}
