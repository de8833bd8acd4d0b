package pgtx

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Beginner starts a transaction; *pgx.Conn and *pgxpool.Pool satisfy it
// (pgx.Tx too, where its Begin makes a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}
