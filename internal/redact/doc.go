// Package redact removes secrets from database connection strings before
// they reach a log line, an error or a status page.
//
// A parameter is secret when its name contains "password", "secret" or
// "token" (case-insensitive): password, sslpassword, and provider-specific
// ones such as an IAM token. Both connection string forms are covered: the
// URL form (postgres://user:pw@host/db?sslpassword=…) and the keyword/value
// form (host=h password='a b').
package redact
