// Package migrate applies the numbered, embedded SQL files of package sql.
// Each component (outbox, inbox) calls Apply with its folder and the table it
// targets; applied versions are recorded in public.pgoutbox_migration so that a
// second call is a no-op, and a transaction-scoped advisory lock serialises
// concurrent callers.
package migrate
