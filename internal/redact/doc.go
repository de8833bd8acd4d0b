// Package redact removes secrets from database connection strings before
// they reach a log line, an error or a status page.
//
// A parameter is secret when its name contains "password", "secret" or
// "token" (case-insensitive): password, sslpassword, and provider-specific
// ones such as an IAM token. Both connection string forms are covered, told
// apart as pgconn does, by the "postgres://" or "postgresql://" prefix: the
// URL form (postgres://user:pw@host/db?sslpassword=…) and the keyword/value
// form (host=h password='a b'), which is read with libpq's quoting and
// escaping rules. The rest (host, port, dbname, user, sslmode…) stays
// readable; a string that does not parse is replaced whole, never echoed.
package redact
