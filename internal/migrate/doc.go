// Package migrate applies the numbered SQL files of the sql/ folder, embedded
// as pgoutbox.Migrations.
// Each component (outbox, inbox) calls Table with its folder and the table it
// targets; applied versions are recorded in pgoutbox_migration in the
// target table's schema (created on first use; versions recorded by earlier
// releases in public.pgoutbox_migration are carried over), so that a second
// call is a no-op. Versions apply in numeric order and the numbering may
// have gaps. A transaction-scoped advisory lock serialises concurrent
// callers.
package migrate
