package inbox

import (
	"cmp"
	"context"

	"github.com/pgoutbox/pgoutbox/internal/migrate"
)

// Migrate creates or upgrades the inbox table (table, "table" or
// "schema.table"; empty means public.inbox) by applying the migrations in
// sql/inbox, on driver's database (the driver an Inbox takes, on pgx or
// database/sql):
//
//	applied, err := inbox.Migrate(ctx, inbox.Pgx(pool), "")
//
// It is idempotent and safe to call concurrently. It returns the versions
// it applied. It has the shape of outbox.Migrate.
func Migrate[TTx any](ctx context.Context, driver *Driver[TTx], table string) ([]int, error) {
	if err := driver.check(); err != nil {
		return nil, err
	}
	return migrate.Table(ctx, driver.h.DB, "inbox", cmp.Or(table, DefaultTable))
}
