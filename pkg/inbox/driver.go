package inbox

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
)

// Driver is the database of an Inbox and the family of its transactions:
// TTx is the transaction type the handlers get and ProcessTx takes. Pgx
// builds one on pgx (TTx pgx.Tx), SQL one on database/sql (TTx *sql.Tx);
// pass it to New. The claim, the state machine, the leases, the batch path
// and every guarantee are the same code on both; the driver only runs the
// statements.
//
// The drivers live in this package rather than in driver packages of their
// own (as river's riverpgxv5 and riverdatabasesql do): the inbox needs pgx
// either way (SQLSTATE classification through *pgconn.PgError, Migrate, the
// stdlib driver under database/sql), so separate packages would spare no
// dependency, and they would make the statement interface a driver
// implements a public contract. A Driver is opaque.
type Driver[TTx any] struct {
	db database
	// admin runs single statements outside a transaction (RefreshMetrics
	// and the consumer loop's retention); nil when the handle only begins
	// transactions.
	admin dbQuerier
	// err is why the handle was refused; New returns it.
	err error
	// unwrap returns the driver's transaction behind one of the inbox's,
	// for the handler.
	unwrap func(ctx context.Context, tx dbTx) (TTx, error)
	// adopt wraps the caller's transaction (ProcessTx); it refuses a nil
	// one.
	adopt func(tx TTx) (dbTx, error)
}

// Pgx returns the driver of an Inbox on pgx: db is a *pgxpool.Pool (or a
// *pgx.Conn, or any Beginner), and the handlers get a pgx.Tx. On a
// *pgxpool.Pool, *pgxpool.Conn or *pgx.Conn the claim travels with BEGIN in
// one round trip. A pgx.Tx is refused (New returns ErrTxNotAllowed): use
// ProcessTx inside a transaction.
func Pgx(db Beginner) *Driver[pgx.Tx] {
	d := &Driver[pgx.Tx]{unwrap: pgxOf, adopt: adoptPgx}
	if d.err = checkDB(db); d.err != nil {
		return d
	}
	d.db = pgxDB{db}
	if q, ok := db.(Querier); ok {
		d.admin = pgxQuerier{q}
	}
	return d
}

// SQL returns the driver of an Inbox on database/sql: db is a *sql.DB (or a
// *sql.Conn, or the *sql.DB under sqlx, GORM, bun or ent) of pgx's stdlib
// driver, and the handlers get a *sql.Tx (see SQLBeginner).
func SQL(db SQLBeginner) *Driver[*sql.Tx] {
	d := &Driver[*sql.Tx]{unwrap: sqlOf, adopt: adoptSQL}
	if db == nil {
		d.err = errNilDB
		return d
	}
	d.db = sqlDB{db}
	if q, ok := db.(sqlRunner); ok {
		d.admin = sqlQuerier{q}
	}
	return d
}

func adoptPgx(tx pgx.Tx) (dbTx, error) {
	if tx == nil {
		return nil, errNilTx
	}
	return pgxTx{tx}, nil
}

func adoptSQL(tx *sql.Tx) (dbTx, error) {
	if tx == nil {
		return nil, errNilTx
	}
	return &sqlTx{tx: tx}, nil
}

// sqlOf returns the *sql.Tx behind tx.
func sqlOf(_ context.Context, tx dbTx) (*sql.Tx, error) { return tx.(*sqlTx).tx, nil }
