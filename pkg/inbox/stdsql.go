package inbox

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// SQLBeginner is the handle SQL takes: it starts database/sql transactions.
// *sql.DB and *sql.Conn satisfy it, and so do the handles of libraries built
// on database/sql (sqlx's *sqlx.DB, the *sql.DB of GORM's db.DB() or of bun
// and ent). A *sql.Tx does not: like a pgx.Tx for Beginner, it could not hold
// the inbox's own transactions. Use ProcessTx to work inside one.
//
// Use pgx's stdlib driver (github.com/jackc/pgx/v5/stdlib): the consumer
// loop's batch path passes Go slices as Postgres arrays, which lib/pq does
// not do.
type SQLBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// sqlDB is a database on database/sql.
type sqlDB struct{ db SQLBeginner }

func (d sqlDB) begin(ctx context.Context) (dbTx, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &sqlTx{tx: tx}, nil
}

// sqlAutoRunner is what *sql.DB and *sql.Conn offer beyond BeginTx.
type sqlAutoRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (d sqlDB) autocommit() stmtRunner {
	if r, ok := d.db.(sqlAutoRunner); ok {
		return sqlAuto{r}
	}
	return nil
}

// sqlAuto runs statements on a *sql.DB or *sql.Conn, outside a transaction.
type sqlAuto struct{ r sqlAutoRunner }

func (a sqlAuto) exec(ctx context.Context, query string, args ...any) (int64, error) {
	return sqlExec(ctx, a.r, query, args)
}

func (a sqlAuto) queryRow(ctx context.Context, query string, args ...any) dbRow {
	return sqlRow{a.r.QueryRowContext(ctx, query, args...)}
}

// sqlRunner is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// sqlQuerier runs statements outside a transaction (the metrics and the
// consumer loop's purge).
type sqlQuerier struct{ db sqlRunner }

func (q sqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	return sqlExec(ctx, q.db, query, args)
}

func (q sqlQuerier) query(ctx context.Context, query string, args ...any) (dbRows, error) {
	return sqlQuery(ctx, q.db, query, args)
}

// sqlTx is a database/sql transaction or, when depth > 0, a savepoint in
// one (database/sql has no nested transactions: the savepoints are
// statements).
type sqlTx struct {
	tx     *sql.Tx
	depth  int
	closed bool
}

func (t *sqlTx) exec(ctx context.Context, query string, args ...any) (int64, error) {
	return sqlExec(ctx, t.tx, query, args)
}

func (t *sqlTx) query(ctx context.Context, query string, args ...any) (dbRows, error) {
	return sqlQuery(ctx, t.tx, query, args)
}

func (t *sqlTx) queryRow(ctx context.Context, query string, args ...any) dbRow {
	return sqlRow{t.tx.QueryRowContext(ctx, query, args...)}
}

func (t *sqlTx) name() string { return "pgoutbox_inbox_" + strconv.Itoa(t.depth) }

func (t *sqlTx) savepoint(ctx context.Context) (dbTx, error) {
	sp := &sqlTx{tx: t.tx, depth: t.depth + 1}
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT "+sp.name()); err != nil {
		return nil, err
	}
	return sp, nil
}

func (t *sqlTx) commit(ctx context.Context) error {
	return t.end(ctx, t.tx.Commit, "RELEASE SAVEPOINT ")
}

func (t *sqlTx) rollback(ctx context.Context) error {
	return t.end(ctx, t.tx.Rollback, "ROLLBACK TO SAVEPOINT ")
}

// end ends the transaction with top, or the savepoint with the statement
// verb, once: a second end of a savepoint is sql.ErrTxDone, as it is for a
// *sql.Tx.
func (t *sqlTx) end(ctx context.Context, top func() error, verb string) error {
	if t.depth == 0 {
		return top()
	}
	if t.closed {
		return sql.ErrTxDone
	}
	t.closed = true
	_, err := t.tx.ExecContext(ctx, verb+t.name())
	return err
}

func sqlExec(ctx context.Context, db interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}, query string, args []any) (int64, error) {
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func sqlQuery(ctx context.Context, db sqlRunner, query string, args []any) (dbRows, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// sqlRows adapts *sql.Rows (its Close returns an error, kept by Err).
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// sqlRow maps sql.ErrNoRows to pgx.ErrNoRows, which the inbox checks for.
type sqlRow struct{ row *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return pgx.ErrNoRows
	}
	return err
}
