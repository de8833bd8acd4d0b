// Command inbox administers the pgoutbox inbox table: migrate, status,
// purge, list, revive, and tail (consume topics through the inbox and print
// each outcome). Run "inbox --help" for the commands; every flag has an
// INBOX_* environment variable.
package main
