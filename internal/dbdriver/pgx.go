package dbdriver

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Beginner starts a pgx transaction; *pgxpool.Pool, *pgxpool.Conn and
// *pgx.Conn satisfy it (pgx.Tx too, where its Begin makes a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// PgxDB returns the DB of a pgx handle. On a *pgxpool.Pool, *pgxpool.Conn or
// *pgx.Conn a transaction begins with its first one-row query, in one round
// trip; Autocommit is nil unless db also runs statements (Exec, Query,
// QueryRow), as those three do.
func PgxDB(db Beginner) DB { return pgxDB{db} }

// PgxTx returns the Tx of the caller's pgx transaction, or nil for a nil
// one.
func PgxTx(tx pgx.Tx) Tx {
	if tx == nil {
		return nil
	}
	return pgxTx{tx}
}

// PgxOf returns the pgx transaction behind tx, a Tx of PgxDB or PgxTx,
// beginning it if no statement has.
func PgxOf(ctx context.Context, tx Tx) (pgx.Tx, error) {
	if t, ok := tx.(*pgxLateTx); ok {
		return t.pgx(ctx)
	}
	return tx.(pgxTx).tx, nil
}

// pgxDB is a DB on pgx.
type pgxDB struct{ db Beginner }

func (d pgxDB) Begin(ctx context.Context) (Tx, error) {
	switch db := d.db.(type) {
	case *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn:
		return &pgxLateTx{db: db.(batchBeginner)}, nil
	}
	tx, err := d.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return pgxTx{tx}, nil
}

// pgxRunner is what *pgxpool.Pool and *pgx.Conn offer beyond Begin.
type pgxRunner interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (d pgxDB) Autocommit() Querier {
	if _, ok := d.db.(pgx.Tx); ok {
		return nil // its statements are the caller's transaction's
	}
	if r, ok := d.db.(pgxRunner); ok {
		return pgxQuerier{r}
	}
	return nil
}

// pgxQuerier runs statements on a pool, a connection or a transaction.
type pgxQuerier struct{ r pgxRunner }

func (q pgxQuerier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.r.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q pgxQuerier) Query(ctx context.Context, sql string, args ...any) (Rows, error) {
	return q.r.Query(ctx, sql, args...)
}

func (q pgxQuerier) QueryRow(ctx context.Context, sql string, args ...any) Row {
	return q.r.QueryRow(ctx, sql, args...)
}

// pgxTx is a pgx transaction (or savepoint).
type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	return pgxQuerier{t.tx}.Exec(ctx, sql, args...)
}

func (t pgxTx) Query(ctx context.Context, sql string, args ...any) (Rows, error) {
	return t.tx.Query(ctx, sql, args...)
}

func (t pgxTx) QueryRow(ctx context.Context, sql string, args ...any) Row {
	return t.tx.QueryRow(ctx, sql, args...)
}

func (t pgxTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows [][]any) (int64, error) {
	return t.tx.CopyFrom(ctx, table, columns, pgx.CopyFromRows(rows))
}

func (t pgxTx) Savepoint(ctx context.Context) (Tx, error) {
	sp, err := t.tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return pgxTx{sp}, nil
}

func (t pgxTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// batchBeginner is what *pgxpool.Pool, *pgxpool.Conn and *pgx.Conn offer:
// Begin, and SendBatch, which can begin a transaction in a batch
// (pgx.Batch.BeginTx).
type batchBeginner interface {
	Beginner
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pgxLateTx is a pgx transaction that begins with its first statement: when
// that is a one-row query (the inbox's claim, on every path), BEGIN and the
// query travel in one batch, one round trip instead of two. Any other first
// statement, or a savepoint, begins the transaction on its own first.
type pgxLateTx struct {
	db batchBeginner
	tx pgx.Tx // nil until begun
}

// pgx returns the transaction, beginning it if no statement has.
func (t *pgxLateTx) pgx(ctx context.Context) (pgx.Tx, error) {
	if t.tx == nil {
		tx, err := t.db.Begin(ctx)
		if err != nil {
			return nil, err
		}
		t.tx = tx
	}
	return t.tx, nil
}

// begun returns the transaction as a pgxTx, beginning it if no statement
// has.
func (t *pgxLateTx) begun(ctx context.Context) (pgxTx, error) {
	tx, err := t.pgx(ctx)
	return pgxTx{tx}, err
}

// send begins the transaction with sql as its first statement. The batch
// must be closed (batchRow) before the transaction is used again.
func (t *pgxLateTx) send(ctx context.Context, sql string, args []any) batchRow {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(sql, args...)
	br := t.db.SendBatch(ctx, b)
	t.tx = br.Tx()
	return batchRow{br}
}

func (t *pgxLateTx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return 0, err
	}
	return tx.Exec(ctx, sql, args...)
}

func (t *pgxLateTx) Query(ctx context.Context, sql string, args ...any) (Rows, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Query(ctx, sql, args...)
}

func (t *pgxLateTx) QueryRow(ctx context.Context, sql string, args ...any) Row {
	if t.tx == nil {
		return t.send(ctx, sql, args)
	}
	return t.tx.QueryRow(ctx, sql, args...)
}

func (t *pgxLateTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows [][]any) (int64, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, rows)
}

func (t *pgxLateTx) Savepoint(ctx context.Context) (Tx, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Savepoint(ctx)
}

// Commit and Rollback of a transaction that never began have nothing to
// end.
func (t *pgxLateTx) Commit(ctx context.Context) error {
	if t.tx == nil {
		return nil
	}
	return t.tx.Commit(ctx)
}

func (t *pgxLateTx) Rollback(ctx context.Context) error {
	if t.tx == nil {
		return nil
	}
	return t.tx.Rollback(ctx)
}

// batchRow is the one-row result of the first statement of a pgxLateTx.
type batchRow struct{ br pgx.BatchResults }

// Scan reads the result of BEGIN, then the row, and closes the batch. A
// failed BEGIN leaves the transaction closed (see pgx.BatchResults.Tx), so
// that a rollback does not touch the connection.
func (r batchRow) Scan(dest ...any) error {
	_, err := r.br.Exec()
	if err == nil {
		err = r.br.QueryRow().Scan(dest...)
	}
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}
