package dbdriver

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Row is one row of a query that returns at most one; Scan returns
// pgx.ErrNoRows when there is none, whatever the driver.
type Row interface {
	Scan(dest ...any) error
}

// Rows is the result of a query; Close must be called.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier runs statements: in a transaction (every Tx is one), or each on
// its own (DB.Autocommit).
type Querier interface {
	// Exec runs sql and returns the rows it affected.
	Exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error)
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// Tx is a transaction, or a savepoint in one.
type Tx interface {
	Querier
	// CopyFrom writes rows (values in columns order) into table and
	// returns how many it wrote: COPY on pgx, multi-row INSERTs on
	// database/sql. The values must encode alike on every driver (see
	// package doc of the caller).
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows [][]any) (int64, error)
	// Savepoint starts a nested transaction (a SAVEPOINT).
	Savepoint(ctx context.Context) (Tx, error)
	Commit(ctx context.Context) error
	// Rollback after a commit or a rollback is a no-op that may return
	// an error.
	Rollback(ctx context.Context) error
}

// DB begins transactions of its own.
type DB interface {
	Begin(ctx context.Context) (Tx, error)
	// Autocommit returns a Querier whose statements each commit on their
	// own, or nil when the handle cannot run statements outside a
	// transaction (a bare Beginner).
	Autocommit() Querier
}

// BeginFunc runs fn in a transaction of db and commits it, or rolls it back
// when fn fails.
func BeginFunc(ctx context.Context, db DB, fn func(tx Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// RunStatement runs fn, which issues exactly one statement, in autocommit
// mode when db allows it (one round trip instead of BEGIN, the statement
// and COMMIT; a single statement is atomic either way), else in a
// transaction of its own.
func RunStatement(ctx context.Context, db DB, fn func(q Querier) error) error {
	if q := db.Autocommit(); q != nil {
		return fn(q)
	}
	return BeginFunc(ctx, db, func(tx Tx) error { return fn(tx) })
}

// ExecOne runs one statement on its own (see RunStatement) and returns the
// rows it affected.
func ExecOne(ctx context.Context, db DB, sql string, args ...any) (int64, error) {
	var n int64
	err := RunStatement(ctx, db, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, sql, args...)
		return err
	})
	return n, err
}

// Collect reads every row of rows with scan; err is the error of the query
// that returned rows.
func Collect[T any](rows Rows, err error, scan func(r Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
