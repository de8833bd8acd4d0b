package outbox

import (
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// Driver is the database of a Writer and the family of its transactions:
// TTx is the transaction type InsertTx, InsertManyTx and EmitTx take, the
// caller's. Pgx builds one on pgx (TTx pgx.Tx), SQL one on database/sql
// (TTx *sql.Tx); pass it to NewWriter or Migrate. The writer's operations
// are the same code on both; the driver only runs the statements. It has
// the shape of inbox.Driver (inbox.Pgx, inbox.SQL), over the same code. A
// Driver is opaque.
type Driver[TTx any] struct {
	// h.DB is the handle Migrate uses; nil when the driver serves only
	// Writers.
	h dbdriver.Handle[TTx]
}

// Beginner starts a transaction (Begin(ctx) (pgx.Tx, error));
// *pgxpool.Pool, *pgxpool.Conn and *pgx.Conn satisfy it (a pgx.Tx too: Migrate then runs in a savepoint of
// it). It is the same interface as inbox.Beginner.
type Beginner = dbdriver.Beginner

// SQLBeginner starts database/sql transactions (BeginTx(ctx,
// *sql.TxOptions) (*sql.Tx, error)); *sql.DB and *sql.Conn satisfy it, and so do the handles of libraries built on database/sql
// (sqlx's *sqlx.DB, the *sql.DB of GORM's db.DB() or of bun and ent). It is
// the same interface as inbox.SQLBeginner.
type SQLBeginner = dbdriver.SQLBeginner

// Pgx returns the driver of a Writer on pgx: its operations take the
// caller's pgx.Tx, and InsertManyTx sends COPY. db is the handle Migrate
// uses (a *pgxpool.Pool, *pgx.Conn, or any Beginner); it may be nil when
// the driver serves only Writers, which never use it.
func Pgx(db Beginner) *Driver[pgx.Tx] { return &Driver[pgx.Tx]{dbdriver.PgxHandle(db)} }

// SQL returns the driver of a Writer on database/sql: its operations take
// the caller's *sql.Tx (from pgx's stdlib driver or lib/pq, and so the
// transactions of sqlx, GORM, ent and bun), and InsertManyTx sends
// multi-row INSERTs (database/sql has no COPY). db is the handle Migrate
// uses (a *sql.DB or *sql.Conn); it may be nil when the driver serves only
// Writers.
func SQL(db SQLBeginner) *Driver[*sql.Tx] { return &Driver[*sql.Tx]{dbdriver.SQLHandle(db)} }

var (
	errNilDriver = errors.New("outbox: driver is nil")
	errNilTx     = errors.New("outbox: tx is nil")
	errNoDB      = errors.New("outbox: the driver has no database handle (outbox.Pgx(nil) or outbox.SQL(nil) serve Writers only)")
)
