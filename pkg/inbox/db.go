package inbox

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/internal/pgtx"
)

// Beginner starts a transaction; *pgx.Conn and *pgxpool.Pool satisfy it. It
// is the same interface as outbox.Beginner. A pgx.Tx satisfies it too but is
// refused with ErrTxNotAllowed: its Begin makes a savepoint that nobody else
// sees, so the two-phase claim, the attempt records that must survive a
// rollback and the leases would all be lost with the caller's transaction.
// Use ProcessTx to work inside one. Pgx takes a Beginner; applications on
// database/sql pass a SQLBeginner to SQL instead.
type Beginner = pgtx.Beginner

// ErrTxNotAllowed is returned by New when the driver's handle is a pgx.Tx
// (Pgx(tx)): the inbox needs to begin transactions of its own.
var ErrTxNotAllowed = errors.New("inbox: a pgx.Tx cannot serve as the Beginner (pass a *pgxpool.Pool or *pgx.Conn; use ProcessTx inside a transaction)")

// Nil arguments of New and the Process methods, refused before anything is
// done (they would panic mid-delivery).
var (
	errNilDB      = errors.New("inbox: db is nil")
	errNilTx      = errors.New("inbox: tx is nil")
	errNilHandler = errors.New("inbox: handler is nil")
)

// checkDB refuses a pgx.Tx as db.
func checkDB(db Beginner) error {
	if _, ok := db.(pgx.Tx); ok {
		return ErrTxNotAllowed
	}
	if db == nil {
		return errNilDB
	}
	return nil
}

// The inbox runs its statements through the small interfaces below, so that
// one implementation of the claim, the state machine and the leases serves
// both pgx (pgxDB, pgxTx: the statements go straight to pgx) and
// database/sql (sqlDB, sqlTx in stdsql.go). Only the handler sees the
// driver's own transaction type (Driver.unwrap).

// dbRow is one row of a query that returns at most one; Scan returns
// pgx.ErrNoRows when there is none, whatever the driver.
type dbRow interface {
	Scan(dest ...any) error
}

// dbRows is the result of a query; Close must be called.
type dbRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// dbQuerier runs statements, in a transaction or not: the driver-neutral
// form of Querier, through which every statement of the package goes
// (pgxQuerier adapts a Querier, sqlQuerier a *sql.DB or *sql.Conn; every
// dbTx is one).
type dbQuerier interface {
	exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error)
	query(ctx context.Context, sql string, args ...any) (dbRows, error)
}

// stmtRunner runs single statements: in a transaction, or each in its own
// (autocommit).
type stmtRunner interface {
	exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error)
	queryRow(ctx context.Context, sql string, args ...any) dbRow
}

// dbTx is a transaction, or a savepoint in one.
type dbTx interface {
	dbQuerier
	queryRow(ctx context.Context, sql string, args ...any) dbRow
	// savepoint starts a nested transaction (a SAVEPOINT).
	savepoint(ctx context.Context) (dbTx, error)
	commit(ctx context.Context) error
	// rollback after a commit or a rollback is a no-op that may return
	// an error.
	rollback(ctx context.Context) error
}

// database begins the inbox's own transactions.
type database interface {
	begin(ctx context.Context) (dbTx, error)
	// autocommit returns a runner whose statements each commit on their
	// own, or nil when the database cannot run statements outside a
	// transaction.
	autocommit() stmtRunner
}

// pgxDB is a database on pgx.
type pgxDB struct{ db Beginner }

func (d pgxDB) begin(ctx context.Context) (dbTx, error) {
	switch d.db.(type) {
	case *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn:
		return &pgxLateTx{db: d.db.(batchBeginner)}, nil
	}
	tx, err := d.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return pgxTx{tx}, nil
}

// batchBeginner is what *pgxpool.Pool, *pgxpool.Conn and *pgx.Conn offer:
// Begin, and SendBatch, which can begin a transaction in a batch
// (pgx.Batch.BeginTx).
type batchBeginner interface {
	Beginner
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pgxLateTx is a pgx transaction that begins with its first statement: when
// that is a one-row query (the claim, on every path), BEGIN and the query
// travel in one batch, one round trip instead of two. Any other first
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

func (t *pgxLateTx) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tx, err := t.pgx(ctx)
	if err != nil {
		return 0, err
	}
	return pgxTx{tx}.exec(ctx, sql, args...)
}

