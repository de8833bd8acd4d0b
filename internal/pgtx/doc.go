// Package pgtx holds the one interface through which pgoutbox's packages
// start transactions on pgx: outbox.Beginner, inbox.Beginner and the
// migrations all take a Beginner, so a *pgxpool.Pool or *pgx.Conn passes
// everywhere.
package pgtx
