package dbdriver

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SQLBeginner starts database/sql transactions; *sql.DB and *sql.Conn
// satisfy it, and so do the handles of libraries built on database/sql
// (sqlx's *sqlx.DB, the *sql.DB of GORM's db.DB() or of bun and ent).
type SQLBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// SQLDB returns the DB of a database/sql handle; Autocommit is nil unless
// db also runs statements (ExecContext, QueryContext, QueryRowContext), as
// *sql.DB and *sql.Conn do.
func SQLDB(db SQLBeginner) DB { return sqlDB{db} }

// SQLTx returns the Tx of the caller's database/sql transaction, or nil for
// a nil one.
func SQLTx(tx *sql.Tx) Tx {
	if tx == nil {
		return nil
	}
	return &sqlTx{tx: tx}
}

// SQLOf returns the *sql.Tx behind tx, a Tx of SQLDB or SQLTx.
func SQLOf(_ context.Context, tx Tx) (*sql.Tx, error) { return tx.(*sqlTx).tx, nil }

// sqlDB is a DB on database/sql.
type sqlDB struct{ db SQLBeginner }

func (d sqlDB) Begin(ctx context.Context) (Tx, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &sqlTx{tx: tx}, nil
}

// sqlRunner is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (d sqlDB) Autocommit() Querier {
	if r, ok := d.db.(sqlRunner); ok {
		return sqlQuerier{r}
	}
	return nil
}

// sqlQuerier runs statements on a *sql.DB, *sql.Conn or *sql.Tx.
type sqlQuerier struct{ r sqlRunner }

func (q sqlQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.r.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := q.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (q sqlQuerier) QueryRow(ctx context.Context, query string, args ...any) Row {
	return sqlRow{q.r.QueryRowContext(ctx, query, args...)}
}

// sqlTx is a database/sql transaction or, when depth > 0, a savepoint in
// one (database/sql has no nested transactions: the savepoints are
// statements).
type sqlTx struct {
	tx     *sql.Tx
	depth  int
	closed bool
}

func (t *sqlTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return sqlQuerier{t.tx}.Exec(ctx, query, args...)
}

func (t *sqlTx) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	return sqlQuerier{t.tx}.Query(ctx, query, args...)
}

func (t *sqlTx) QueryRow(ctx context.Context, query string, args ...any) Row {
	return sqlQuerier{t.tx}.QueryRow(ctx, query, args...)
}

// maxParams is Postgres' limit on the parameters of one statement.
const maxParams = 65535

// CopyFrom sends multi-row INSERTs (database/sql has no COPY), each under
// maxParams parameters.
func (t *sqlTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows [][]any) (int64, error) {
	width := len(columns)
	per := max(maxParams/max(width, 1), 1)
	head := `INSERT INTO ` + table.Sanitize() + ` (` + quoted(columns) + `) VALUES `
	var total int64
	for start := 0; start < len(rows); start += per {
		chunk := rows[start:min(start+per, len(rows))]
		var b strings.Builder
		b.WriteString(head)
		args := make([]any, 0, len(chunk)*width)
		for r, row := range chunk {
			if r > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for c := range width {
				if c > 0 {
					b.WriteString(", ")
				}
				b.WriteString("$" + strconv.Itoa(r*width+c+1))
			}
			b.WriteByte(')')
			args = append(args, row...)
		}
		n, err := t.Exec(ctx, b.String(), args...)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// quoted joins the quoted column names.
func quoted(columns []string) string {
	q := make([]string, len(columns))
	for i, c := range columns {
		q[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(q, ", ")
}

func (t *sqlTx) name() string { return "pgoutbox_sp_" + strconv.Itoa(t.depth) }

func (t *sqlTx) Savepoint(ctx context.Context) (Tx, error) {
	sp := &sqlTx{tx: t.tx, depth: t.depth + 1}
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT "+sp.name()); err != nil {
		return nil, err
	}
	return sp, nil
}

func (t *sqlTx) Commit(ctx context.Context) error {
	return t.end(ctx, t.tx.Commit, "RELEASE SAVEPOINT ")
}

func (t *sqlTx) Rollback(ctx context.Context) error {
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

// sqlRows adapts *sql.Rows (its Close returns an error, kept by Err).
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// sqlRow maps sql.ErrNoRows to pgx.ErrNoRows, which callers check for.
type sqlRow struct{ row *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return pgx.ErrNoRows
	}
	return err
}