func (t *pgxLateTx) query(ctx context.Context, sql string, args ...any) (dbRows, error) {
	tx, err := t.pgx(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Query(ctx, sql, args...)
}

func (t *pgxLateTx) queryRow(ctx context.Context, sql string, args ...any) dbRow {
	if t.tx == nil {
		return t.send(ctx, sql, args)
	}
	return t.tx.QueryRow(ctx, sql, args...)
}

func (t *pgxLateTx) savepoint(ctx context.Context) (dbTx, error) {
	tx, err := t.pgx(ctx)
	if err != nil {
		return nil, err
	}
	return pgxTx{tx}.savepoint(ctx)
}

// commit and rollback of a transaction that never began have nothing to
// end.
func (t *pgxLateTx) commit(ctx context.Context) error {
	if t.tx == nil {
		return nil
	}
	return t.tx.Commit(ctx)
}

func (t *pgxLateTx) rollback(ctx context.Context) error {
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

// pgxRunner is what *pgxpool.Pool and *pgx.Conn offer beyond Begin.
type pgxRunner interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (d pgxDB) autocommit() stmtRunner {
	if r, ok := d.db.(pgxRunner); ok {
		return pgxAuto{r}
	}
	return nil
}

// pgxAuto runs statements on a pool or connection, outside a transaction.
type pgxAuto struct{ r pgxRunner }

func (a pgxAuto) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := a.r.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (a pgxAuto) queryRow(ctx context.Context, sql string, args ...any) dbRow {
	return a.r.QueryRow(ctx, sql, args...)
}

// pgxTx is a pgx transaction (or savepoint).
type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (t pgxTx) query(ctx context.Context, sql string, args ...any) (dbRows, error) {
	return t.tx.Query(ctx, sql, args...)
}

func (t pgxTx) queryRow(ctx context.Context, sql string, args ...any) dbRow {
	return t.tx.QueryRow(ctx, sql, args...)
}

func (t pgxTx) savepoint(ctx context.Context) (dbTx, error) {
	sp, err := t.tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return pgxTx{sp}, nil
}

func (t pgxTx) commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxTx) rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// pgxQuerier runs statements on a Querier.
type pgxQuerier struct{ q Querier }

func (q pgxQuerier) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.q.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q pgxQuerier) query(ctx context.Context, sql string, args ...any) (dbRows, error) {
	return q.q.Query(ctx, sql, args...)
}

// beginFunc runs fn in a transaction of db and commits it, or rolls it back
// when fn fails.
func beginFunc(ctx context.Context, db database, fn func(tx dbTx) error) error {
	tx, err := db.begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.commit(ctx)
}

// collect reads every row of rows with scan.
func collect[T any](rows dbRows, err error, scan func(r dbRows) (T, error)) ([]T, error) {
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

// runStatement runs fn, which issues exactly one statement, in autocommit
// mode when db allows it (one round trip instead of BEGIN, the statement
// and COMMIT; a single statement is atomic either way), else in a
// transaction of its own.
func runStatement(ctx context.Context, db database, fn func(q stmtRunner) error) error {
	if q := db.autocommit(); q != nil {
		return fn(q)
	}
	return beginFunc(ctx, db, func(tx dbTx) error { return fn(tx) })
}

// execOne runs one statement on its own (see runStatement) and returns the
// rows it affected.
func execOne(ctx context.Context, db database, sql string, args ...any) (int64, error) {
	var n int64
	err := runStatement(ctx, db, func(q stmtRunner) error {
		var err error
		n, err = q.exec(ctx, sql, args...)
		return err
	})
	return n, err
}

// pgxOf returns the pgx transaction behind tx, a pgxTx or a pgxLateTx.
func pgxOf(ctx context.Context, tx dbTx) (pgx.Tx, error) {
	if t, ok := tx.(*pgxLateTx); ok {
		return t.pgx(ctx)
	}
	return tx.(pgxTx).tx, nil
}
