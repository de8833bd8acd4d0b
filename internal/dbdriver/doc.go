// Package dbdriver runs pgoutbox's statements on either Postgres driver a
// Go application may hold: pgx (a *pgxpool.Pool, *pgx.Conn or pgx.Tx) or
// database/sql (a *sql.DB, *sql.Conn or *sql.Tx, normally of pgx's stdlib
// driver). The outbox writer, the inbox, the inbox's Store and the
// migrations are written once against the small interfaces of this package
// (DB begins transactions, Tx runs statements in one, Querier runs them on
// their own); PgxDB, PgxTx, SQLDB and SQLTx adapt the drivers' handles. The
// public packages wrap these in their own opaque Driver values (outbox.Pgx,
// outbox.SQL, inbox.Pgx, inbox.SQL), so the statement interface is not a
// public contract.
//
// What differs between the drivers stays here: pgx sends COPY and begins a
// transaction together with its first query (one round trip), database/sql
// has no COPY (CopyFrom sends multi-row INSERTs) and no nested
// transactions (savepoints are statements), and its "no rows" error is
// mapped to pgx.ErrNoRows, which callers check for.
package dbdriver
