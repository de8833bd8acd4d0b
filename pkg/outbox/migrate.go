package outbox

import (
	"cmp"
	"context"

	"github.com/pgoutbox/pgoutbox/internal/migrate"
	"github.com/pgoutbox/pgoutbox/internal/pgtx"
)

// Beginner starts a transaction; *pgx.Conn and *pgxpool.Pool satisfy it. It
// is the same interface as inbox.Beginner.
type Beginner = pgtx.Beginner

// Migrate creates or upgrades the outbox table (name, "table" or
// "schema.table"; empty means public.outbox) by applying the migrations in
// sql/outbox. It is idempotent and safe to call concurrently; db is a
// *pgx.Conn or *pgxpool.Pool. It returns the versions it applied. It has
// the shape of inbox.Migrate.
func Migrate(ctx context.Context, db Beginner, name string) ([]int, error) {
	return migrate.Table(ctx, db, "outbox", cmp.Or(name, DefaultTable), migrate.OutboxNames)
}
