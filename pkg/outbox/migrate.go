package outbox

import (
	"context"

	"github.com/pgoutbox/pgoutbox/internal/migrate"
)

// Migrate creates or upgrades the outbox table (name, "table" or
// "schema.table"; empty means public.outbox) by applying the migrations in
// sql/outbox, on the database of driver (on pgx or database/sql):
//
//	applied, err := outbox.Migrate(ctx, outbox.Pgx(pool), "")
//
// It is idempotent and safe to call concurrently. It returns the versions
// it applied. It has the shape of inbox.Migrate.
func Migrate[TTx any](ctx context.Context, driver *Driver[TTx], name string) ([]int, error) {
	switch {
	case driver == nil:
		return nil, errNilDriver
	case driver.h.DB == nil:
		return nil, errNoDB
	}
	return migrate.Outbox(ctx, driver.h.DB, name)
}
