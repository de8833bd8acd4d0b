// Package sql holds the canonical DDL of pgoutbox as numbered migration files,
// embedded so the Go code (outbox.Migrate, inbox.Migrate, the CLIs) and a DBA
// running `psql -f` apply exactly the same statements.
//
// # Layout
//
// Each component has its own folder of migrations named NNN_description.up.sql,
// applied in numeric order:
//
//	sql/outbox/001_create_outbox.up.sql
//
// Every statement is idempotent (IF NOT EXISTS), so a file applied by hand and
// later again by the Go API does no harm. The files name the default table
// (public.outbox); the Go API substitutes a configured table name.
package sql
