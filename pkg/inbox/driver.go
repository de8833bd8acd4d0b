package inbox

import (
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// Driver is the database of an Inbox and the family of its transactions:
// TTx is the transaction type the handlers get and ProcessTx takes. Pgx
// builds one on pgx (TTx pgx.Tx), SQL one on database/sql (TTx *sql.Tx);
// pass it to New, NewStore or Migrate. The claim, the state machine, the
// leases, the batch path and every guarantee are the same code on both;
// the driver only runs the statements. Package outbox has the same two
// constructors (outbox.Pgx, outbox.SQL) over the same code.
//
// The drivers live in this package rather than in driver packages of their
// own (as river's riverpgxv5 and riverdatabasesql do): the inbox needs pgx
// either way (SQLSTATE classification through *pgconn.PgError, the stdlib
// driver under database/sql), so separate packages would spare no
// dependency, and they would make the statement interface a driver
// implements a public contract. A Driver is opaque.
type Driver[TTx any] struct {
	h dbdriver.Handle[TTx]
	// err is why the handle was refused; New, NewStore and Migrate return
	// it.
	err error
}

// Beginner starts a transaction (Begin(ctx) (pgx.Tx, error));
// *pgxpool.Pool, *pgxpool.Conn and *pgx.Conn satisfy it. It is the same interface as outbox.Beginner. A
// pgx.Tx satisfies it too but is refused with ErrTxNotAllowed: its Begin
// makes a savepoint that nobody else sees, so the two-phase claim, the
// attempt records that must survive a rollback and the leases would all be
// lost with the caller's transaction. Use ProcessTx to work inside one.
type Beginner = dbdriver.Beginner

// SQLBeginner is the handle SQL takes: it starts database/sql transactions
// (BeginTx(ctx, *sql.TxOptions) (*sql.Tx, error)). *sql.DB and *sql.Conn
// satisfy it, and so do the handles of libraries built
// on database/sql (sqlx's *sqlx.DB, the *sql.DB of GORM's db.DB() or of bun
// and ent). It is the same interface as outbox.SQLBeginner. A *sql.Tx does
// not satisfy it: like a pgx.Tx for Beginner, it could not hold the inbox's
// own transactions. Use ProcessTx to work inside one.
//
// Use pgx's stdlib driver (github.com/jackc/pgx/v5/stdlib): the consumer
// loop's batch path passes Go slices as Postgres arrays, which lib/pq does
// not do.
type SQLBeginner = dbdriver.SQLBeginner

// Pgx returns the driver of an Inbox on pgx: db is a *pgxpool.Pool (or a
// *pgx.Conn, or any Beginner), and the handlers get a pgx.Tx. On a
// *pgxpool.Pool, *pgxpool.Conn or *pgx.Conn the claim travels with BEGIN in
// one round trip. A pgx.Tx is refused (New returns ErrTxNotAllowed): use
// ProcessTx inside a transaction.
func Pgx(db Beginner) *Driver[pgx.Tx] {
	d := &Driver[pgx.Tx]{h: dbdriver.PgxHandle(db)}
	if _, ok := db.(pgx.Tx); ok {
		d.err = ErrTxNotAllowed
	} else if db == nil {
		d.err = errNilDB
	}
	return d
}

// SQL returns the driver of an Inbox on database/sql: db is a *sql.DB (or a
// *sql.Conn, or the *sql.DB under sqlx, GORM, bun or ent) of pgx's stdlib
// driver, and the handlers get a *sql.Tx (see SQLBeginner).
func SQL(db SQLBeginner) *Driver[*sql.Tx] {
	d := &Driver[*sql.Tx]{h: dbdriver.SQLHandle(db)}
	if db == nil {
		d.err = errNilDB
	}
	return d
}

// check returns why driver cannot serve, or nil.
func (d *Driver[TTx]) check() error {
	if d == nil {
		return errors.New("inbox: driver is nil")
	}
	return d.err
}

// ErrTxNotAllowed is returned by New, NewStore and Migrate when the
// driver's handle is a pgx.Tx (Pgx(tx)): the inbox needs to begin
// transactions of its own.
var ErrTxNotAllowed = errors.New("inbox: a pgx.Tx cannot serve as the Beginner (pass a *pgxpool.Pool or *pgx.Conn; use ProcessTx inside a transaction)")

// Nil arguments of New and the Process methods, refused before anything is
// done (they would panic mid-delivery).
var (
	errNilDB      = errors.New("inbox: db is nil")
	errNilTx      = errors.New("inbox: tx is nil")
	errNilHandler = errors.New("inbox: handler is nil")
)
