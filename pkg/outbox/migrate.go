package outbox

import (
	"cmp"
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/migrate"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
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
	return migrate.Table(ctx, db, "outbox", cmp.Or(name, DefaultTable), func(table pgname.Table) *strings.Replacer {
		return strings.NewReplacer(
			"public.outbox", table.Sanitize(),
			"public.pgoutbox_uuidv7", pgx.Identifier{table.Schema, "pgoutbox_uuidv7"}.Sanitize(),
			"outbox_created_at_idx", `"`+strings.ReplaceAll(table.Name, `"`, `""`)+`_created_at_idx"`,
			// The relay's state table lives in the outbox's schema.
			"public.pgoutbox_relay_state", pgx.Identifier{table.Schema, "pgoutbox_relay_state"}.Sanitize(),
		)
	})
}
