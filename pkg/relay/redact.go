package relay

import "github.com/pgoutbox/pgoutbox/internal/redact"

// RedactURL returns the database URL or keyword/value connection string s
// with every secret replaced by "xxxxx", for logs and error messages: the
// password, sslpassword, and any parameter whose name contains "password",
// "secret" or "token", in both forms. A URL that does not parse is replaced
// whole, since it may still hold a secret.
func RedactURL(s string) string { return redact.URL(s) }
