// Package inboxcli is the command inbox: Run takes the arguments and the
// output writers, so tests drive the CLI exactly as a user does. Commands:
// migrate, status, purge, list, revive, tail. Every flag can be set with an
// INBOX_* environment variable.
package inboxcli
