package dbdriver

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
)

// Family is one driver's transaction type TTx (pgx.Tx, *sql.Tx): how the
// caller's transaction becomes a Tx, and how a Tx gives the driver's
// transaction back (to a handler that works in it).
type Family[TTx any] struct {
	// Adopt returns the Tx of the caller's transaction, or nil for a nil
	// one.
	Adopt func(tx TTx) Tx
	// Unwrap returns the transaction behind tx, a Tx of this family.
	Unwrap func(ctx context.Context, tx Tx) (TTx, error)
}

// PgxFamily is the family of pgx transactions.
var PgxFamily = Family[pgx.Tx]{Adopt: PgxTx, Unwrap: PgxOf}

// SQLFamily is the family of database/sql transactions.
var SQLFamily = Family[*sql.Tx]{Adopt: SQLTx, Unwrap: SQLOf}

// Handle is what a public Driver holds: the DB of the handle it was built
// on (nil when it was built on none) and its transactions' family.
type Handle[TTx any] struct {
	DB DB
	Family[TTx]
}

// PgxHandle returns the Handle of a pgx handle; db may be nil.
func PgxHandle(db Beginner) Handle[pgx.Tx] {
	h := Handle[pgx.Tx]{Family: PgxFamily}
	if db != nil {
		h.DB = PgxDB(db)
	}
	return h
}

// SQLHandle returns the Handle of a database/sql handle; db may be nil.
func SQLHandle(db SQLBeginner) Handle[*sql.Tx] {
	h := Handle[*sql.Tx]{Family: SQLFamily}
	if db != nil {
		h.DB = SQLDB(db)
	}
	return h
}
